// Package config owns the registry of Bothy's named configuration keys and
// loads their values from defaults, a YAML file and BOTHY_ environment
// variables, in that order (later wins).
//
// Every limit, window and threshold of the server is a key of this registry;
// code names the key, never the number.
package config

import (
	"fmt"
	"slices"
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
	ServerDrainDelay                   = "server.drain_delay"
	ServerReadinessTimeout             = "server.readiness_timeout"
	MetricsAddr                        = "metrics.addr"
	MetricsPprof                       = "metrics.pprof"
	MetricsMaxOperations               = "metrics.max_operations"
	DatabaseAutoMigrate                = "database.auto_migrate"
	DatabaseListenURL                  = "database.listen_url"
	DatabasePoolerMode                 = "database.pooler_mode"
	DatabaseListenBackoffMax           = "database.listen_backoff_max"
	HTTPTrustedProxies                 = "http.trusted_proxies"
	HTTPPublicURL                      = "http.public_url"
	AuthOIDCIssuer                     = "auth.oidc.issuer"
	AuthOIDCClientID                   = "auth.oidc.client_id"
	AuthOIDCClientSecret               = "auth.oidc.client_secret"
	AuthOIDCClientSecretFile           = "auth.oidc.client_secret_file"
	AuthOIDCRedirectURL                = "auth.oidc.redirect_url"
	AuthOIDCScopes                     = "auth.oidc.scopes"
	AuthOIDCNameClaim                  = "auth.oidc.name_claim"
	AuthOIDCAllowedDomains             = "auth.oidc.allowed_domains"
	AuthOIDCRecheckInterval            = "auth.oidc.recheck_interval"
	AuthOIDCCreatePeople               = "auth.oidc.create_people"
	AuthSessionTTL                     = "auth.session_ttl"
	HTTPCORSAllowedOrigins             = "http.cors_allowed_origins"
	HTTPCORSMaxAge                     = "http.cors_max_age"
	RetentionInterval                  = "retention.interval"
	RetentionEventLog                  = "retention.event_log"
	RetentionAgentEvents               = "retention.agent_events"
	RetentionAuditLog                  = "retention.audit_log"
	RetentionTokens                    = "retention.tokens"
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
	RunLeaseTimeout                    = "run.lease_timeout"
	RunMaxAttempts                     = "run.max_attempts"
	RunCancelGrace                     = "run.cancel_grace"
	RunLiveMaxBytes                    = "run.live_max_bytes"
	RunLiveFlushInterval               = "run.live_flush_interval"
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
	GraphQLIntrospectionDepthLimit     = "graphql.introspection_depth_limit"
	GraphQLMaxSelections               = "graphql.max_selections"
	GraphQLMaxResponseBytes            = "graphql.max_response_bytes"
	GraphQLQueryCacheBytes             = "graphql.query_cache_bytes"
	GraphQLAPQCacheBytes               = "graphql.apq_cache_bytes"
	GraphQLTrustedDocuments            = "graphql.trusted_documents"
	HTTPMaxBodyBytes                   = "http.max_body_bytes"
	HTTPReadTimeout                    = "http.read_timeout"
	HTTPWriteTimeout                   = "http.write_timeout"
	HTTPIdleTimeout                    = "http.idle_timeout"
	HTTPMaxConcurrentPerPrincipal      = "http.max_concurrent_per_principal"
	HTTPMaxConcurrentWait              = "http.max_concurrent_wait"
	DatabaseOutageRetryAfter           = "database.outage_retry_after"
	DatabaseQueryTimeout               = "database.query_timeout"
	DatabaseAcquireTimeout             = "database.acquire_timeout"
	RateLimitStore                     = "ratelimit.store"
	LogLevel                           = "log.level"
	TokenDefaultTTL                    = "token.default_ttl"
	AdminPrincipalListLimitDefault     = "admin.principal_list_limit_default"
	AdminPrincipalListLimitMax         = "admin.principal_list_limit_max"
	WebsocketMaxSubscriptions          = "websocket.max_subscriptions_per_connection"
	WebsocketMaxConnections            = "websocket.max_connections_per_principal"
	WebsocketSendQueue                 = "websocket.send_queue"
	WebsocketPingInterval              = "websocket.ping_interval"
	WebsocketInitTimeout               = "websocket.init_timeout"
	WebsocketAllowedOrigins            = "websocket.allowed_origins"
	TracingOTLPEndpoint                = "tracing.otlp_endpoint"
	TracingServiceName                 = "tracing.service_name"
	FilesStorage                       = "files.storage"
	FilesMaxBytes                      = "files.max_bytes"
	FilesUploadTimeout                 = "files.upload_timeout"
	FilesQuotaBytes                    = "files.quota_bytes"
	FilesRequireScan                   = "files.require_scan"
	FilesOrphanTTL                     = "files.orphan_ttl"
	FilesDeletedTTL                    = "files.deleted_ttl"
	FilesClamdAddr                     = "files.clamd_addr"
	FilesClamdTimeout                  = "files.clamd_timeout"
	FilesTextMaxBytes                  = "files.text_max_bytes"
	RateFilePerMinute                  = "ratelimit.rl.file.per_minute"
	RateFileBurst                      = "ratelimit.rl.file.burst"
)

