package authz

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
	"bothy.example.com/bothy/internal/ratelimit"
)

// Source resolves resources of some kinds into paths. The modules that own
// the resources implement it (chat for spaces, channels and threads,
// messaging for messages, runs for runs).
type Source interface {
	// Path returns the path of the resource of kind with id; an unknown id
	// gives a Path with Exists false and no error.
	Path(ctx context.Context, kind ResourceKind, id string) (Path, error)
}

// Service is the authorization module: grants, decisions, audit, filter.
type Service struct {
	st      store
	limiter ratelimit.Limiter
	window  time.Duration
	log     *slog.Logger
	sources map[ResourceKind]Source
	errors  *prometheus.CounterVec
	faults  Faults // nil in production
}

// Faults is a test instrument: a non-nil error from TriggerHolders is
// returned by WithTrigger instead of reading, which proves that a failing
// trust source fails the whole run context. Production passes none.
type Faults interface {
	TriggerHolders() error
}

// Option adjusts a Service at construction.
type Option func(*Service)

// WithFaults installs f (tests only; see Faults).
func WithFaults(f Faults) Option { return func(s *Service) { s.faults = f } }

// NewService returns the authorization service. window is
// audit.deny_aggregate_window; reg receives bothy_authz_errors_total.
func NewService(pool db.Querier, c clock.Clock, limiter ratelimit.Limiter, window time.Duration, log *slog.Logger, reg prometheus.Registerer, opts ...Option) *Service {
	s := &Service{st: store{pool: pool, clock: c}, limiter: limiter, window: window, log: log, sources: map[ResourceKind]Source{},
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_authz_errors_total",
			Help: "Authorization errors by reason (filter_mismatch: a list query returned an item the reader may not see)."}, []string{"reason"})}
	reg.MustRegister(s.errors)
	// At zero from the start, so that the documented alert sees the first.
	s.errors.WithLabelValues("filter_mismatch").Add(0)
	for _, o := range opts {
		o(s)
	}
	return s
}

// Register makes src the source of paths of the given kinds.
func (s *Service) Register(src Source, kinds ...ResourceKind) {
	for _, k := range kinds {
		s.sources[k] = src
	}
}

// Target is what an action is about, as the door Authorize takes it: a
// Resource named by id (resolved through its source) or Facts the caller
// already read. Only this package's types are targets.
type Target interface{ target() }

// Resource names what an action is about by id.
type Resource struct {
	Kind ResourceKind
	ID   string
}

func (Resource) target() {}

// Lookup is a target the caller reads itself, at the door: the door calls
// it, on the caller's goroutine and ctx, while the token of the action is
// being taken from a shared bucket, so that the two round trips overlap. It
// returns the facts of the resource (with the actor's grant level when the
// same statement read it; a missing resource as a Path with Exists false).
// A rate-limit refusal still wins over what it returns; its error fails the
// decision (internal).
type Lookup func(ctx context.Context) (Facts, error)

func (Lookup) target() {}

func (Facts) target() {}

// Facts is a resource the caller already read (its Path), so the door does
// not resolve it again, with the actor's grant level there when an earlier
// decision of the same request read it on the same space and channel
// (Decision.Grant): then the door runs no grant statement at all.
type Facts struct {
	Path Path
	// Grant is the known grant level; nil makes the door read it.
	Grant *Level
}

// Known returns the facts of p with a grant level already read.
func Known(p Path, grant Level) Facts { return Facts{Path: p, Grant: &grant} }

// Own returns the facts of the actor's own resource of kind: KindAgent is
// its event stream, KindPrincipal the principal itself (the viewer). It
// always exists, no grant applies (so no statement runs), and only its
// owner (and the instance's owners) may see it.
func Own(kind ResourceKind, actorID string) Facts {
	return Known(Path{Exists: true, Kind: kind, ID: actorID, OwnerID: actorID, Global: true, Private: true}, None)
}

// Instance returns the facts of the instance itself, for actions across it
// (events.list): every active principal reads it, no grant applies.
func Instance() Facts { return Known(Path{Exists: true, Kind: KindInstance, Global: true}, None) }

