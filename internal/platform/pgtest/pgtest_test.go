package pgtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestURLGivesIsolatedMigratedDatabases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	urlA, urlB := URL(t), URL(t)
	if urlA == urlB {
		t.Fatalf("two URL calls gave the same database %s", urlA)
	}
	a, b := connect(ctx, t, urlA), connect(ctx, t, urlB)
	var nameA, nameB string
	if err := a.QueryRow(ctx, "SELECT current_database()").Scan(&nameA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, "SELECT current_database()").Scan(&nameB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB || !strings.HasPrefix(nameA, "t_") || !strings.HasPrefix(nameB, "t_") {
		t.Fatalf("databases %q and %q, want two distinct t_<random>", nameA, nameB)
	}

	if _, err := a.Exec(ctx, `INSERT INTO principals (id, kind, handle, display_name, created_at)
		VALUES ($1, 'user', 'alice', 'Alice', now())`, uuid.New()); err != nil {
		t.Fatalf("insert into the migrated table principals: %v", err)
	}
	count := func(conn *pgx.Conn) int {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM principals").Scan(&n); err != nil {
			t.Fatalf("principals in %s: %v", conn.Config().Database, err)
		}
		return n
	}
	if n := count(a); n != 1 {
		t.Fatalf("principals in the first database = %d, want 1", n)
	}
	if n := count(b); n != 0 {
		t.Fatalf("principals in the second database = %d, want 0: the databases are not isolated", n)
	}
}

// TestCleanupDropsDatabase checks that the database of a (sub)test is
// dropped after the test ended, even with a session still open on it: in
// batches of dropBatch (a queue that never holds more), and the rest when
// the package's tests end (dropPending, which Main calls).
func TestCleanupDropsDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for range dropBatch + 1 {
		t.Run("uses a database", func(t *testing.T) {
			conn, err := pgx.Connect(ctx, URL(t))
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, conn.Config().Database) // left open on purpose
		})
		srv.mu.Lock()
		queued := len(srv.finished)
		srv.mu.Unlock()
		if queued >= dropBatch {
			t.Fatalf("%d finished databases queued, want fewer than %d", queued, dropBatch)
		}
	}
	if err := srv.dropPending(); err != nil {
		t.Fatal(err)
	}
	server, err := ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	admin := connect(ctx, t, server)
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d of the databases %v still exist after their tests ended", left, names)
	}
}

func TestWithDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:p@h:5432/postgres?sslmode=disable": "postgres://u:p@h:5432/t_1?sslmode=disable",
		"postgresql://h":                "postgresql://h/t_1",
		"host=h user=u dbname=postgres": "host=h user=u dbname=postgres dbname='t_1'",
	} {
		if got, err := withDatabase(in, "t_1"); err != nil || got != want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func connect(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestTemplateClonesCarryTheFill: a template of NewTemplate holds what its
// fill wrote; each URLFrom clone starts with it and is isolated from the
// others; the template takes no connections; dropTemplates (which Main
// calls) removes it.
func TestTemplateClonesCarryTheFill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := NewTemplate(ctx, func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `INSERT INTO principals (id, kind, handle, display_name, created_at)
			VALUES ($1, 'user', 'alex', 'Alex', now())`, uuid.New())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	handles := func(conn *pgx.Conn) string {
		rows, err := conn.Query(ctx, "SELECT handle FROM principals ORDER BY handle")
		if err != nil {
			t.Fatal(err)
		}
		hs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(hs, ",")
	}
	a, b := connect(ctx, t, URLFrom(t, name)), connect(ctx, t, URLFrom(t, name))
	if _, err := a.Exec(ctx, `INSERT INTO principals (id, kind, handle, display_name, created_at)
		VALUES ($1, 'user', 'sam', 'Sam', now())`, uuid.New()); err != nil {
		t.Fatal(err)
	}
	if got := handles(a); got != "alex,sam" {
		t.Fatalf("principals of the first clone = %q, want alex,sam", got)
	}
	if got := handles(b); got != "alex" {
		t.Fatalf("principals of the second clone = %q, want alex: the clones are not isolated", got)
	}
	tmplURL, err := withDatabase(srv.url, name)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, tmplURL); err == nil {
		conn.Close(ctx)
		t.Fatal("the template took a connection; a clone would then fail")
	}
	if err := srv.dropTemplates(); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := connect(ctx, t, srv.url).QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("template %s still exists after dropTemplates", name)
	}
}