// Registry lists every key with its type, default, minimum and meaning. It
// is the single source of docs/configuration.md.
var registry = []Key{
	{ServerAddr, TypeString, "127.0.0.1:8080", "", "listen address (host:port) of the HTTP server"},
	{ServerShutdownTimeout, TypeDuration, "15s", "1s", "hard bound of a graceful shutdown from SIGTERM to exit, drain delay included; what still runs then is cancelled"},
	{ServerDrainDelay, TypeDuration, "2s", "0s", "after SIGTERM, how long /readyz answers 503 draining before the listener stops accepting"},
	{ServerReadinessTimeout, TypeDuration, "2s", "100ms", "longest database check of one /readyz probe"},
	{MetricsAddr, TypeString, "", "", "listen address (host:port) of a separate /metrics listener; empty serves /metrics on server.addr"},
	{MetricsPprof, TypeBool, "false", "", "whether the metrics listener also serves Go's runtime profiles under /debug/pprof/ (net/http/pprof); needs metrics.addr, never on the API's address"},
	{MetricsMaxOperations, TypeInt, "200", "1", "distinct operation names labelled in the request metrics; later names, and names longer than 128 bytes, count as other"},
	{DatabaseAutoMigrate, TypeBool, "true", "", "whether serve applies pending migrations at start; false serves without DDL rights and /readyz answers migrations_pending while the schema is behind"},
	{DatabaseListenURL, TypeString, "", "", "PostgreSQL connection string of the LISTEN connection (direct, not through a transaction-mode pooler); empty uses database.url"},
	{DatabasePoolerMode, TypeBool, "false", "", "whether database.url goes through a transaction-mode pooler such as PgBouncer: the pool then keeps no prepared statements"},
	{DatabaseListenBackoffMax, TypeDuration, "10s", "100ms", "longest pause between reconnects of the LISTEN connection (the pause doubles from 100ms)"},
	{HTTPPublicURL, TypeString, "", "", "the URL clients use to reach the server (scheme://host[:port], no path), behind a proxy the proxy's; names the MCP face's protected resource (its metadata and the WWW-Authenticate of a 401); empty: the listen address, with a warning at start, never a request's Host"},
	{AuthOIDCIssuer, TypeString, "", "", "issuer URL of the organisation's OpenID Connect provider (its discovery document is ISSUER/.well-known/openid-configuration); empty turns sign-in off; needs http.public_url"},
	{AuthOIDCClientID, TypeString, "", "", "Bothy's client id at the provider (needed with auth.oidc.issuer)"},
	{AuthOIDCClientSecret, TypeString, "", "", "Bothy's client secret at the provider; prefer auth.oidc.client_secret_file or the environment to a configuration file"},
	{AuthOIDCClientSecretFile, TypeString, "", "", "a file holding the client secret (its first line), read at start; wins over auth.oidc.client_secret"},
	{AuthOIDCRedirectURL, TypeString, "", "", "the callback URL registered at the provider; empty is http.public_url + /auth/callback"},
	{AuthOIDCScopes, TypeString, "openid,email,profile", "", "comma-separated scopes the sign-in asks for (openid is always asked)"},
	{AuthOIDCNameClaim, TypeString, "email", "", "the ID token's claim that names the person: an e-mail address, matched with the people's addresses at the first sign-in (the claim email_verified must be true)"},
	{AuthOIDCAllowedDomains, TypeString, "", "", "comma-separated e-mail domains whose people may sign in (example.com); empty allows every domain the provider vouches for"},
	{AuthOIDCRecheckInterval, TypeDuration, "15m", "1s", "how often the server asks the identity provider (a refresh-token grant) whether each person with a live sign-in session may still sign in; a refusal revokes their sign-in sessions"},
	{AuthOIDCCreatePeople, TypeBool, "false", "", "whether a sign-in of an unknown person of an allowed domain creates them (a person without grants; handle from the address's local part); false refuses them"},
	{AuthSessionTTL, TypeDuration, "168h", "5m", "lifetime of the session token a sign-in gives"},
	{HTTPTrustedProxies, TypeString, "", "", "comma-separated IP addresses or CIDR ranges of reverse proxies whose X-Forwarded-For names the client"},
	{HTTPCORSAllowedOrigins, TypeString, "", "", "comma-separated browser origins (scheme://host[:port]) allowed to call the API cross-origin; empty allows none"},
	{HTTPCORSMaxAge, TypeDuration, "10m", "0s", "how long a browser may cache a CORS preflight answer"},
	{RetentionInterval, TypeDuration, "1h", "1m", "how often each replica removes rows past their retention"},
	{RetentionEventLog, TypeDuration, "720h", "0s", "how long client events (listEvents) are kept; older cursors answer 410 cursor_expired; 0s keeps them forever"},
	{RetentionAgentEvents, TypeDuration, "720h", "0s", "how long agent events of ended runs are kept (events of runs still open are never removed); 0s keeps them forever"},
	{RetentionAuditLog, TypeDuration, "8760h", "0s", "how long audit rows are kept after their last decision; 0s keeps them forever"},
	{RetentionTokens, TypeDuration, "720h", "0s", "how long revoked or expired tokens are kept before they are removed; 0s keeps them forever"},
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
	{EventsPollMaxWait, TypeDuration, "30s", "0s", "longest wait of pollAgentEvents; a GraphQL subscription socket whose token expired closes within half of it (a revoked token or a disabled principal closes it within a second); no event is handed out after any of them"},
	{WebsocketMaxSubscriptions, TypeInt, "10", "1", "subscriptions one GraphQL WebSocket connection may run at once; one more is refused with an error for its id"},
	{WebsocketMaxConnections, TypeInt, "8", "1", "GraphQL WebSocket connections one principal may hold open on one replica; one more is closed with 4429"},
	{WebsocketSendQueue, TypeInt, "256", "1", "events queued per subscription for a consumer that reads slowly; when full the socket closes with 4413 and the client resumes from its cursor"},
	{WebsocketPingInterval, TypeDuration, "15s", "1s", "keep-alive ping of GraphQL WebSocket connections (graphql-transport-ws ping)"},
	{WebsocketInitTimeout, TypeDuration, "10s", "1s", "time a new GraphQL WebSocket connection has to send connection_init"},
	{WebsocketAllowedOrigins, TypeString, "", "", "comma-separated browser origins besides the server's own host that may open GraphQL WebSocket connections: full origins (https://chat.example.com) or host patterns (path.Match syntax, *.example.com)"},
	{RunStartTimeout, TypeDuration, "5m", "1s", "a queued run not started by then fails with reason timeout"},
	{RunStallTimeout, TypeDuration, "30m", "1s", "a running run without activity for this long fails with reason timeout"},
	{RunSweepInterval, TypeDuration, "5s", "100ms", "how often each replica looks for runs past run.start_timeout, run.stall_timeout, their lease or their cancel grace"},
	{RunLeaseTimeout, TypeDuration, "60s", "1s", "how long an adapter's claim on a run lives after its last call on the run (startRun, renewRun, awaitRunInput, an answer)"},
	{RunMaxAttempts, TypeInt, "3", "1", "invocations of a run before an expired lease fails it with reason lease_expired"},
	{RunCancelGrace, TypeDuration, "30s", "0s", "how long a running run whose triggering person lost trigger waits for the adapter's confirmation before it ends cancelled (trigger_revoked)"},
	{RunLiveMaxBytes, TypeInt, "65536", "1", "longest text of a run's live box (updateRunLive)"},
	{RunLiveFlushInterval, TypeDuration, "250ms", "10ms", "how often a replica writes the live boxes it changed to the database; readers on every replica get each update at once, and Run.live answers the latest version between writes"},
	{RateMessagePerMinute, TypeInt, "60", "1", "refill of the rl.message bucket per principal and minute"},
	{RateMessageBurst, TypeInt, "20", "1", "size of the rl.message bucket per principal"},
	{RateAgentRuntimePerMinute, TypeInt, "1200", "1", "refill of the rl.agent_runtime bucket per principal and minute"},
	{RateAgentRuntimeBurst, TypeInt, "200", "1", "size of the rl.agent_runtime bucket per principal"},
	{RateReadPerMinute, TypeInt, "1200", "1", "refill of the rl.read bucket per principal and minute"},
	{RateReadBurst, TypeInt, "200", "1", "size of the rl.read bucket per principal"},
	{RateAdminPerMinute, TypeInt, "60", "1", "refill of the rl.admin bucket per principal and minute"},
	{RateAdminBurst, TypeInt, "20", "1", "size of the rl.admin bucket per principal"},
	{GraphQLComplexityLimit, TypeInt, "10000", "1", "highest GraphQL query complexity; a list field costs its item times its limit (or default)"},
	{GraphQLDepthLimit, TypeInt, "12", "1", "deepest GraphQL selection, not counting the introspection fields __schema and __type (see graphql.introspection_depth_limit)"},
	{GraphQLIntrospectionDepthLimit, TypeInt, "15", "1", "deepest selection below __schema or __type; 15 lets the standard introspection query (GraphiQL, code generators) through and bounds ofType chains"},
	{GraphQLParserTokenLimit, TypeInt, "15000", "100", "most lexical tokens the GraphQL parser reads from one document"},
	{GraphQLIntrospection, TypeBool, "true", "", "whether GraphQL introspection (and so the playground's schema view) is on"},
	{GraphQLMaxSelections, TypeInt, "500", "10", "most selections (fields, aliases, fragment spreads, inline fragments) written in one GraphQL document, checked before validation"},
	{GraphQLMaxResponseBytes, TypeInt, "8388608", "65536", "largest GraphQL (and REST) response body; a larger one answers validation_failed response_too_large"},
	{GraphQLQueryCacheBytes, TypeInt, "16777216", "0", "memory budget of the cache of parsed and validated GraphQL documents, estimated per document as its source text plus 256 bytes per syntax node; least recently used documents leave first, a document estimated above a sixteenth of the budget is never cached (parsed on every request); the selection counts of documents are kept besides in a quarter of this budget, charged by their text; 0 caches none"},
	{GraphQLAPQCacheBytes, TypeInt, "4194304", "0", "memory budget of the automatic persisted queries (a client sends a query's SHA-256 instead of its text once the server knows it), counted as text and hash bytes; least recently used leave first; 0 turns automatic persisted queries off (a hash alone answers PersistedQueryNotSupported)"},
	{GraphQLTrustedDocuments, TypeString, "", "", "path of a trusted-documents file: one SHA-256 per line of an operation in canonical form (bothy documents hashes writes it from a client's .graphql files); when set, /graphql runs only those operations (and the REST shim its own) and refuses every other with validation_failed untrusted_document; empty runs any operation"},
	{HTTPMaxBodyBytes, TypeInt, "1048576", "1024", "larger request bodies get 413 payload_too_large"},
	{HTTPReadTimeout, TypeDuration, "30s", "1s", "longest time to read a request, headers and body; a slower client is disconnected"},
	{HTTPWriteTimeout, TypeDuration, "30s", "1s", "longest time to answer a request (a long poll gets events.poll_max_wait on top)"},
	{HTTPIdleTimeout, TypeDuration, "60s", "1s", "how long an idle keep-alive connection stays open"},
	{HTTPMaxConcurrentPerPrincipal, TypeInt, "8", "1", "most requests of one principal in flight at once on /graphql, the REST routes and /mcp (a request each, whatever API calls its tool makes); more wait (http.max_concurrent_wait)"},
	{HTTPMaxConcurrentWait, TypeDuration, "5s", "0s", "how long a request over http.max_concurrent_per_principal waits for a slot before it answers 429 rate_limited (too_many_concurrent)"},
	{DatabaseOutageRetryAfter, TypeDuration, "5s", "1s", "Retry-After of the 503 unavailable answers while the database does not answer"},
	{DatabaseQueryTimeout, TypeDuration, "5s", "100ms", "longest database work of a request: one statement outside a transaction, or a whole transaction from BEGIN to COMMIT; past it the request answers 503 unavailable (database_unreachable) as for a stopped database. A deadline of the server, not statement_timeout, so it holds through a transaction-mode pooler and against a frozen server; migrations, retention, the audit export and the LISTEN connection are exempt, and a long poll's or subscription's waiting is not database work"},
	{DatabaseAcquireTimeout, TypeDuration, "2s", "10ms", "longest wait of a request for a connection of the pool (database.max_conns) before its statement or transaction starts; past it the request answers 503 unavailable (database_unreachable)"},
	{RateLimitStore, TypeString, "postgres", "", "where rate-limit buckets live: postgres (shared by every replica) or memory (this process only)"},
	{LogLevel, TypeString, "info", "", "lowest log level written: debug, info, warn or error"},
	{TokenDefaultTTL, TypeDuration, "0s", "0s", "lifetime of tokens issued without an explicit ttl (createToken, createPrincipal's first token, the command line); 0s means no expiry"},
	{AdminPrincipalListLimitDefault, TypeInt, "50", "1", "page size of listPrincipals when the request names none"},
	{AdminPrincipalListLimitMax, TypeInt, "200", "1", "largest page of listPrincipals"},
	{TracingOTLPEndpoint, TypeString, "", "", "base URL of an OpenTelemetry collector's OTLP/HTTP receiver, such as http://collector.example.com:4318: spans of requests, GraphQL operations, authorization decisions and statements are posted to it with /v1/traces appended; empty turns tracing off"},
	{TracingServiceName, TypeString, "bothy", "", "service.name of the exported spans"},
	{FilesStorage, TypeString, "file:///var/lib/bothy/files", "", "where file contents live, a gocloud.dev/blob URL: file:///path (one replica, or a volume every replica shares) or s3://bucket?endpoint=...&region=... (any S3-compatible store); bothy dev uses the files folder of its data folder"},
	{FilesMaxBytes, TypeInt, "26214400", "1", "largest file an upload may carry; a larger one answers 413 payload_too_large (file_too_large). The upload routes take this body limit instead of http.max_body_bytes"},
	{FilesUploadTimeout, TypeDuration, "5m", "1s", "longest time to read one upload's body; a slower upload is cut off"},
	{FilesQuotaBytes, TypeInt, "1073741824", "0", "most bytes of files one principal may hold at once (deleted files no longer count); an upload beyond it answers 409 conflict (quota_exceeded)"},
	{FilesRequireScan, TypeBool, "true", "", "whether a file no scanner checked (scan status not_scanned) is withheld from readers; bothy dev sets it to false"},
	{FilesOrphanTTL, TypeDuration, "24h", "1m", "how long an uploaded file may stay unattached before it is deleted"},
	{FilesDeletedTTL, TypeDuration, "24h", "0s", "how long the files of a deleted message are kept before they are deleted"},
	{FilesClamdAddr, TypeString, "", "", "address of the clamd that scans every upload (tcp://host:3310 or unix:///path/to/clamd.ctl); empty: no scanner, uploads are not_scanned and files.require_scan decides whether they are served"},
	{FilesClamdTimeout, TypeDuration, "30s", "1s", "longest wait for each step of a scan (connecting to clamd, sending a chunk, its verdict); a scan that takes longer ends failed"},
	{FilesTextMaxBytes, TypeInt, "262144", "1", "most text kept of a file for agents (bytes of UTF-8); longer text is cut at a character boundary, and File.text(maxBytes) is capped at it"},
	{RateFilePerMinute, TypeInt, "30", "1", "refill of the rl.file bucket (uploads) per principal and minute"},
	{RateFileBurst, TypeInt, "10", "1", "size of the rl.file bucket per principal"},
}