// PathOf resolves r through its source. A malformed id is simply unknown.
func (s *Service) PathOf(ctx context.Context, r Resource) (Path, error) {
	src, ok := s.sources[r.Kind]
	if !ok {
		return Path{}, fmt.Errorf("authz: no source for %s", r.Kind)
	}
	if !ids.Valid(r.ID) && r.Kind != KindInstance {
		return Path{Kind: r.Kind, ID: r.ID}, nil
	}
	p, err := src.Path(ctx, r.Kind, r.ID)
	if err != nil {
		return Path{}, err
	}
	p.Kind, p.ID = r.Kind, r.ID
	return p, nil
}

// Authorize is the one door of every request's right: it decides whether
// actor may do action on target. It takes a token of the action's rate-limit
// class (429 beyond it; not for work marked Unmetered or Prepaid), resolves
// a Resource's path, loads the actor's grant level there unless the Facts
// carry it, applies Decide (the rule table), audits a denial (aggregated)
// or an audited allow, and returns the decision with the path. A decision of
// a list action across the instance carries the reader's Scope. The error
// is non-nil for a denial (the decision's error: 404 for a missing or
// unreadable resource alike), a rate limit, or a failure to decide
// (internal). Inside a traced request each call is a span (authz.authorize)
// carrying the action and the decision.
func (s *Service) Authorize(ctx context.Context, actor identity.Principal, action Action, target Target) (Decision, Path, error) {
	ctx, span := tracing.Start(ctx, "authz.authorize", trace.SpanKindInternal)
	if !span.IsRecording() {
		return s.authorize(ctx, actor, action, target)
	}
	defer span.End()
	d, p, err := s.authorize(ctx, actor, action, target)
	span.SetAttributes(spanAction.String(string(action)))
	switch {
	case d.Allow:
		span.SetAttributes(spanDecision.String("allow"))
	case d.Code != "":
		span.SetAttributes(spanDecision.String("deny"), spanCode.String(string(d.Code)), spanReason.String(d.Reason))
	default:
		// No decision was reached: reading the facts or writing the audit
		// failed. The error's text stays out of the span.
		span.SetAttributes(spanDecision.String("error"))
		span.SetStatus(codes.Error, "authorization failed")
	}
	return d, p, err
}

// The attributes of the door's span: the action, the decision (allow, deny
// or error) and a denial's problem code and reason. Never the actor's
// token or any content.
const (
	spanAction   = attribute.Key("bothy.authz.action")
	spanDecision = attribute.Key("bothy.authz.decision")
	spanCode     = attribute.Key("bothy.authz.code")
	spanReason   = attribute.Key("bothy.authz.reason")
)

// authorize is Authorize without its span.
func (s *Service) authorize(ctx context.Context, actor identity.Principal, action Action, target Target) (Decision, Path, error) {
	// The token is taken first; a refusal the process decides alone
	// returns before any statement. A token that a shared bucket must
	// grant is taken while the target is read, and its answer is awaited
	// before anything is decided or written.
	var spend *ratelimit.Spend
	if !isUnmetered(ctx) && firstOfOperation(ctx, action) {
		spend = s.beginSpend(actor, action)
		if spend.Known() {
			if err := spent(ctx, spend); err != nil {
				return Decision{Code: problem.RateLimited}, Path{}, err
			}
			spend = nil
		}
	}
	p, grant, err := s.factsOf(ctx, actor, target)
	if spend != nil {
		if err := spent(ctx, spend); err != nil {
			return Decision{Code: problem.RateLimited}, Path{}, err
		}
	}
	if err != nil {
		return Decision{}, p, problem.Internal("authz.authorize: read facts", err)
	}
	d := Decide(action, ActorOf(actor), grant, p)
	if d.Allow && scoped[action] {
		sc, err := s.readScope(ctx, actor)
		if err != nil {
			return Decision{}, p, problem.Internal("authz.authorize: read scope", err)
		}
		d.Scope = &sc
	}
	if err := s.audit(ctx, actor.ID, auditedAs(action, actor, d), d, p); err != nil {
		return Decision{}, p, problem.Internal("authz.authorize: audit", err)
	}
	return d, p, d.Err()
}

