// Package modules assembles Bothy's domain modules (identity, authz, chat,
// events, messaging, runs, admin, feed, retention) on one database pool,
// without HTTP, GraphQL or REST: the one wiring of the modules, used by the
// server (internal/server adds the faces) and by the module test harness
// (internal/devtools/moduletest), so that a module test runs the modules exactly as
// the server does and builds nothing of the wire.
package modules

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/ratelimit"
	"bothy.example.com/bothy/internal/retention"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/signin"
)

// Deps are what the modules need from their caller.
type Deps struct {
	Config *config.Config
	Pool   *db.Pool
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Limiter defaults to the buckets of ratelimit.store sized by the
	// config: shared through PostgreSQL, or in this process.
	Limiter ratelimit.Limiter
	// Registry receives the modules' metrics; nil makes a new one
	// (Set.Registry).
	Registry *prometheus.Registry
	// Hooks are test instruments handed to the modules at construction;
	// production leaves them empty.
	Hooks Hooks
}

// Hooks are the modules' test instruments (see each type); a nil field
// installs nothing.
type Hooks struct {
	History messaging.HistoryHook
	Feed    feed.Hook
	Authz   authz.Faults
}

// options turns the hooks into the modules' construction options.
func (h Hooks) options() (az []authz.Option, msg []messaging.Option, fd []feed.Option) {
	if h.Authz != nil {
		az = append(az, authz.WithFaults(h.Authz))
	}
	if h.History != nil {
		msg = append(msg, messaging.WithHistoryHook(h.History))
	}
	if h.Feed != nil {
		fd = append(fd, feed.WithHook(h.Feed))
	}
	return az, msg, fd
}

// Set is the assembled modules. Each field is one module's service; Hub is
// the runs module's long-poll hub (the server runs its LISTEN loop) and
// Registry holds every module's metrics.
type Set struct {
	Identity *identity.Service
	Authz    *authz.Service
	Chat     *chat.Service
	// ChatUseCases are chat's checked use cases (the resolvers' door to
	// chat), wired to re-check triggers after a move.
	ChatUseCases *chat.UseCases
	Messaging    *messaging.Service
	Feed         *feed.Service
	// Fanout is the replica's shared reader and decider of the events
	// subscription.
	Fanout *feed.Fanout
	// Tokens re-authenticates the tokens of the replica's open
	// connections together, once per commit.
	Tokens    *identity.LiveTokens
	Events    *events.Log
	Runs      *runs.Service
	Admin     *admin.Service
	Retention *retention.Service
	Files     *files.Service
	// Writers are the raw writers, for the example world's and the tests'
	// setup; no face or use case reaches them through the set.
	Writers  Writers
	DB       *db.DB
	Hub      *runs.Hub
	Registry *prometheus.Registry
	// SignIn is the sign-in through the organisation's OpenID Connect
	// provider; nil when auth.oidc.issuer is empty.
	SignIn *signin.Service
}

