package modules

import (
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/runs"
)

// moduleDeps are the dependencies of the runs and files modules as far as
// the configuration and the modules made before them give them; New fills
// in the rest (authz, messaging, runs) once those exist.
type moduleDeps struct {
	Runs  runs.Deps
	Files files.Deps
}

// configured reads the runs and files modules' settings from cfg, so that
// New only wires the modules together.
func configured(cfg *config.Config, d Deps, uow *db.DB, ident *identity.Service, chatSvc *chat.Service, chatW *chat.Writer,
	identW *identity.Writer, evLog *events.Log, hub *runs.Hub) moduleDeps {
	return moduleDeps{
		Runs: runs.Deps{Pool: d.Pool, DB: uow, Clock: d.Clock, Log: d.Logger, Identity: ident, Chat: chatSvc,
			ChatWriter: chatW, IdentityWriter: identW, Events: evLog, Hub: hub, PollMaxWait: cfg.Duration(config.EventsPollMaxWait),
			LiveMaxBytes: cfg.Int(config.RunLiveMaxBytes), LiveFlushInterval: cfg.Duration(config.RunLiveFlushInterval),
			ContextLimits: runs.ContextLimits{MaxBytes: cfg.Int(config.AgentContextMaxBytes), MessageMaxBytes: cfg.Int(config.AgentContextMessageMaxBytes)},
			Timeouts: runs.Timeouts{Start: cfg.Duration(config.RunStartTimeout), Stall: cfg.Duration(config.RunStallTimeout),
				Lease: cfg.Duration(config.RunLeaseTimeout), MaxAttempts: cfg.Int(config.RunMaxAttempts), CancelGrace: cfg.Duration(config.RunCancelGrace)}},
		Files: files.Deps{Pool: d.Pool, DB: uow, Storage: cfg.String(config.FilesStorage), Capabilities: ident, Clock: d.Clock, Log: d.Logger,
			Limits: files.Limits{MaxBytes: int64(cfg.Int(config.FilesMaxBytes)), QuotaBytes: int64(cfg.Int(config.FilesQuotaBytes)),
				RequireScan: cfg.Bool(config.FilesRequireScan), OrphanTTL: cfg.Duration(config.FilesOrphanTTL), DeletedTTL: cfg.Duration(config.FilesDeletedTTL),
				TextMaxBytes: int64(cfg.Int(config.FilesTextMaxBytes))},
			Scanner: files.NewScanner(cfg.String(config.FilesClamdAddr), cfg.Duration(config.FilesClamdTimeout), int64(cfg.Int(config.FilesMaxBytes)))},
	}
}