// factsOf reads what the door decides on: the path of target and the
// actor's grant level there (None for an inactive actor, who has no
// rights whatever the grants say).
func (s *Service) factsOf(ctx context.Context, actor identity.Principal, target Target) (Path, Level, error) {
	var f Facts
	switch t := target.(type) {
	case Resource:
		p, err := s.PathOf(ctx, t)
		if err != nil {
			return Path{}, None, err
		}
		f = Facts{Path: p}
	case Facts:
		f = t
	case Lookup:
		var err error
		if f, err = t(ctx); err != nil {
			return Path{}, None, err
		}
	default:
		return Path{}, None, fmt.Errorf("authz: unknown target %T", target)
	}
	switch {
	case f.Grant != nil:
		return f.Path, *f.Grant, nil
	case ActorOf(actor).Active:
		g, err := s.grantAt(ctx, actor.ID, f.Path)
		return f.Path, g, err
	}
	return f.Path, None, nil
}

// grantAt loads the highest live grant level of principal on the space and
// channel of p. A missing resource runs the same grant statement as a
// hidden one (on an id no grant has), so that the statements, and so the
// time of the answer, do not tell the two apart. Instance-level resources
// take their rights from no grant, but run the same statement for the same
// reason.
func (s *Service) grantAt(ctx context.Context, principalID string, p Path) (Level, error) {
	spaces, channels := []string{p.SpaceID}, nonEmpty(p.ChannelID)
	if !p.Exists || p.Global {
		spaces, channels = []string{noTarget}, []string{noTarget}
	}
	levels, err := s.grantLevelsIn(ctx, principalID, spaces, channels)
	if err != nil {
		return None, err
	}
	if !p.Exists {
		return None, nil
	}
	return levels.at(p), nil
}

// noTarget is the id the grant statement of a missing resource asks for:
// the nil UUID, which no space or channel has.
const noTarget = "00000000-0000-0000-0000-000000000000"

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// levelMap holds the highest live grant level per target.
type levelMap struct {
	space, channel map[string]Level
}

func newLevelMap() levelMap { return levelMap{space: map[string]Level{}, channel: map[string]Level{}} }

// raise records level l on a space or channel target if it is higher.
func (m levelMap) raise(space, channel string, l Level) {
	if space != "" && l > m.space[space] {
		m.space[space] = l
	}
	if channel != "" && l > m.channel[channel] {
		m.channel[channel] = l
	}
}

// at returns the level that applies at p: the higher of its channel's and
// its space's.
func (m levelMap) at(p Path) Level {
	l := m.space[p.SpaceID]
	if p.ChannelID != "" && m.channel[p.ChannelID] > l {
		l = m.channel[p.ChannelID]
	}
	return l
}

// grantLevelsIn is liveGrants for one principal on the given targets.
func (s *Service) grantLevelsIn(ctx context.Context, principalID string, spaces, channels []string) (levelMap, error) {
	all, err := s.st.liveGrants(ctx, []string{principalID}, &struct{ spaces, channels []string }{spaces, channels})
	if err != nil {
		return levelMap{}, err
	}
	if m, ok := all[principalID]; ok {
		return m, nil
	}
	return newLevelMap(), nil
}

// Filter is the door of filter mode for list and window queries: it
// decides action (Decide, the rule table) on every target and returns which
// may be shown. Targets whose grant level is known cost no statement; the
// grants of all others are loaded in one. It takes no token (the list's own
// action took it) and audits nothing: an item the query returned but the
// reader may not see is a bug of the query, so it is dropped, logged at
// error level with only the action and the resource kind, and counted in
// bothy_authz_errors_total{reason="filter_mismatch"}.
func (s *Service) Filter(ctx context.Context, actor identity.Principal, action Action, targets []Facts) ([]bool, error) {
	a := ActorOf(actor)
	spaces, channels := map[string]bool{}, map[string]bool{}
	load := false
	for _, t := range targets {
		if t.Grant != nil || !t.Path.Exists {
			continue // a missing resource is denied without its grants
		}
		load = true
		spaces[t.Path.SpaceID] = true
		if t.Path.ChannelID != "" {
			channels[t.Path.ChannelID] = true
		}
	}
	levels := newLevelMap()
	if load {
		var err error
		levels, err = s.grantLevelsIn(ctx, actor.ID, slices.Collect(maps.Keys(spaces)), slices.Collect(maps.Keys(channels)))
		if err != nil {
			return nil, err
		}
	}
	ok := make([]bool, len(targets))
	for i, t := range targets {
		grant := levels.at(t.Path)
		if t.Grant != nil {
			grant = *t.Grant
		}
		ok[i] = Decide(action, a, grant, t.Path).Allow
		if !ok[i] {
			s.mismatch(ctx, action, t.Path)
		}
	}
	return ok, nil
}

