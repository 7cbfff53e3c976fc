// Package config owns the registry of Bothy's named configuration keys and
// loads their values from defaults, a YAML file and BOTHY_ environment
// variables, in that order (later wins).
//
// Every limit, window and threshold of the server is a key of this registry;
// code names the key, never the number.
package config

import (
	"fmt"
	"strings"
	"time"
)

// Type is the value type of a configuration key.
type Type string

// The value types a key can have.
const (
	TypeInt      Type = "int"
	TypeDuration Type = "duration"
	TypeString   Type = "string"
	TypeBool     Type = "bool"
)

// Key describes one configuration key: its name, type, default, lower bound
// (for int and duration keys) and meaning.
type Key struct {
	Name        string
	Type        Type
	Default     string
	Min         string
	Description string
}

// Names of the keys. Code refers to keys only through these constants.
const (
	ServerAddr                         = "server.addr"
	ServerShutdownTimeout              = "server.shutdown_timeout"
	DatabaseURL                        = "database.url"
	DatabaseMaxConns                   = "database.max_conns"
	DatabaseTxRetryMax                 = "database.tx_retry_max"
	AgentContextMaxBytes               = "agent.context_max_bytes"
	AgentContextMessageMaxBytes        = "agent.context_message_max_bytes"
	ChannelHistoryBackfillLimitDefault = "channel.history_backfill_limit_default"
	ChannelHistoryBackfillLimitMax     = "channel.history_backfill_limit_max"
	MessageMaxContentBytes             = "message.max_content_bytes"
	MessageListContentMaxBytes         = "message.list_content_max_bytes"
	MessageListLimitDefault            = "message.list_limit_default"
	MessageListLimitMax                = "message.list_limit_max"
	EventsListLimitDefault             = "events.list_limit_default"
	EventsListLimitMax                 = "events.list_limit_max"
	AuditDenyAggregateWindow           = "audit.deny_aggregate_window"
	EventsPollMaxWait                  = "events.poll_max_wait"
	RunStartTimeout                    = "run.start_timeout"
	RunStallTimeout                    = "run.stall_timeout"
	RunSweepInterval                   = "run.sweep_interval"
	RateMessagePerMinute               = "ratelimit.rl.message.per_minute"
	RateMessageBurst                   = "ratelimit.rl.message.burst"
	RateAgentRuntimePerMinute          = "ratelimit.rl.agent_runtime.per_minute"
	RateAgentRuntimeBurst              = "ratelimit.rl.agent_runtime.burst"
	RateReadPerMinute                  = "ratelimit.rl.read.per_minute"
	RateReadBurst                      = "ratelimit.rl.read.burst"
	RateAdminPerMinute                 = "ratelimit.rl.admin.per_minute"
	RateAdminBurst                     = "ratelimit.rl.admin.burst"
	GraphQLComplexityLimit             = "graphql.complexity_limit"
	GraphQLDepthLimit                  = "graphql.depth_limit"
	GraphQLParserTokenLimit            = "graphql.parser_token_limit"
	GraphQLIntrospection               = "graphql.introspection"
	GraphQLMaxSelections               = "graphql.max_selections"
	GraphQLMaxResponseBytes            = "graphql.max_response_bytes"
	HTTPMaxBodyBytes                   = "http.max_body_bytes"
	HTTPReadTimeout                    = "http.read_timeout"
	HTTPWriteTimeout                   = "http.write_timeout"
	HTTPIdleTimeout                    = "http.idle_timeout"
	HTTPMaxConcurrentPerPrincipal      = "http.max_concurrent_per_principal"
	HTTPMaxConcurrentWait              = "http.max_concurrent_wait"
	DatabaseOutageRetryAfter           = "database.outage_retry_after"
	RateLimitStore                     = "ratelimit.store"
	LogLevel                           = "log.level"
	TokenDefaultTTL                    = "token.default_ttl"
)

