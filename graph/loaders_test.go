package graph

import (
	"context"
	"errors"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/platform/problem"
)

// stubStream is a subscription resolver whose agentEvents stream hands out
// evs and ends.
type stubStream struct{ evs []model.AgentEvent }

func (stubStream) Events(context.Context, *string, []*model.LiveCursor) (<-chan model.Event, error) {
	return nil, errors.New("not used by this test")
}

func (s stubStream) AgentEvents(context.Context, *string) (<-chan model.AgentEvent, error) {
	ch := make(chan model.AgentEvent, len(s.evs))
	for _, e := range s.evs {
		ch <- e
	}
	close(ch)
	return ch, nil
}

// stubRoot is the real resolver with the subscription root replaced.
type stubRoot struct {
	*Resolver
	sub stubStream
}

func (r stubRoot) Subscription() generated.SubscriptionResolver { return r.sub }

// loadersSeen records, per response, the loaders its fields resolved with.
type loadersSeen struct{ got []*Loaders }

func (*loadersSeen) ExtensionName() string                   { return "LoadersSeen" }
func (*loadersSeen) Validate(graphql.ExecutableSchema) error { return nil }
func (s *loadersSeen) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	l, _ := LoadersFor(ctx)
	s.got = append(s.got, l)
	return next(ctx)
}

// subscribe runs `subscription { agentEvents { ... run } }` over two events
// on the generated executor, with or without PerResponse, and returns the
// loaders each event saw and the errors the presenter was given. The run
// field reads through the OwnRuns loader; without a principal in the
// context that loader answers unauthorized without reading anything.
func subscribe(t *testing.T, withLoaders bool) (seen []*Loaders, presented []error) {
	t.Helper()
	evs := []model.AgentEvent{
		&model.AgentInvocationEvent{AgentEventBase: model.AgentEventBase{Seq: "1", Type: "agent.invocation", RunID: "r1"}},
		&model.AgentInvocationEvent{AgentEventBase: model.AgentEventBase{Seq: "2", Type: "agent.invocation", RunID: "r2"}},
	}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: stubRoot{Resolver: &Resolver{}, sub: stubStream{evs: evs}}})
	exec := executor.New(es)
	if withLoaders {
		exec.Use(PerResponse{})
	}
	rec := &loadersSeen{}
	exec.Use(rec)
	exec.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		presented = append(presented, err)
		return graphql.DefaultErrorPresenter(ctx, err)
	})
	ctx := graphql.StartOperationTrace(context.Background())
	op, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{
		Query: `subscription { agentEvents { seq ... on AgentInvocationEvent { run { id } } } }`})
	if errs != nil {
		t.Fatalf("operation: %v", errs)
	}
	next, ctx := exec.DispatchOperation(ctx, op)
	for range evs {
		if resp := next(ctx); resp == nil {
			t.Fatal("the subscription ended before its events")
		}
	}
	return rec.got, presented
}

// TestLoadersForFailsLoudly: a field that reads through a loader in an
// executor without the PerResponse extension fails with an internal error
// naming the missing extension (the server's presenter logs every internal
// error with its cause) instead of quietly building loaders per call.
func TestLoadersForFailsLoudly(t *testing.T) {
	if _, err := LoadersFor(context.Background()); err == nil || problem.CodeOf(err) != problem.InternalError || !errors.Is(problem.From("graph.testLoadersForFailsLoudly", err).Cause(), errNoLoaders) {
		t.Fatalf("LoadersFor without loaders: %v, want internal_error caused by %v", err, errNoLoaders)
	}
	seen, presented := subscribe(t, false)
	for i, l := range seen {
		if l != nil {
			t.Fatalf("event %d had loaders without the extension", i)
		}
	}
	if len(presented) != 2 {
		t.Fatalf("%d errors presented, want one per event: %v", len(presented), presented)
	}
	for _, err := range presented {
		if p := problem.From("graph.testLoadersForFailsLoudly", err); p.Code != problem.InternalError || !errors.Is(p.Cause(), errNoLoaders) {
			t.Fatalf("presented %v, want internal_error caused by %v", err, errNoLoaders)
		}
	}
}

// TestPerResponseLoadersPerSubscriptionEvent: with the extension, every
// event of a subscription resolves with loaders of its own (the fields of
// one event batch together; nothing is cached from one event to the next).
func TestPerResponseLoadersPerSubscriptionEvent(t *testing.T) {
	seen, presented := subscribe(t, true)
	if len(seen) != 2 || seen[0] == nil || seen[1] == nil || seen[0] == seen[1] {
		t.Fatalf("loaders per event: %v, want two distinct ones", seen)
	}
	// The run field did read through its loader: without a principal the
	// loader answers unauthorized, never the wiring error.
	if len(presented) != 2 {
		t.Fatalf("%d errors presented, want one per event: %v", len(presented), presented)
	}
	for _, err := range presented {
		if p := problem.From("graph.testPerResponseLoadersPerSubscriptionEvent", err); p.Code != problem.Unauthorized {
			t.Fatalf("presented %v, want unauthorized from the loader", err)
		}
	}
}