// New assembles the modules. It fails when the configuration names an
// unknown rate-limit store (ratelimit.store).
func New(d Deps) (*Set, error) {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	cfg := d.Config
	if d.Limiter == nil {
		switch store := cfg.String(config.RateLimitStore); store {
		case "postgres":
			d.Limiter = ratelimit.NewPostgres(d.Pool, cfg, d.Clock)
		case "memory":
			d.Limiter = ratelimit.NewMemory(cfg, d.Clock)
		default:
			return nil, fmt.Errorf("config key %s: %q is neither postgres nor memory", config.RateLimitStore, store)
		}
	}
	d.Limiter = countRefusals(d.Limiter, d.Registry)
	hub := runs.NewHub()
	ident := identity.NewService(d.Pool, d.Clock)
	uow := db.New(d.Pool, cfg.Int(config.DatabaseTxRetryMax))
	azOpts, msgOpts, fdOpts := d.Hooks.options()
	az := authz.NewService(d.Pool, d.Clock, d.Limiter, cfg.Duration(config.AuditDenyAggregateWindow), d.Logger, d.Registry, azOpts...)
	chatSvc := chat.NewService(uow, d.Clock, cfg.Int(config.ChannelHistoryBackfillLimitDefault), cfg.Int(config.ChannelHistoryBackfillLimitMax))
	evLog := events.NewLog(d.Pool, d.Clock)
	// The raw writers are made here and only here: each goes to the modules
	// that decide a right before they write through it (README.md#architecture).
	chatW, identW, azW := chat.NewWriter(chatSvc), identity.NewWriter(ident), authz.NewWriter(az)
	deps := configured(cfg, d, uow, ident, chatSvc, chatW, identW, evLog, hub)
	evLog.Instrument(d.Registry)
	msg := messaging.NewService(d.Pool, uow, d.Clock, ident, chatSvc, chatW, az, evLog, messaging.Limits{
		MaxContentBytes: cfg.Int(config.MessageMaxContentBytes), ListContentMaxBytes: cfg.Int(config.MessageListContentMaxBytes),
		ListLimitDefault: cfg.Int(config.MessageListLimitDefault), ListLimitMax: cfg.Int(config.MessageListLimitMax)}, msgOpts...)
	msg.Instrument(d.Registry)
	msgW := messaging.NewWriter(msg)
	az.Register(chatSvc, authz.KindSpace, authz.KindChannel, authz.KindThread)
	az.Register(msg, authz.KindMessage)
	az.Register(az, authz.KindGrant)
	deps.Runs.Authz, deps.Runs.Messaging, deps.Runs.MessagingWriter = az, msg, msgW
	runSvc := runs.NewService(deps.Runs)
	// The trigger decision runs inside each message's unit of work, and
	// decides an answer's provenance: the wiring says so, not runs itself.
	msg.Subscribe(runSvc)
	msg.DecideProvenanceWith(runSvc)
	az.Register(runSvc, authz.KindRun)
	deps.Files.Authz, deps.Files.Messages, deps.Files.Triggers = az, msg, runSvc
	fs := files.NewService(deps.Files)
	filesInto(fs, msg, runSvc)
	adm := admin.NewService(uow, az, chatSvc, ident, evLog, admin.Writers{Chat: chatW, Identity: identW, Authz: azW}, admin.Options{TokenTTL: cfg.Duration(config.TokenDefaultTTL),
		PrincipalListDefault: cfg.Int(config.AdminPrincipalListLimitDefault), PrincipalListMax: cfg.Int(config.AdminPrincipalListLimitMax),
		Runs: runSvc, Log: d.Logger})
	az.Register(adm, authz.KindInstance, authz.KindPrincipal, authz.KindGroup, authz.KindToken)
	tokens := ident.NewLiveTokens()
	fd := feed.NewService(az, chatSvc, evLog, cfg.Int(config.EventsListLimitDefault), cfg.Int(config.EventsListLimitMax), fdOpts...)
	ret := retention.New(uow, retention.Owners{Events: evLog, Authz: azW, Identity: identW, Files: fs}, d.Clock, retention.Keep{
		EventLog: cfg.Duration(config.RetentionEventLog), AgentEvents: cfg.Duration(config.RetentionAgentEvents),
		AuditLog: cfg.Duration(config.RetentionAuditLog), Tokens: cfg.Duration(config.RetentionTokens)}, d.Logger, d.Registry)
	chatUC := chat.NewUseCases(chatSvc, az, evLog, uow)
	chatUC.OnMoved(recheckOnMove(d.Logger, runSvc))
	// A person the provider refused at a recheck is disabled as an owner
	// disables them (waiting streams woken to answer 401, runs re-checked,
	// audited under the operator), their sign-in sessions revoked with it.
	onLeaver := func(ctx context.Context, principalID string) error { return adm.DisableRefused(ctx, principalID) }
	si, err := signInFrom(cfg, d, ident, identW, onLeaver)
	if err != nil {
		return nil, err
	}
	return &Set{SignIn: si, Identity: ident, Authz: az, Chat: chatSvc, ChatUseCases: chatUC, Messaging: msg, Feed: fd, Events: evLog, Runs: runSvc,
		Admin: adm, Retention: ret, Files: fs, DB: uow, Writers: Writers{Chat: chatW, Identity: identW, Authz: azW, Messaging: msgW}, Hub: hub, Registry: d.Registry, Tokens: tokens, Fanout: feed.NewFanout(fd, hub, tokens, d.Clock)}, nil
}

// recheckOnMove re-checks the triggers of the runs in a channel that
// moved to another space (the move may take a trigger right away); a
// failure is left to the sweeper.
func recheckOnMove(log *slog.Logger, runSvc *runs.Service) func(context.Context, string) {
	return func(ctx context.Context, channelID string) {
		if _, err := runSvc.RecheckTriggers(ctx, runs.TriggerScope{ChannelID: channelID}); err != nil {
			log.ErrorContext(ctx, "trigger re-check after a move failed; the sweeper retries it", "channel_id", channelID, "error", err.Error())
		}
	}
}

// filesInto hands the files module to the modules made before it:
// messaging attaches files through it, and runs asks it which context
// messages carry file text (an answer's provenance).
func filesInto(fs *files.Service, msg *messaging.Service, runSvc *runs.Service) {
	msg.AttachWith(fs)
	runSvc.ReadFileTextsWith(fs)
}

// Writers are the modules' raw writers (chat.Writer and its peers).
type Writers struct {
	Chat      *chat.Writer
	Identity  *identity.Writer
	Authz     *authz.Writer
	Messaging *messaging.Writer
}

// countingLimiter counts the refusals of a limiter by class in
// bothy_ratelimit_rejections_total.
type countingLimiter struct {
	ratelimit.Limiter
	rejected *prometheus.CounterVec
}

// countRefusals wraps l so that its refusals are counted in reg, every
// class's series present from the start.
func countRefusals(l ratelimit.Limiter, reg prometheus.Registerer) ratelimit.Limiter {
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_ratelimit_rejections_total",
		Help: "Requests refused by a rate limit, by class."}, []string{"class"})
	for _, c := range []ratelimit.Class{ratelimit.Message, ratelimit.AgentRuntime, ratelimit.Read, ratelimit.Admin, ratelimit.File} {
		rejected.WithLabelValues(string(c))
	}
	reg.MustRegister(rejected)
	return countingLimiter{Limiter: l, rejected: rejected}
}

// Begin implements ratelimit.Limiter: a refusal is counted when the
// spend's answer is read.
func (c countingLimiter) Begin(principal string, class ratelimit.Class) *ratelimit.Spend {
	return c.Limiter.Begin(principal, class).OnRefusal(func() { c.rejected.WithLabelValues(string(class)).Inc() })
}