// Registry lists every key with its type, default, minimum and meaning. It
// is the single source of docs/configuration.md.
var Registry = []Key{
	{ServerAddr, TypeString, "127.0.0.1:8080", "", "listen address (host:port) of the HTTP server"},
	{ServerShutdownTimeout, TypeDuration, "15s", "1s", "how long a graceful shutdown waits for requests in flight"},
	{DatabaseURL, TypeString, "", "", "PostgreSQL connection string; empty starts the embedded development database (bothy dev only)"},
	{DatabaseMaxConns, TypeInt, "16", "2", "size of the database connection pool"},
	{DatabaseTxRetryMax, TypeInt, "3", "0", "retries of a unit of work on serialization failure or deadlock"},
	{AgentContextMaxBytes, TypeInt, "65536", "1", "budget of content_md over thread_context and channel_context of a run context"},
	{AgentContextMessageMaxBytes, TypeInt, "8192", "1", "cut of one run context element's content_md"},
	{ChannelHistoryBackfillLimitDefault, TypeInt, "50", "0", "history_backfill_limit of a new channel"},
	{ChannelHistoryBackfillLimitMax, TypeInt, "500", "0", "highest allowed history_backfill_limit"},
	{MessageMaxContentBytes, TypeInt, "65536", "1", "longest content_md accepted"},
	{MessageListContentMaxBytes, TypeInt, "4096", "1", "cut of content_md in history lists"},
	{MessageListLimitDefault, TypeInt, "50", "1", "messages per history page when the request names no limit"},
	{MessageListLimitMax, TypeInt, "200", "1", "most messages one history page may ask for"},
	{EventsListLimitDefault, TypeInt, "100", "1", "events per listEvents page when the request names no limit"},
	{EventsListLimitMax, TypeInt, "500", "1", "most events one listEvents page may ask for"},
	{AuditDenyAggregateWindow, TypeDuration, "60s", "1s", "one audit row per actor, action and reason in this window"},
	{EventsPollMaxWait, TypeDuration, "30s", "0s", "longest wait of pollAgentEvents"},
	{RunStartTimeout, TypeDuration, "5m", "1s", "a queued run not started by then fails with reason timeout"},
	{RunStallTimeout, TypeDuration, "30m", "1s", "a running run without activity for this long fails with reason timeout"},
	{RunSweepInterval, TypeDuration, "5s", "100ms", "how often each replica looks for runs past run.start_timeout or run.stall_timeout"},
	{RateMessagePerMinute, TypeInt, "60", "1", "refill of the rl.message bucket per principal and minute"},
	{RateMessageBurst, TypeInt, "20", "1", "size of the rl.message bucket per principal"},
	{RateAgentRuntimePerMinute, TypeInt, "1200", "1", "refill of the rl.agent_runtime bucket per principal and minute"},
	{RateAgentRuntimeBurst, TypeInt, "200", "1", "size of the rl.agent_runtime bucket per principal"},
	{RateReadPerMinute, TypeInt, "1200", "1", "refill of the rl.read bucket per principal and minute"},
	{RateReadBurst, TypeInt, "200", "1", "size of the rl.read bucket per principal"},
	{RateAdminPerMinute, TypeInt, "60", "1", "refill of the rl.admin bucket per principal and minute"},
	{RateAdminBurst, TypeInt, "20", "1", "size of the rl.admin bucket per principal"},
	{GraphQLComplexityLimit, TypeInt, "10000", "1", "highest GraphQL query complexity; a list field costs its item times its limit (or default)"},
	{GraphQLDepthLimit, TypeInt, "12", "1", "deepest GraphQL selection"},
	{GraphQLParserTokenLimit, TypeInt, "15000", "100", "most lexical tokens the GraphQL parser reads from one document"},
	{GraphQLIntrospection, TypeBool, "true", "", "whether GraphQL introspection (and so the playground's schema view) is on"},
	{GraphQLMaxSelections, TypeInt, "500", "10", "most selections (fields, aliases, fragment spreads, inline fragments) written in one GraphQL document, checked before validation"},
	{GraphQLMaxResponseBytes, TypeInt, "8388608", "65536", "largest GraphQL (and REST) response body; a larger one answers validation_failed response_too_large"},
	{HTTPMaxBodyBytes, TypeInt, "1048576", "1024", "larger request bodies get 413 payload_too_large"},
	{HTTPReadTimeout, TypeDuration, "30s", "1s", "longest time to read a request, headers and body; a slower client is disconnected"},
	{HTTPWriteTimeout, TypeDuration, "30s", "1s", "longest time to answer a request (a long poll gets events.poll_max_wait on top)"},
	{HTTPIdleTimeout, TypeDuration, "60s", "1s", "how long an idle keep-alive connection stays open"},
	{HTTPMaxConcurrentPerPrincipal, TypeInt, "8", "1", "most requests of one principal in flight at once on /graphql and the REST routes; more wait (http.max_concurrent_wait)"},
	{HTTPMaxConcurrentWait, TypeDuration, "5s", "0s", "how long a request over http.max_concurrent_per_principal waits for a slot before it answers 429 rate_limited (too_many_concurrent)"},
	{DatabaseOutageRetryAfter, TypeDuration, "5s", "1s", "Retry-After of the 503 unavailable answers while the database does not answer"},
	{RateLimitStore, TypeString, "postgres", "", "where rate-limit buckets live: postgres (shared by every replica) or memory (this process only)"},
	{LogLevel, TypeString, "info", "", "lowest log level written: debug, info, warn or error"},
	{TokenDefaultTTL, TypeDuration, "0s", "0s", "lifetime of tokens made by bothy token create; 0s means no expiry"},
}

// lookup returns the registry entry of name.
func lookup(name string) (Key, bool) {
	for _, k := range Registry {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// EnvName returns the environment variable that overrides key name:
// BOTHY_ plus the name in upper case with dots as underscores.
func EnvName(name string) string {
	return "BOTHY_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
}

// check parses raw as a value of k and enforces k.Min. The error names the
// key so that a start-up failure says what to fix.
func (k Key) check(raw string) (any, error) {
	switch k.Type {
	case TypeInt:
		var v int
		if _, err := fmt.Sscan(raw, &v); err != nil || fmt.Sprint(v) != strings.TrimSpace(raw) {
			return nil, fmt.Errorf("config key %s: %q is not an integer", k.Name, raw)
		}
		if k.Min != "" {
			var m int
			fmt.Sscan(k.Min, &m)
			if v < m {
				return nil, fmt.Errorf("config key %s: %d is below the minimum %s", k.Name, v, k.Min)
			}
		}
		return v, nil
	case TypeDuration:
		v, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("config key %s: %q is not a duration (for example 30s or 5m)", k.Name, raw)
		}
		if k.Min != "" {
			m, _ := time.ParseDuration(k.Min)
			if v < m {
				return nil, fmt.Errorf("config key %s: %s is below the minimum %s", k.Name, v, k.Min)
			}
		}
		return v, nil
	case TypeBool:
		switch strings.ToLower(strings.TrimSpace(raw)) {
		case "true", "1", "yes", "on":
			return true, nil
		case "false", "0", "no", "off":
			return false, nil
		}
		return nil, fmt.Errorf("config key %s: %q is not a boolean (true or false)", k.Name, raw)
	default:
		return raw, nil
	}
}
