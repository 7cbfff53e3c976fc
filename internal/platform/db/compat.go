package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"bothy.example.com/bothy/migrations"
)

// requiresLine is the line of a migration file that states the oldest
// binary that can serve the schema once it is applied, named by the
// newest migration that binary embeds (migrations/00013_schema_compat.sql).
var requiresLine = regexp.MustCompile(`(?m)^-- bothy:requires (\d+)$`)

// Requirement is one migration's requirement: binaries that embed at least
// migration Requires can serve the schema after migration Version. An
// expand step requires less than its own version, a contract step its own.
type Requirement struct {
	Version, Requires int64
}

// EmbeddedRequirements reads the requirement of every embedded migration,
// in version order.
//
// Errors: a migration file without exactly one well-formed requires line,
// or one that requires a version above its own (a mistake in the
// repository, which its tests catch).
func EmbeddedRequirements() ([]Requirement, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []Requirement
	for _, n := range names {
		num, _, _ := strings.Cut(n, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version", n)
		}
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return nil, err
		}
		m := requiresLine.FindAllSubmatch(b, -1)
		if len(m) != 1 {
			return nil, fmt.Errorf("migration %s: needs exactly one line \"-- bothy:requires N\"", n)
		}
		r, _ := strconv.ParseInt(string(m[0][1]), 10, 64)
		if r > v {
			return nil, fmt.Errorf("migration %s: requires %d, beyond its own version", n, r)
		}
		out = append(out, Requirement{Version: v, Requires: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Compatibility is how a binary stands to a database's schema.
type Compatibility int

// The cases of Compatibility.
const (
	// SchemaCurrent: the schema is the binary's.
	SchemaCurrent Compatibility = iota
	// SchemaBehind: migrations of the binary are pending.
	SchemaBehind
	// SchemaNewerServable: the schema is newer, by expand steps only; the
	// binary serves it (a rolling upgrade's old replicas).
	SchemaNewerServable
	// SchemaNewer: the schema is newer by a step this binary cannot
	// serve, or one whose requirement was never recorded: it refuses
	// (readiness schema_newer).
	SchemaNewer
)

// CompatState is a binary's view of a database's schema.
type CompatState struct {
	Case Compatibility
	// Schema is the database's newest applied migration; Binary the
	// newest the binary embeds.
	Schema, Binary int64
	// Blocking are the newer migrations that require more than the binary
	// (or whose requirement is unknown), for SchemaNewer.
	Blocking []int64
}

// Decide is the rule: binary (its newest migration) on a schema at
// version schema with the recorded requirements of the migrations newer
// than binary (rows may hold others; a missing one blocks).
func Decide(binary, schema int64, recorded []Requirement) CompatState {
	st := CompatState{Schema: schema, Binary: binary}
	switch {
	case schema == binary:
		st.Case = SchemaCurrent
		return st
	case schema < binary:
		st.Case = SchemaBehind
		return st
	}
	req := map[int64]int64{}
	for _, r := range recorded {
		req[r.Version] = r.Requires
	}
	// Only the applied versions matter; goose numbers need not be dense,
	// so every recorded version above binary is checked, and a schema
	// version without a record blocks.
	if _, ok := req[schema]; !ok {
		st.Blocking = append(st.Blocking, schema)
	}
	for v, r := range req {
		if v > binary && v <= schema && r > binary {
			st.Blocking = append(st.Blocking, v)
		}
	}
	sort.Slice(st.Blocking, func(i, j int) bool { return st.Blocking[i] < st.Blocking[j] })
	st.Case = SchemaNewerServable
	if len(st.Blocking) > 0 {
		st.Case = SchemaNewer
	}
	return st
}

// Compat reads the schema version and the recorded requirements through q
// and decides how this binary stands to them (Decide).
//
// Errors: a database error.
func Compat(ctx context.Context, q Querier) (CompatState, error) {
	return CompatOf(ctx, q, EmbeddedVersion())
}

// CompatOf is Compat for a binary whose newest embedded migration is
// binary, which need not be this one: bothy migrate status --rollback-to
// asks whether an older binary would serve the schema. The recorded
// requirements answer that for any older binary, including those released
// before schema_compat existed, which would serve a schema silently
// instead of refusing it.
//
// Errors: a database error.
func CompatOf(ctx context.Context, q Querier, binary int64) (CompatState, error) {
	schema, err := SchemaVersion(ctx, q)
	if err != nil {
		return CompatState{}, err
	}
	var recorded []Requirement
	if schema > binary {
		rows, err := q.Query(ctx, `SELECT version, requires FROM schema_compat WHERE version > $1`, binary)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "42P01":
			// No table: nothing newer was recorded; every newer version
			// blocks.
		case err != nil:
			return CompatState{}, err
		default:
			defer rows.Close()
			for rows.Next() {
				var r Requirement
				if err := rows.Scan(&r.Version, &r.Requires); err != nil {
					return CompatState{}, err
				}
				recorded = append(recorded, r)
			}
			if err := rows.Err(); err != nil {
				return CompatState{}, err
			}
		}
	}
	return Decide(binary, schema, recorded), nil
}

// recordRequirements writes the requirement of every embedded migration
// the database has applied into schema_compat (kept when recorded before),
// in one statement through the migration's own connection.
func recordRequirements(ctx context.Context, exec func(ctx context.Context, sql string, args ...any) error) error {
	reqs, err := EmbeddedRequirements()
	if err != nil {
		return err
	}
	versions, requires := make([]int64, len(reqs)), make([]int64, len(reqs))
	for i, r := range reqs {
		versions[i], requires[i] = r.Version, r.Requires
	}
	if err := exec(ctx, `INSERT INTO schema_compat (version, requires)
		SELECT r.version, r.requires FROM unnest($1::bigint[], $2::bigint[]) AS r (version, requires)
		WHERE EXISTS (SELECT 1 FROM goose_db_version g WHERE g.version_id = r.version AND g.is_applied)
		ON CONFLICT (version) DO NOTHING`, versions, requires); err != nil {
		return fmt.Errorf("record the migrations' requirements: %w", err)
	}
	return nil
}
