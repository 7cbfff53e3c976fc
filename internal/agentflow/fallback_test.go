package agentflow_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// TestAutoTransportFallsBackToThePoll: behind a proxy that does not pass
// WebSocket upgrades (it answers them 400), agent.Run's default transport
// reads the stream by long poll instead and answers the run; with
// TransportWS the same adapter cannot read its stream there.
func TestAutoTransportFallsBackToThePoll(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	target, _ := url.Parse(env.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var upgrades atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			upgrades.Add(1)
			http.Error(w, "no upgrades here", http.StatusBadRequest)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "fb-1", "@lotse are you there behind the proxy?")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var logs apitest.Buffer
	err := agent.Run(ctx, agent.Config{Server: proxy.URL, Token: env.World.Token("lotse"), Once: true, PollWait: time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, func(ctx context.Context, task *agent.Task) error {
		return task.Answer(ctx, "yes, by long poll")
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if upgrades.Load() == 0 || !strings.Contains(logs.String(), "reading the stream by long poll") {
		t.Fatalf("no fallback seen (%d upgrades):\n%s", upgrades.Load(), logs.String())
	}
	if env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND content_md = 'yes, by long poll'`, thread) != 1 {
		t.Fatal("the run was not answered")
	}
	client, err := agent.NewClient(proxy.URL, env.World.Token("lotse"), agent.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stream := client.AgentStream()
	defer stream.Close()
	if _, err := stream.Next(ctx, "0", time.Second); err == nil || !strings.Contains(err.Error(), "does not upgrade") {
		t.Fatalf("the WebSocket stream behind the proxy: %v", err)
	}
}