// FilterMany decides action on every target for every actor at once, as
// Filter decides it for one: out[i][j] says whether actors[i] may be shown
// targets[j]. The grants of all actors on all targets are read in one
// statement, whatever the number of actors, so that the fan-out of a
// subscription costs the same for one listener as for thousands. Unlike
// Filter, a denial is no mismatch: the fan-out asks about events that were
// not chosen for any reader. It takes no token and audits nothing.
//
// Errors: a database error.
func (s *Service) FilterMany(ctx context.Context, actors []identity.Principal, action Action, targets []Facts) ([][]bool, error) {
	spaces, channels := map[string]bool{}, map[string]bool{}
	load := false
	for _, t := range targets {
		if t.Grant != nil || !t.Path.Exists {
			continue
		}
		load = true
		spaces[t.Path.SpaceID] = true
		if t.Path.ChannelID != "" {
			channels[t.Path.ChannelID] = true
		}
	}
	all := map[string]levelMap{}
	if load && len(actors) > 0 {
		ids := make([]string, len(actors))
		for i, a := range actors {
			ids[i] = a.ID
		}
		var err error
		all, err = s.st.liveGrants(ctx, ids, &struct{ spaces, channels []string }{slices.Collect(maps.Keys(spaces)), slices.Collect(maps.Keys(channels))})
		if err != nil {
			return nil, err
		}
	}
	out := make([][]bool, len(actors))
	for i, actor := range actors {
		a := ActorOf(actor)
		levels, ok := all[actor.ID]
		if !ok {
			levels = newLevelMap()
		}
		out[i] = make([]bool, len(targets))
		for j, t := range targets {
			grant := levels.at(t.Path)
			if t.Grant != nil {
				grant = *t.Grant
			}
			out[i][j] = Decide(action, a, grant, t.Path).Allow
		}
	}
	return out, nil
}

// mismatch records a filter mismatch: logged at error level with only the
// action and the resource kind, and counted in bothy_authz_errors_total.
func (s *Service) mismatch(ctx context.Context, action Action, p Path) {
	s.errors.WithLabelValues("filter_mismatch").Inc()
	s.log.ErrorContext(ctx, "filter mismatch: a query returned an item the reader may not see",
		"action", string(action), "resource_kind", string(p.Kind))
}

// audit records a denial (one row per actor, action and reason per
// audit.deny_aggregate_window, with a count) or an allow of an action whose
// row says allows are audited. Details hold ids only, never content.
func (s *Service) audit(ctx context.Context, actorID string, action Action, d Decision, p Path) error {
	now := s.st.clock.Now()
	var resID any
	if ids.Valid(p.ID) {
		resID = p.ID
	}
	if d.Allow {
		if !table[action].AuditAllow {
			return nil
		}
		reason, _ := ctx.Value(auditReasonKey{}).(string)
		return s.st.auditAllow(ctx, actorID, action, reason, p.Kind, resID, now)
	}
	return s.st.auditDeny(ctx, actorID, action, d.Reason, p.Kind, resID, now.Truncate(s.window), now)
}

// SystemActorID is the actor of what the server does by itself, with no
// request (the files sweep's deletions): the nil UUID, which is the local
// operator's (admin.Operator), so that the log answers such rows as the
// actor "operator" (identity.OperatorHandle): the server applies the
// operator's settings.
const SystemActorID = "00000000-0000-0000-0000-000000000000"

// AuditSystem records an allow of action on the resource (kind, id) done
// by the server itself (SystemActorID), whatever the action's row says,
// on the pool like every audit row. No door decides such an action.
func (s *Service) AuditSystem(ctx context.Context, action Action, kind ResourceKind, id string) error {
	var resID any
	if ids.Valid(id) {
		resID = id
	}
	reason, _ := ctx.Value(auditReasonKey{}).(string)
	return s.st.auditAllow(ctx, SystemActorID, action, reason, kind, resID, s.st.clock.Now())
}

