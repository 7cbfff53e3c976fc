package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/server"
)

const adminUsage = `Usage:
  bothy admin create-owner --handle H --display-name N [--email E] [--json]
  bothy admin principal create --kind user|agent|app --handle H --display-name N [--email E] [--owner] [--json]
  bothy admin principal disable --handle H
  bothy admin principal enable --handle H
  bothy admin principal list [--json]
  bothy admin token create --handle H [--label L] [--ttl D] [--json]
  bothy admin token list --handle H [--json]
  bothy admin token revoke --id ID
  bothy admin audit export --since T [--until T] [--actor HANDLE] [--action A] [--decision allow|deny] [--format jsonl]

Every command also takes --config FILE and works on database.url through the
same services as the API, as the local operator (audited, not rate-limited).
Secrets are printed once, on standard output.
`

// usageError is a mistake in the command line (a command, word or flag
// that does not exist, a missing or invalid value): the process exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseStrict parses args with fs and refuses words left after the flags:
// a command never ignores part of what it was told.
func parseStrict(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// cmdAdmin dispatches bothy admin ...
func cmdAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, adminUsage)
		if len(args) == 0 {
			return usagef("bothy admin needs a command")
		}
		return nil
	}
	word := args[0]
	if word == "create-owner" {
		return adminCreateOwner(ctx, args[1:], stdout, stderr)
	}
	if len(args) < 2 {
		return usagef("unknown command %q\n\n%s", strings.Join(args, " "), adminUsage)
	}
	return adminTwoWordCommand(ctx, word+" "+args[1], args[2:], stdout, stderr)
}

// adminTwoWordCommand runs the admin command named by two words, such as
// "principal create", with the arguments after them.
func adminTwoWordCommand(ctx context.Context, command string, args []string, stdout, stderr io.Writer) error {
	switch command {
	case "principal create":
		return adminPrincipalCreate(ctx, args, stdout, stderr)
	case "principal disable":
		return adminPrincipalStatus(ctx, "disable", identity.StatusDisabled, args, stdout, stderr)
	case "principal enable":
		return adminPrincipalStatus(ctx, "enable", identity.StatusActive, args, stdout, stderr)
	case "principal list":
		return adminPrincipalList(ctx, args, stdout, stderr)
	case "token create":
		return adminTokenCreate(ctx, "admin token create", args, stdout, stderr)
	case "token list":
		return adminTokenList(ctx, args, stdout, stderr)
	case "token revoke":
		return adminTokenRevoke(ctx, args, stdout, stderr)
	case "audit export":
		return adminAuditExport(ctx, args, stdout, stderr)
	}
	return usagef("unknown command %q\n\n%s", "admin "+command, adminUsage)
}

// adminEnv is the admin service on database.url for one command.
type adminEnv struct {
	svc   *admin.Service
	authz *authz.Service
	close func()
}

// adminFlags are the flags every admin command shares: --config and
// --data (the folder of a running bothy dev, whose database is used when
// database.url is empty).
type adminFlags struct {
	*common
	data *string
}

func newAdminFlags(name, summary string, stderr io.Writer) *adminFlags {
	c := newFlags(name, summary+"\nWhen database.url is empty it uses the database of the bothy dev running on --data.", stderr)
	return &adminFlags{common: c, data: c.withDevData()}
}

