package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/config"
)

func TestDefaultsMatchRegistry(t *testing.T) {
	c := config.Defaults()
	if got := c.Int(config.AgentContextMaxBytes); got != 65536 {
		t.Fatalf("agent.context_max_bytes default = %d, want 65536", got)
	}
	if got := c.Duration(config.AuditDenyAggregateWindow); got != time.Minute {
		t.Fatalf("audit.deny_aggregate_window default = %s, want 1m", got)
	}
	if got := c.String(config.ServerAddr); got != "127.0.0.1:8080" {
		t.Fatalf("server.addr default = %q", got)
	}
}

func TestLoadSources(t *testing.T) {
	dir := t.TempDir()
	nested := filepath.Join(dir, "nested.yaml")
	os.WriteFile(nested, []byte("ratelimit:\n  rl.message:\n    burst: 7\ngraphql:\n  depth_limit: 5\n"), 0o600)
	flat := filepath.Join(dir, "flat.yaml")
	os.WriteFile(flat, []byte("\"ratelimit.rl.message.burst\": 9\n"), 0o600)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("graphql:\n  depth: 5\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("events:\n  poll_max_wait: soon\n"), 0o600)

	tests := []struct {
		name    string
		file    string
		env     []string
		key     string
		want    int
		wantErr string
	}{
		{"default", "", nil, config.RateMessageBurst, 20, ""},
		{"nested yaml", nested, nil, config.RateMessageBurst, 7, ""},
		{"flat yaml", flat, nil, config.RateMessageBurst, 9, ""},
		{"env beats yaml", nested, []string{"BOTHY_RATELIMIT_RL_MESSAGE_BURST=3"}, config.RateMessageBurst, 3, ""},
		{"env of other key", nested, []string{"BOTHY_GRAPHQL_DEPTH_LIMIT=4"}, config.GraphQLDepthLimit, 4, ""},
		{"unknown yaml key", unknown, nil, "", 0, "unknown key graphql.depth"},
		{"bad duration", bad, nil, "", 0, "events.poll_max_wait"},
		{"not an integer", "", []string{"BOTHY_AGENT_CONTEXT_MAX_BYTES=lots"}, "", 0, "agent.context_max_bytes"},
		{"below minimum", "", []string{"BOTHY_AGENT_CONTEXT_MAX_BYTES=0"}, "", 0, "agent.context_max_bytes: 0 is below the minimum 1"},
		{"bad bool", "", []string{"BOTHY_GRAPHQL_INTROSPECTION=maybe"}, "", 0, "graphql.introspection"},
		{"unknown log level", "", []string{"BOTHY_LOG_LEVEL=verbose"}, "", 0, `log.level: "verbose" is not one of debug, info, warn, error`},
		{"log level in capitals", "", []string{"BOTHY_LOG_LEVEL=INFO"}, "", 0, "log.level"},
		{"valid log level", "", []string{"BOTHY_LOG_LEVEL=debug"}, config.RateMessageBurst, 20, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(tc.file, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to name %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Int(tc.key); got != tc.want {
				t.Fatalf("%s = %d, want %d", tc.key, got, tc.want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	if got := config.EnvName("agent.context_max_bytes"); got != "BOTHY_AGENT_CONTEXT_MAX_BYTES" {
		t.Fatalf("EnvName = %s", got)
	}
}

// TestConfigurationDocIsCurrent fails when docs/configuration.md differs
// from the registry; make generate rewrites it.
func TestConfigurationDocIsCurrent(t *testing.T) {
	data, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatalf("read docs/configuration.md: %v (run make generate)", err)
	}
	if string(data) != config.Markdown() {
		t.Fatal("docs/configuration.md is out of date: run make generate and commit the result")
	}
}

func TestRegistryCoversSpecKeys(t *testing.T) {
	spec := []string{"server.addr", "database.url", "database.max_conns", "database.tx_retry_max",
		"agent.context_max_bytes", "agent.context_message_max_bytes", "channel.history_backfill_limit_default",
		"channel.history_backfill_limit_max", "message.max_content_bytes", "message.list_content_max_bytes",
		"audit.deny_aggregate_window", "events.poll_max_wait", "run.start_timeout", "run.stall_timeout",
		"ratelimit.rl.message.per_minute", "ratelimit.rl.message.burst", "ratelimit.rl.agent_runtime.per_minute",
		"ratelimit.rl.agent_runtime.burst", "ratelimit.rl.read.per_minute", "ratelimit.rl.read.burst",
		"ratelimit.rl.admin.per_minute", "ratelimit.rl.admin.burst", "graphql.complexity_limit",
		"graphql.depth_limit", "http.max_body_bytes"}
	have := map[string]bool{}
	for _, k := range config.Registry() {
		have[k.Name] = true
		if k.Description == "" {
			t.Errorf("%s has no description", k.Name)
		}
	}
	for _, k := range spec {
		if !have[k] {
			t.Errorf("spec key %s is not registered", k)
		}
	}
}