// auditedAs is the action an allow is audited as: an owner's read of a
// file is recorded (as file.read.owner, whose row audits allows), since
// an owner reads what others posted; every other decision as itself.
func auditedAs(action Action, actor identity.Principal, d Decision) Action {
	if action == FileRead && d.Allow && actor.Owner() {
		return FileReadByOwner
	}
	return action
}

// AuditRow is one row of the audit log, for tests and operators.
type AuditRow struct {
	ActorID, Action, Decision, Reason, ResourceKind string
	Count                                           int
}

// beginSpend starts taking the token of action's rate-limit class from
// actor's bucket. An action without a row in Table takes none (Decide
// refuses it). Like the audit rows, the spend stays outside the
// transaction of any context (the limiter takes no context; its shared
// store writes on the pool): a spent token holds when the caller's unit
// rolls back.
func (s *Service) beginSpend(actor identity.Principal, action Action) *ratelimit.Spend {
	spec, ok := table[action]
	if !ok {
		return ratelimit.Decided(true, 0)
	}
	return s.limiter.Begin(actor.ID, spec.Class)
}

// spent waits for sp, records what it left in the bucket in the request's
// meter (the answer's RateLimit header fields, for refusals too), and
// returns the rate-limit problem of a refusal.
func spent(ctx context.Context, sp *ratelimit.Spend) error {
	ok, after := sp.Wait()
	ratelimit.Observe(ctx, sp)
	if !ok {
		return problem.RateLimit(after)
	}
	return nil
}

// Scope is where a principal may read, as the predicate of a list query
// across the instance: every space and channel named by a live grant to it
// or its groups, and, for an agent, what it operates. Owners see all. The
// list's module selects by it; filter mode then checks every item.
type Scope struct {
	All      bool
	Spaces   []string
	Channels []string
	// Operator is the agent the operator rule gives read to: the actor
	// itself when it is an agent (empty otherwise). The channels whose
	// effective operator it is now, and the threads whose fixed operator
	// it is, are in the scope.
	Operator string
}

// readScope returns actor's Scope for the decision of a list action.
func (s *Service) readScope(ctx context.Context, actor identity.Principal) (Scope, error) {
	a := ActorOf(actor)
	if !a.Active {
		return Scope{}, nil
	}
	if a.Owner {
		return Scope{All: true}, nil
	}
	all, err := s.st.liveGrants(ctx, []string{actor.ID}, nil)
	if err != nil {
		return Scope{}, fmt.Errorf("read scope: %w", err)
	}
	var sc Scope
	if m, ok := all[actor.ID]; ok {
		sc.Spaces = slices.Collect(maps.Keys(m.space))
		sc.Channels = slices.Collect(maps.Keys(m.channel))
	}
	if a.Kind == identity.KindAgent {
		sc.Operator = a.ID
	}
	return sc, nil
}

// tokenFree says why the decisions of a context take no rate-limit token.
type tokenFree int

// The reasons: a local operator tool (Unmetered), or a later step of a
// request whose token the door already took (Prepaid).
const (
	freeOperator tokenFree = iota + 1
	freePrepaid
)

type tokenFreeKey struct{}

// Unmetered returns ctx marked as the work of a local operator tool (the
// command line and the example-world script), whose decisions take no
// rate-limit token: an operator at the database's terminal is not a client
// to throttle. Decisions and audit are unchanged. Never set it from a
// request path.
func Unmetered(ctx context.Context) context.Context {
	return context.WithValue(ctx, tokenFreeKey{}, freeOperator)
}

type auditReasonKey struct{}

// WithAuditReason returns ctx whose audited allows record reason: why the
// server acted by itself, under the operator, where no person asked (a
// person disabled because the identity provider refused them:
// provider_refused). An allow has no reason otherwise; a denial keeps
// its own. Never set it from a request path.
func WithAuditReason(ctx context.Context, reason string) context.Context {
	return context.WithValue(ctx, auditReasonKey{}, reason)
}