// choices lists the accepted values of string keys with a fixed set.
var choices = map[string][]string{
	LogLevel: {"debug", "info", "warn", "error"},
}

// lookup returns the registry entry of name.
func lookup(name string) (Key, bool) {
	for _, k := range registry {
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
		return k.checkInt(raw)
	case TypeDuration:
		return k.checkDuration(raw)
	case TypeBool:
		return k.checkBool(raw)
	default:
		return k.checkString(raw)
	}
}

// checkInt parses raw as an integer, refusing anything that does not print
// back the same (such as "12abc" or "1e3"), and enforces k.Min.
func (k Key) checkInt(raw string) (any, error) {
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
}

// checkDuration parses raw as a Go duration and enforces k.Min.
func (k Key) checkDuration(raw string) (any, error) {
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
}

// checkBool parses raw as a boolean in the spellings operators write in
// environment files (true/false, 1/0, yes/no, on/off).
func (k Key) checkBool(raw string) (any, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return nil, fmt.Errorf("config key %s: %q is not a boolean (true or false)", k.Name, raw)
}

// checkString accepts raw as it is, unless k has a fixed set of choices
// and raw is not one of them.
func (k Key) checkString(raw string) (any, error) {
	allowed, ok := choices[k.Name]
	if !ok || slices.Contains(allowed, raw) {
		return raw, nil
	}
	return nil, fmt.Errorf("config key %s: %q is not one of %s", k.Name, raw, strings.Join(allowed, ", "))
}

// Registry returns a copy of registry: an importer cannot change it
// (house rule: no exported mutable package variable).
func Registry() []Key { return slices.Clone(registry) }