func openAdmin(ctx context.Context, c *adminFlags) (*adminEnv, error) {
	cfg, err := c.load()
	if err != nil {
		return nil, err
	}
	url, err := databaseURL(cfg, *c.data)
	if err != nil {
		return nil, err
	}
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: 2})
	if err != nil {
		return nil, err
	}
	if v, err := db.SchemaVersion(ctx, pool); err != nil || v < db.EmbeddedVersion() {
		pool.Close()
		if err != nil {
			return nil, err
		}
		return nil, errors.New("the database lacks migrations: run bothy migrate first")
	}
	srv, err := server.New(server.Deps{Config: cfg, Pool: pool, DatabaseURL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &adminEnv{svc: srv.Admin, authz: srv.Authz, close: pool.Close}, nil
}

// explain turns a problem into a sentence for the terminal (no content,
// only what the operator typed is named).
func explain(err error) error {
	var p *problem.Error
	if !errors.As(err, &p) {
		return err
	}
	if p.Code == problem.InternalError {
		if c := p.Cause(); c != nil {
			return c
		}
	}
	msg := string(p.Code)
	if p.Reason != "" {
		msg += " (" + p.Reason + ")"
	}
	for _, f := range p.Fields {
		flagName := "--" + strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(f.Pointer, "/"), "filter/"), "_", "-")
		msg += fmt.Sprintf("; %s: %s", flagName, f.Code)
		if f.Detail != "" {
			msg += " (" + f.Detail + ")"
		}
	}
	return errors.New(msg)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func adminCreateOwner(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin create-owner", "Creates an active owner on a migrated database (empty or not) and prints a new session token for them once.", stderr)
	handle := c.fs.String("handle", "", "handle of the owner (required)")
	name := c.fs.String("display-name", "", "display name (required)")
	email := c.fs.String("email", "", "e-mail address")
	asJSON := c.fs.Bool("json", false, `print {"id": ..., "token": ...}`)
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	if *handle == "" || *name == "" {
		return usagef("--handle and --display-name are required")
	}
	env, err := openAdmin(ctx, c)
	if err != nil {
		return err
	}
	defer env.close()
	made, err := env.svc.CreateOwner(ctx, *handle, *name, *email)
	if err != nil {
		return explain(err)
	}
	if *asJSON {
		return printJSON(stdout, map[string]string{"id": made.Principal.ID, "token": made.Token.Token})
	}
	fmt.Fprintf(stdout, "owner %s created (id %s)\ntoken (shown once): %s\n", made.Principal.Handle, made.Principal.ID, made.Token.Token)
	return nil
}

func adminPrincipalCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin principal create", "Creates a person, agent or app. Agents and apps get their first token, printed once.", stderr)
	kind := c.fs.String("kind", "", "user, agent or app (required)")
	handle := c.fs.String("handle", "", "handle (required)")
	name := c.fs.String("display-name", "", "display name (required)")
	email := c.fs.String("email", "", "e-mail address (people only)")
	owner := c.fs.Bool("owner", false, "make the person an owner")
	asJSON := c.fs.Bool("json", false, `print {"id": ..., "token": ...}`)
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	if *kind == "" || *handle == "" || *name == "" {
		return usagef("--kind, --handle and --display-name are required")
	}
	env, err := openAdmin(ctx, c)
	if err != nil {
		return err
	}
	defer env.close()
	made, err := env.svc.CreatePrincipal(authz.Unmetered(ctx), admin.Operator, admin.PrincipalInput{Kind: identity.Kind(*kind),
		Handle: *handle, DisplayName: *name, Email: *email, IsOwner: *owner})
	if err != nil {
		return explain(err)
	}
	out := map[string]string{"id": made.Principal.ID}
	if made.Token != nil {
		out["token"] = made.Token.Token
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "%s %s created (id %s)\n", made.Principal.Kind, made.Principal.Handle, made.Principal.ID)
	if made.Token != nil {
		fmt.Fprintf(stdout, "token (shown once): %s\n", made.Token.Token)
	}
	return nil
}

// openFor opens the admin service for a command about the principal named
// by --handle (required) and resolves it.
func openFor(ctx context.Context, c *adminFlags, handle string) (*adminEnv, identity.Principal, error) {
	if strings.TrimSpace(handle) == "" {
		return nil, identity.Principal{}, usagef("--handle is required")
	}
	env, err := openAdmin(ctx, c)
	if err != nil {
		return nil, identity.Principal{}, err
	}
	p, err := env.svc.PrincipalByHandle(ctx, handle)
	if err != nil {
		env.close()
		if errors.Is(err, identity.ErrNotFound) {
			return nil, identity.Principal{}, fmt.Errorf("no principal has the handle %q", handle)
		}
		return nil, identity.Principal{}, err
	}
	return env, p, nil
}

func adminPrincipalStatus(ctx context.Context, verb string, st identity.Status, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin principal "+verb, "Sets the principal's status to "+string(st)+".", stderr)
	handle := c.fs.String("handle", "", "handle of the principal (required)")
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	env, p, err := openFor(ctx, c, *handle)
	if err != nil {
		return err
	}
	defer env.close()
	out, err := env.svc.UpdatePrincipal(authz.Unmetered(ctx), admin.Operator, p.ID, identity.PrincipalPatch{Status: &st})
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(stdout, "%s is %s\n", out.Handle, out.Status)
	return nil
}