// Prepaid returns ctx marked as a later step of a request whose rate-limit
// token the door already took (the pages a subscription delivers after its
// start, a member of an answer the operation paid for): decisions in it
// take no token and are decided and audited as always.
func Prepaid(ctx context.Context) context.Context {
	return context.WithValue(ctx, tokenFreeKey{}, freePrepaid)
}

// isUnmetered reports whether the decisions of ctx take no token, for
// either reason.
func isUnmetered(ctx context.Context) bool {
	v, _ := ctx.Value(tokenFreeKey{}).(tokenFree)
	return v != 0
}

// operation is the rate-limit classes one operation took a token of.
type operation struct {
	mu    sync.Mutex
	spent map[ratelimit.Class]bool
}

type operationKey struct{}

// Operation returns ctx as the context of one operation of a client: one
// REST call, or one root field of a GraphQL document (aliased root fields
// are operations of their own). However many decisions the operation needs
// (a move decides on the thread and on the target channel), it takes at
// most one token of each class (docs/design/rights.md#rate-limits).
// Decisions outside an operation take a token each.
func Operation(ctx context.Context) context.Context {
	return context.WithValue(ctx, operationKey{}, &operation{spent: map[ratelimit.Class]bool{}})
}

// firstOfOperation reports whether a decision of action is the first of
// its class in the operation of ctx (always, outside an operation), and
// records it: only the first takes a token.
func firstOfOperation(ctx context.Context, action Action) bool {
	op, ok := ctx.Value(operationKey{}).(*operation)
	if !ok {
		return true
	}
	class := table[action].Class
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.spent[class] {
		return false
	}
	op.spent[class] = true
	return true
}

// Allowed answers a question of the runtime rather than a request: which
// of people the rule table (Decide) allows action on target now, such as
// whether a message's writer may trigger a run there or a mentioned agent
// may read the thread. Nobody asked, so it takes no token, writes no audit
// row and logs no mismatch. Grants are read through the transaction of ctx
// when there is one (db.Q) in one statement for all people, unless
// the target's grant level is known (then it must be the level of each of
// people). Only the ids allowed are in the result.
func (s *Service) Allowed(ctx context.Context, action Action, target Facts, people ...identity.Principal) (map[string]bool, error) {
	out := map[string]bool{}
	var ask []string
	for _, p := range people {
		if p.Active() {
			ask = append(ask, p.ID)
		}
	}
	if len(ask) == 0 || !target.Path.Exists {
		return out, nil
	}
	var grants map[string]levelMap
	if target.Grant == nil {
		var err error
		p := target.Path
		grants, err = s.st.liveGrants(ctx, ask, &struct{ spaces, channels []string }{[]string{p.SpaceID}, nonEmpty(p.ChannelID)})
		if err != nil {
			return nil, err
		}
	}
	for _, p := range people {
		if allowedWith(action, target, p, grants[p.ID]) {
			out[p.ID] = true
		}
	}
	return out, nil
}

// allowedWith is the rule-table answer for p on target with p's live
// grants (the target's known grant, when set, instead): the decision of
// Allowed and PeopleWithTrigger for one person. An inactive person's
// grants count for nothing.
func allowedWith(action Action, target Facts, p identity.Principal, grants levelMap) bool {
	grant := None
	switch {
	case target.Grant != nil:
		grant = *target.Grant
	case p.Active():
		grant = grants.at(target.Path)
	}
	return Decide(action, ActorOf(p), grant, target.Path).Allow
}

// triggerPath checks what both trigger-holder questions share: the fault
// hook (tests only) and a channel path.
func (s *Service) triggerPath(c Path) error {
	if s.faults != nil {
		if err := s.faults.TriggerHolders(); err != nil {
			return err
		}
	}
	if c.Kind != KindChannel && c.ChannelID == "" {
		return fmt.Errorf("authz: trigger holders need a channel path")
	}
	return nil
}

// TriggerHolders answers which people have effective trigger on a channel
// now; the runs module uses it for the trust marker of the run context.
type TriggerHolders interface {
	// WithTrigger returns the ids among people that are active persons with
	// effective level trigger on channel path c. It writes no audit entry;
	// an error never means "has trigger".
	WithTrigger(ctx context.Context, c Path, people []identity.Principal) (map[string]bool, error)
	// PeopleWithTrigger reads the principals ids and answers WithTrigger
	// for those of them in ask, in one statement: a run context reads its
	// authors and their trust together. Unknown ids are left out of the
	// principals (and have no trigger).
	PeopleWithTrigger(ctx context.Context, c Path, ids, ask []string) (map[string]identity.Principal, map[string]bool, error)
}

// PeopleWithTrigger implements TriggerHolders: identity's principals ids
// beside their live grants on c's channel and space in one statement, then
// for each of ask the same decision as WithTrigger (Allowed for
// message.trigger: an inactive principal's grants count for nothing).
// Faults, when installed (tests only), can make it fail like WithTrigger.
func (s *Service) PeopleWithTrigger(ctx context.Context, c Path, ids, ask []string) (map[string]identity.Principal, map[string]bool, error) {
	if err := s.triggerPath(c); err != nil {
		return nil, nil, err
	}
	people, grants, err := s.st.peopleWithGrants(ctx, ids, []string{c.SpaceID}, nonEmpty(c.ChannelID))
	if err != nil {
		return nil, nil, fmt.Errorf("trigger holders: %w", err)
	}
	return people, holdersAmong(c, people, grants, ask), nil
}

// holdersAmong is the decision of both people questions: which of ask
// hold trigger on channel c now, WithTrigger's rule on the grants read
// beside people.
func holdersAmong(c Path, people map[string]identity.Principal, grants map[string]levelMap, ask []string) map[string]bool {
	out := map[string]bool{}
	if !c.Exists {
		return out
	}
	for _, id := range ask {
		if p, ok := people[id]; ok && allowedWith(MessageTrigger, Facts{Path: c}, p, grants[id]) {
			out[id] = true
		}
	}
	return out
}

// Relation names the principals of another module's rows by a shared
// set-returning SQL function of one uuid column that the module owns (a
// migration creates it; internal/platform/db/ownership_test.go lists it as
// shared) and the values of its parameters, in order. No SQL text crosses
// the modules: authz numbers the parameters inside its own statement.
type Relation struct {
	// Func is the function's name: lower-case letters, digits and '_'.
	Func string
	// Args are the function's arguments, in order.
	Args []any
}

// PeopleWithTriggerIn is PeopleWithTrigger for the principals a relation
// names instead of a list, every one of them asked (messaging.ContextAuthors
// names the authors of a context read). It reads on the pool, never
// through the transaction of ctx, so that it can run beside the statement
// that reads those messages. A relation whose Func is not a plain name is
// an internal error. Faults, when installed (tests only), can make it fail
// like WithTrigger.
func (s *Service) PeopleWithTriggerIn(ctx context.Context, c Path, rel Relation) (map[string]identity.Principal, map[string]bool, error) {
	if err := s.triggerPath(c); err != nil {
		return nil, nil, err
	}
	if !plainName(rel.Func) {
		return nil, nil, fmt.Errorf("trigger holders: relation %q is not a function name", rel.Func)
	}
	people, grants, err := s.st.peopleNamedWithGrants(ctx, rel.Func, rel.Args, []string{c.SpaceID}, nonEmpty(c.ChannelID))
	if err != nil {
		return nil, nil, fmt.Errorf("trigger holders: %w", err)
	}
	return people, holdersAmong(c, people, grants, slices.Collect(maps.Keys(people))), nil
}

// plainName reports whether name is a plain SQL function name (lower-case
// letters, digits and '_', starting with a letter), safe to write into a
// statement.
func plainName(name string) bool {
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// WithTrigger implements TriggerHolders: Allowed for message.trigger on
// channel path c, in one statement for all people. By the rule table active
// owners count on every channel, other active persons through their grants
// (direct or through groups) on the channel or its space; the archive cap
// leaves nobody with trigger in an archived channel or space; agents and
// apps never count. Faults, when installed (tests only), can make it fail.
func (s *Service) WithTrigger(ctx context.Context, c Path, people []identity.Principal) (map[string]bool, error) {
	if err := s.triggerPath(c); err != nil {
		return nil, err
	}
	out, err := s.Allowed(ctx, MessageTrigger, Facts{Path: c}, people...)
	if err != nil {
		return nil, fmt.Errorf("trigger holders: %w", err)
	}
	return out, nil
}