func adminPrincipalList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin principal list", "Lists every person, agent and app in creation order.", stderr)
	asJSON := c.fs.Bool("json", false, "print a JSON array")
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	env, err := openAdmin(ctx, c)
	if err != nil {
		return err
	}
	defer env.close()
	ctx = authz.Unmetered(ctx)
	type row struct {
		ID          string `json:"id"`
		Kind        string `json:"kind"`
		Handle      string `json:"handle"`
		DisplayName string `json:"display_name"`
		Status      string `json:"status"`
		IsOwner     bool   `json:"is_owner"`
	}
	var rows []row
	after := ""
	for {
		page, err := env.svc.ListPrincipals(ctx, admin.Operator, after, nil)
		if err != nil {
			return explain(err)
		}
		for _, p := range page.Principals {
			rows = append(rows, row{p.ID, string(p.Kind), p.Handle, p.DisplayName, string(p.Status), p.IsOwner})
		}
		if page.NextAfter == "" {
			break
		}
		after = page.NextAfter
	}
	if *asJSON {
		if rows == nil {
			rows = []row{}
		}
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tHANDLE\tSTATUS\tOWNER")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", r.ID, r.Kind, r.Handle, r.Status, r.IsOwner)
	}
	return tw.Flush()
}

func adminTokenCreate(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags(name, "Issues a token for the principal with --handle and prints it once; only its hash is stored.", stderr)
	handle := c.fs.String("handle", "", "handle of the principal (required)")
	label := c.fs.String("label", "issued by bothy admin token create", "label stored with the token")
	ttl := c.fs.Duration("ttl", 0, "lifetime of the token, e.g. 720h (default: token.default_ttl; 0 means no expiry; negative is refused)")
	asJSON := c.fs.Bool("json", false, `print {"id": ..., "token": ...}`)
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	var life *time.Duration
	c.fs.Visit(func(f *flag.Flag) {
		if f.Name == "ttl" {
			life = ttl
		}
	})
	if life != nil && *life < 0 {
		return usagef("--ttl must not be negative")
	}
	env, p, err := openFor(ctx, c, *handle)
	if err != nil {
		return err
	}
	defer env.close()
	tok, err := env.svc.CreateToken(authz.Unmetered(ctx), admin.Operator, p.ID, *label, life)
	if err != nil {
		return explain(err)
	}
	if *asJSON {
		return printJSON(stdout, map[string]string{"id": tok.ID, "token": tok.Token})
	}
	fmt.Fprintln(stdout, tok.Token)
	if tok.ExpiresAt != nil {
		fmt.Fprintf(stderr, "token %s expires at %s\n", tok.ID, tok.ExpiresAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(stderr, "token %s does not expire\n", tok.ID)
	}
	return nil
}

func adminTokenList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin token list", "Lists the tokens of the principal with --handle (never their secrets).", stderr)
	handle := c.fs.String("handle", "", "handle of the principal (required)")
	asJSON := c.fs.Bool("json", false, "print a JSON array")
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	env, p, err := openFor(ctx, c, *handle)
	if err != nil {
		return err
	}
	defer env.close()
	list, err := env.svc.ListTokens(authz.Unmetered(ctx), admin.Operator, p.ID)
	if err != nil {
		return explain(err)
	}
	if *asJSON {
		type row struct {
			ID         string             `json:"id"`
			Kind       identity.TokenKind `json:"kind"`
			Label      string             `json:"label"`
			CreatedAt  time.Time          `json:"created_at"`
			ExpiresAt  *time.Time         `json:"expires_at,omitempty"`
			LastUsedAt *time.Time         `json:"last_used_at,omitempty"`
			RevokedAt  *time.Time         `json:"revoked_at,omitempty"`
		}
		rows := make([]row, len(list))
		for i, t := range list {
			rows[i] = row{t.ID, t.Kind, t.Label, t.CreatedAt, t.ExpiresAt, t.LastUsedAt, t.RevokedAt}
		}
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tCREATED\tEXPIRES\tLAST USED\tREVOKED\tLABEL")
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339)
	}
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.CreatedAt.Format(time.RFC3339), when(t.ExpiresAt), when(t.LastUsedAt), when(t.RevokedAt), t.Label)
	}
	return tw.Flush()
}

func adminTokenRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin token revoke", "Revokes the token with --id (its id, not its secret).", stderr)
	id := c.fs.String("id", "", "id of the token (required)")
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	if *id == "" {
		return usagef("--id is required")
	}
	env, err := openAdmin(ctx, c)
	if err != nil {
		return err
	}
	defer env.close()
	t, err := env.svc.RevokeToken(authz.Unmetered(ctx), admin.Operator, *id)
	if problem.Is(err, problem.NotFound) {
		return fmt.Errorf("no token has the id %q", *id)
	}
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(stdout, "token %s revoked at %s\n", t.ID, t.RevokedAt.Format(time.RFC3339))
	return nil
}

// auditLine is one entry of bothy admin audit export: the REST shape of
// GET /api/v1/audit, with the actor's id (a deleted or local operator
// actor has no handle to show).
type auditLine struct {
	ID           string    `json:"id"`
	ActorID      string    `json:"actor_id"`
	Action       string    `json:"action"`
	Decision     string    `json:"decision"`
	Reason       string    `json:"reason,omitempty"`
	ResourceKind string    `json:"resource_kind"`
	ResourceID   string    `json:"resource_id,omitempty"`
	Count        int       `json:"count"`
	FirstAt      time.Time `json:"first_at"`
	LastAt       time.Time `json:"last_at"`
}

// adminAuditExport writes the audit log from --since (to --until) as JSON
// lines, oldest first, paging through the same read as GET /api/v1/audit.
func adminAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminFlags("admin audit export", "Writes the audit log's entries from --since as JSON lines (one entry per line), oldest first:\n"+
		"every audited allow, and the refusals of one actor, action and reason per aggregation window, counted.", stderr)
	since := c.fs.String("since", "", "RFC 3339 time: entries whose last decision is at or after it (required)")
	until := c.fs.String("until", "", "RFC 3339 time: entries whose first decision is before it (default: no bound)")
	handle := c.fs.String("actor", "", "handle of the principal whose decisions to export, operator for the local operator (default: everybody)")
	action := c.fs.String("action", "", "an action of the action table, such as grant.create (default: every action)")
	decision := c.fs.String("decision", "", "allow or deny (default: both)")
	format := c.fs.String("format", "jsonl", "the output format; jsonl is the only one")
	if err := parseStrict(c.fs, args); err != nil {
		return err
	}
	if *format != "jsonl" {
		return usagef("--format %q is unknown; jsonl is the only format", *format)
	}
	if *since == "" {
		return usagef("admin audit export needs --since (an RFC 3339 time such as 2026-12-01T00:00:00Z)")
	}
	f := authz.AuditFilter{Action: *action, Decision: *decision}
	var err error
	if f.Since, f.Until, err = auditWindow(*since, *until); err != nil {
		return err
	}
	env, err := openAuditActor(ctx, c, *handle, &f)
	if err != nil {
		return err
	}
	defer env.close()
	return exportAudit(ctx, env, f, stdout)
}

// auditWindow parses the RFC 3339 times of --since and --until (empty: no
// bound) of admin audit export.
func auditWindow(since, until string) (from, to *time.Time, err error) {
	s, err := time.Parse(time.RFC3339, since)
	if err != nil {
		return nil, nil, usagef("--since: %q is no RFC 3339 time", since)
	}
	if until == "" {
		return &s, nil, nil
	}
	u, err := time.Parse(time.RFC3339, until)
	if err != nil {
		return nil, nil, usagef("--until: %q is no RFC 3339 time", until)
	}
	return &s, &u, nil
}

// openAuditActor opens the admin service and narrows f to the actor of
// --actor: the local operator, a principal's handle, or everybody when
// handle is empty.
func openAuditActor(ctx context.Context, c *adminFlags, handle string, f *authz.AuditFilter) (*adminEnv, error) {
	switch handle {
	case "":
		return openAdmin(ctx, c)
	case identity.OperatorHandle:
		// The local operator is no stored principal; its entries are
		// recorded under its id.
		f.ActorID = admin.Operator.ID
		return openAdmin(ctx, c)
	default:
		env, p, err := openFor(ctx, c, handle)
		if err != nil {
			return nil, err
		}
		f.ActorID = p.ID
		return env, nil
	}
}

// exportAudit writes the audit entries f selects to stdout as JSON lines,
// reading them a thousand at a time.
func exportAudit(ctx context.Context, env *adminEnv, f authz.AuditFilter, stdout io.Writer) error {
	enc := json.NewEncoder(stdout)
	after := ""
	for {
		page, err := env.authz.AuditList(authz.Unmetered(ctx), admin.Operator, f, after, 1000)
		if err != nil {
			return explain(err)
		}
		for _, e := range page.Entries {
			if err := enc.Encode(auditLine{e.ID, e.ActorID, e.Action, e.Decision, e.Reason, e.ResourceKind, e.ResourceID, e.Count, e.FirstAt, e.LastAt}); err != nil {
				return err
			}
		}
		if !page.More {
			return nil
		}
		after = page.EndCursor
	}
}
