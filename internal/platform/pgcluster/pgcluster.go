// Package pgcluster runs a private PostgreSQL cluster from the server
// binaries installed on the machine (initdb, pg_ctl, postgres).
//
// Two callers use it: `bothy dev`, whose embedded development database keeps
// its data across restarts, and the test harness (package pgtest), which
// starts a throw-away cluster when neither an external server nor Docker is
// available. The cluster listens only on 127.0.0.1 and on a Unix socket in a
// private directory and trusts local connections. It is durable by default
// (fsync, synchronous_commit and full_page_writes on, as PostgreSQL ships
// them): a commit it confirms survives a crash. Only throw-away clusters
// (Options.NoSync, the tests') trade that for speed.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned (wrapped) by FindBinaries and Start when no
// PostgreSQL server binaries are installed. Its text tells the user what to
// do about it.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found " +
	"on PATH, via pg_config --bindir or in /usr/lib/postgresql/<version>/bin: " +
	"install the PostgreSQL server binaries (on Debian/Ubuntu: apt-get install postgresql) " +
	"or set database.url (env BOTHY_DATABASE_URL) to an existing PostgreSQL server")

// serverTools are the programs a cluster needs; they must all come from the
// same directory so that their versions match.
var serverTools = []string{"initdb", "pg_ctl", "postgres"}

// debianRoot is where Debian and Ubuntu install the server binaries, one
// directory per major version, none of them on PATH by default.
const debianRoot = "/usr/lib/postgresql"

// FindBinaries returns the directory that holds initdb, pg_ctl and postgres.
// It looks on PATH first, then asks pg_config --bindir, then takes the
// highest version under /usr/lib/postgresql/<version>/bin. The error, when
// nothing is found, wraps ErrNoBinaries.
func FindBinaries() (binDir string, err error) {
	if dir, ok := fromPath(); ok {
		return dir, nil
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		// pg_config also ships with the client development package
		// (libpq-dev), so the directory it names may lack the server: check.
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			if dir := strings.TrimSpace(string(out)); hasServerTools(dir) {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	slices.SortFunc(dirs, func(a, b string) int {
		// Highest version first; "9.6" < "10" needs a numeric comparison.
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, dir := range dirs {
		if hasServerTools(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgcluster: %w", ErrNoBinaries)
}

// fromPath finds the tools on PATH. Administrators often link just a few
// tools into /usr/local/bin, so the directory of the symlink's target is
// preferred: that is where the sibling tools (pg_isready, ...) live too.
func fromPath() (string, bool) {
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", false
	}
	for _, tool := range serverTools[1:] {
		if _, err := exec.LookPath(tool); err != nil {
			return "", false
		}
	}
	if resolved, err := filepath.EvalSymlinks(initdb); err == nil && hasServerTools(filepath.Dir(resolved)) {
		return filepath.Dir(resolved), true
	}
	if abs, err := filepath.Abs(initdb); err == nil && hasServerTools(filepath.Dir(abs)) {
		return filepath.Dir(abs), true
	}
	return "", false
}

func hasServerTools(dir string) bool {
	if dir == "" {
		return false
	}
	for _, tool := range serverTools {
		fi, err := os.Stat(filepath.Join(dir, tool))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions compares dotted version numbers ("9.6", "15");
// non-numeric parts compare as 0.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// Options configures Start.
type Options struct {
	// DataDir holds the cluster: the data directory DataDir/pgdata and the
	// server log DataDir/postgres.log. It is created when missing.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// Ephemeral removes DataDir when the cluster stops. Whether or not it is
	// set, a watchdog process stops the server should this process die
	// without calling Stop (crash, signal, test timeout), and with Ephemeral
	// it also removes DataDir then.
	Ephemeral bool
	// NoSync turns fsync, synchronous_commit and full_page_writes off: a
	// crash can then lose confirmed commits or corrupt the cluster. Only
	// for throw-away test clusters; `bothy dev` keeps its data and never
	// sets it.
	NoSync bool
	// MaxConnections is the server's max_connections; 0 is 200, enough for
	// the pools of one test process. A cluster that several test processes
	// share needs more.
	MaxConnections int
}

// Cluster is a running PostgreSQL server started by Start. Its methods are
// safe for concurrent use. Keep it reachable until Stop: a Cluster the
// garbage collector takes closes the pipe its watchdog waits on, and the
// watchdog then stops the server.
type Cluster struct {
	binDir    string
	dataDir   string
	pgdata    string
	logFile   string
	sockDir   string
	port      int
	ephemeral bool
	noSync    bool
	maxConns  int
	cred      *syscall.Credential // non-nil when running as root
	env       []string
	log       *slog.Logger

	mu       sync.Mutex
	stopped  bool
	watchdog *exec.Cmd
	watchW   *os.File // closing it (or dying) wakes the watchdog up
}

// startTimeout bounds how long pg_ctl waits for the server to accept
// connections, in seconds; crash recovery of a big dev database can be slow.
const startTimeout = 60

// Start starts a cluster in opts.DataDir, running initdb first when
// DataDir/pgdata holds no cluster yet, and returns once the server accepts
// connections. Existing data is reused; a postmaster.pid left behind by a
// dead server is removed. When the process runs as root, the files belong to
// and the programs run as the system user "postgres", because PostgreSQL
// refuses to run as root.
//
// Errors: ErrNoBinaries (wrapped) when the server binaries are missing; an
// error naming the missing "postgres" user when running as root without it;
// an error when another live server uses the data directory; and initdb or
// server start failures, which carry the tail of their output or of the
// server log. ctx bounds the whole start.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.prepareDataDir(); err != nil {
		return nil, err
	}
	if err := c.makeSocketDir(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.cleanupFailedStart()
		}
	}()
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	if err := c.removeStalePID(); err != nil {
		return nil, err
	}
	rotateLog(c.logFile)
	// The watchdog starts before the server so that no moment exists in
	// which a crash of this process would leave a server behind.
	if err := c.startWatchdog(); err != nil {
		return nil, err
	}
	if err := c.startOnPort(ctx, opts.Port); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	c.log.Info("PostgreSQL started", "port", c.port, "data_dir", c.pgdata, "log", c.logFile)
	return c, nil
}

// newCluster checks opts and returns the Cluster they describe, not yet
// started: its binaries, absolute paths, defaults, and the credential and
// environment of its programs.
func newCluster(opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: Options.DataDir is empty")
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data dir: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{
		binDir:    binDir,
		dataDir:   dataDir,
		pgdata:    filepath.Join(dataDir, "pgdata"),
		logFile:   filepath.Join(dataDir, "postgres.log"),
		ephemeral: opts.Ephemeral,
		noSync:    opts.NoSync,
		maxConns:  opts.MaxConnections,
		log:       logger.With("component", "pgcluster"),
	}
	if c.maxConns <= 0 {
		c.maxConns = 200
	}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	c.env = childEnv(c.cred != nil, dataDir)
	return c, nil
}

// startOnPort starts the server on port want, or on a free port when want
// is 0. A free port picked here can be taken by another process before the
// server binds it (tests start clusters in parallel), so that case is tried
// up to three times with a fresh port.
func (c *Cluster) startOnPort(ctx context.Context, want int) error {
	for attempt := 1; ; attempt++ {
		port := want
		if port == 0 {
			var err error
			if port, err = freePort(); err != nil {
				return err
			}
		}
		err := c.start(ctx, port)
		if err == nil {
			return nil
		}
		if want != 0 || attempt == 3 || !errors.Is(err, errAddrInUse) {
			return err
		}
		c.log.Info("port taken meanwhile, retrying", "port", port)
	}
}

// postgresUser returns the credential of the "postgres" system user, which
// runs the server when this process is root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, but PostgreSQL refuses to run as root and "+
			"the system user \"postgres\" to run it as does not exist (%v): create it "+
			"(e.g. useradd --system --user-group postgres) or run as a non-root user", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgcluster: system user postgres has a non-numeric uid/gid %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// childEnv is the environment of initdb, pg_ctl and postgres. PG* variables
// of the caller (PGDATA, PGPORT, PGHOST...) are dropped: they would silently
// point the tools elsewhere. LC_ALL=C keeps messages in English, which the
// start-up error detection reads.
func childEnv(asPostgres bool, dataDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_ALL=") {
			continue
		}
		if asPostgres && (strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LC_ALL=C")
	if asPostgres {
		env = append(env, "HOME="+dataDir, "USER=postgres", "LOGNAME=postgres")
	}
	return env
}

// prepareDataDir creates DataDir and, when running as root, hands it to the
// postgres user and makes sure that user can reach it.
func (c *Cluster) prepareDataDir() error {
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create data dir: %w", err)
	}
	if c.cred == nil {
		return nil
	}
	if err := c.grantSearch(filepath.Dir(c.dataDir)); err != nil {
		return err
	}
	// The whole tree, not just the top: a data dir copied or restored by
	// root would otherwise make the server fail on the first file it opens.
	uid, gid := int(c.cred.Uid), int(c.cred.Gid)
	err := filepath.WalkDir(c.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("pgcluster: give the data dir to the postgres user: %w", err)
	}
	return nil
}

// grantSearch makes every directory from dir up to / searchable by the
// postgres user. Running as root, DataDir often sits below a directory only
// root may enter (/root, or the 0700 directory of t.TempDir); the server,
// running as postgres, could not open its own files. Only the search (x)
// permission for others is added, never read or write, and a warning says so.
func (c *Cluster) grantSearch(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if !searchable(fi, c.cred) {
			mode := fi.Mode().Perm() | 0o001
			c.log.Warn("granting search permission to others so that the postgres user can reach the data dir",
				"dir", d, "mode", fmt.Sprintf("%04o", mode))
			if err := os.Chmod(d, mode); err != nil {
				return fmt.Errorf("pgcluster: the postgres user cannot reach %s: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// searchable reports whether the user of cred may enter the directory fi,
// judged from its owner, group and mode (supplementary groups are ignored,
// which errs on the side of granting).
func searchable(fi fs.FileInfo, cred *syscall.Credential) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == cred.Uid:
		return perm&0o100 != 0
	case st.Gid == cred.Gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// maxSocketPath is the length a Unix socket path must stay below (sun_path
// holds 108 bytes on Linux, 104 on macOS; PostgreSQL also needs room for the
// lock file name).
const maxSocketPath = 100

// makeSocketDir creates the private directory of the Unix socket. It lives
// in the temporary directory rather than in DataDir: DataDir paths are often
// too long for a socket, and some file systems (shared folders, network
// mounts) do not support sockets at all.
func (c *Cluster) makeSocketDir() error {
	base := os.TempDir()
	probe := filepath.Join(base, "bothy-pg-0123456789", ".s.PGSQL.65535.lock")
	if len(probe) >= maxSocketPath || (c.cred != nil && !reachable(base, c.cred)) {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "bothy-pg-")
	if err != nil {
		return fmt.Errorf("pgcluster: create socket dir: %w", err)
	}
	c.sockDir = dir
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: give the socket dir to the postgres user: %w", err)
		}
	}
	return nil
}

// reachable reports whether every directory from dir up to / is searchable
// by the user of cred.
func reachable(dir string, cred *syscall.Credential) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !searchable(fi, cred) {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// initdb creates the cluster unless DataDir/pgdata already holds one. It
// builds the cluster in a side directory and renames it into place, so an
// interrupted initdb never leaves a half-made pgdata that later starts fail
// on.
func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.pgdata, "PG_VERSION")); err == nil {
		return nil
	}
	tmp := c.pgdata + ".init"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("pgcluster: remove leftover %s: %w", tmp, err)
	}
	c.log.Info("creating PostgreSQL cluster", "data_dir", c.pgdata)
	args := []string{
		"-D", tmp,
		"-U", "postgres",
		"-E", "UTF8",
		// The C locale exists everywhere (containers often lack others)
		// and sorts the same on every machine.
		"--no-locale",
		"--auth=trust",
	}
	if c.noSync {
		// fsync is off at run time anyway; syncing here only costs time.
		args = append(args, "--no-sync")
	}
	out, err := c.command(ctx, "initdb", args...).CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("pgcluster: initdb failed: %w\n%s", err, tail(out, 20))
	}
	// initdb's pg_hba.conf also trusts ::1 and replication connections;
	// trust exactly what the brief allows: the socket and 127.0.0.1.
	hba := "# Written by bothy's pgcluster: trust local connections only.\n" +
		"local all all trust\n" +
		"host  all all 127.0.0.1/32 trust\n"
	hbaPath := filepath.Join(tmp, "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hba), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write pg_hba.conf: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(hbaPath, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	if err := os.Rename(tmp, c.pgdata); err != nil {
		return fmt.Errorf("pgcluster: %s exists but holds no PostgreSQL cluster: %w", c.pgdata, err)
	}
	return nil
}

// removeStalePID removes postmaster.pid when the server it names is gone.
// PostgreSQL checks this itself, but in containers the old pid is often
// reused by an unrelated process after a restart, and the server then
// refuses to start.
func (c *Cluster) removeStalePID() error {
	path := filepath.Join(c.pgdata, "postmaster.pid")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 && postgresAlive(pid) {
		// No pg_ctl stop here: the server may belong to a running bothy dev,
		// whose database it would pull away.
		return fmt.Errorf("pgcluster: a PostgreSQL server (pid %d) already runs on %s: "+
			"if a bothy dev uses it, stop that one with Ctrl-C in its terminal; otherwise use another data directory",
			pid, c.pgdata)
	}
	c.log.Info("removing stale postmaster.pid", "path", path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: remove stale postmaster.pid: %w", err)
	}
	return nil
}

// postgresAlive reports whether pid is a live process that is (as far as
// /proc tells) a PostgreSQL server.
func postgresAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		return strings.HasPrefix(string(comm), "postgres") || strings.HasPrefix(string(comm), "postmaster")
	}
	return true // no /proc (macOS): assume it is the server
}

// maxLogSize is the size above which the server log is rotated at start,
// so that a long-lived development database does not fill the disk.
const maxLogSize = 16 << 20

func rotateLog(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(path, path+".1")
	}
}

// watchdogScript waits until its stdin closes, which happens when Stop
// closes the pipe or when this process dies in any way, then stops the
// server and removes the socket dir (and, for an ephemeral cluster, the data
// dir). It ignores the signals a terminal sends on Ctrl-C so that it
// outlives the process it watches.
const watchdogScript = `trap '' HUP INT TERM QUIT
read line
"$0" stop -D "$1" -m fast -w -t 30 >/dev/null 2>&1 || "$0" stop -D "$1" -m immediate >/dev/null 2>&1
rm -rf "$2"
if [ -n "$3" ]; then rm -rf "$3"; fi
exit 0`

func (c *Cluster) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pgcluster: watchdog pipe: %w", err)
	}
	removeDir := ""
	if c.ephemeral {
		removeDir = c.dataDir
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript,
		filepath.Join(c.binDir, "pg_ctl"), c.pgdata, c.sockDir, removeDir)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.Env = c.env
	// Its own process group: Ctrl-C in a terminal must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("pgcluster: start watchdog: %w", err)
	}
	r.Close()
	// w is close-on-exec (os.Pipe), so the server never inherits it and
	// only this process keeps the watchdog asleep.
	c.watchdog, c.watchW = cmd, w
	return nil
}

// stopWatchdog wakes the watchdog up and waits for it; it then finds the
// server stopped and only removes the directories.
func (c *Cluster) stopWatchdog() {
	if c.watchdog == nil {
		return
	}
	c.watchW.Close()
	done := make(chan struct{})
	go func() {
		_ = c.watchdog.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		_ = c.watchdog.Process.Kill()
		<-done
	}
	c.watchdog = nil
}

var errAddrInUse = errors.New("address already in use")

// start runs pg_ctl start on port and waits until the server is ready.
func (c *Cluster) start(ctx context.Context, port int) error {
	var logOffset int64
	if fi, err := os.Stat(c.logFile); err == nil {
		logOffset = fi.Size()
	}
	// Settings go on the command line, not into postgresql.conf, so that
	// they follow this code on every start, also for old data dirs.
	// pg_ctl passes -o through /bin/sh, hence the quoting.
	settings := []string{
		"-p", strconv.Itoa(port),
		"-k", shellQuote(c.sockDir),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_permissions=0700",
		// Parallel tests each open pools of their own.
		"-c", "max_connections=" + strconv.Itoa(c.maxConns),
	}
	settings = append(settings, c.durability()...)
	out, err := c.command(ctx, "pg_ctl", "start",
		"-D", c.pgdata,
		"-l", c.logFile,
		"-w", "-t", strconv.Itoa(startTimeout),
		"-s",
		"-o", strings.Join(settings, " "),
	).CombinedOutput()
	if err == nil {
		c.port = port
		return nil
	}
	serverLog := readFrom(c.logFile, logOffset)
	// A failed or timed-out start may leave a server running: stop it.
	_ = c.pgctlStop("immediate")
	if bytes.Contains(serverLog, []byte("Address already in use")) {
		err = fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	return fmt.Errorf("pgcluster: start PostgreSQL on 127.0.0.1:%d: %w\n%s%s",
		port, err, tail(out, 10), tail(serverLog, 20))
}

// waitReady connects until the server answers over TCP. pg_ctl -w has
// already waited for the socket; this proves the URL that callers get works.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(attempt)
			conn.Close(attempt)
		}
		cancelAttempt()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: PostgreSQL on 127.0.0.1:%d does not accept connections: %w (log: %s)",
				c.port, last, c.logFile)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// command prepares one of the server tools, run as the postgres user when
// this process is root.
func (c *Cluster) command(ctx context.Context, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, tool), args...)
	cmd.Env = c.env
	// The tools may chdir-check their working directory, which the
	// postgres user might not be allowed to enter (/root/...).
	cmd.Dir = c.dataDir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// pgctlStop runs pg_ctl stop in the given shutdown mode. A server that is
// not running counts as stopped.
func (c *Cluster) pgctlStop(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.pgdata, "-m", mode, "-w", "-t", "60", "-s").CombinedOutput()
	if err == nil {
		return nil
	}
	if _, statErr := os.Stat(filepath.Join(c.pgdata, "postmaster.pid")); errors.Is(statErr, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("pgcluster: pg_ctl stop: %w\n%s", err, tail(out, 10))
}

// cleanupFailedStart undoes what a failed Start left: the watchdog stops a
// server that may have come up, then the directories go.
func (c *Cluster) cleanupFailedStart() {
	if c.watchdog != nil {
		c.stopWatchdog()
	} else if c.sockDir != "" {
		os.RemoveAll(c.sockDir)
	}
	if c.ephemeral {
		os.RemoveAll(c.dataDir)
	}
}

// URL returns a postgres:// URL for database dbname of the cluster: user
// postgres over 127.0.0.1 without password (trust) and without TLS.
func (c *Cluster) URL(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// PID returns the process id of the running server's postmaster, read from
// its postmaster.pid. The backends and auxiliary processes are its
// children; each is the leader of a process group of its own (PostgreSQL
// makes them so), so signalling the postmaster's group does not reach them.
// Tests that suspend the server (SIGSTOP) use it. The error says that no
// server runs on the data directory.
func (c *Cluster) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.pgdata, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: no server runs on %s: %w", c.pgdata, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgcluster: %s/postmaster.pid names no process", c.pgdata)
	}
	return pid, nil
}

// Stop shuts the server down (pg_ctl stop -m fast: open sessions are
// disconnected, data is kept), removes the socket directory, and with
// Options.Ephemeral the data directory. Calling it again does nothing and
// returns nil. The error reports a failed pg_ctl stop.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	err := c.pgctlStop("fast")
	// After a failed fast stop the watchdog still tries an immediate one.
	c.stopWatchdog()
	os.RemoveAll(c.sockDir)
	if c.ephemeral {
		if rmErr := os.RemoveAll(c.dataDir); rmErr != nil && err == nil {
			err = fmt.Errorf("pgcluster: remove data dir: %w", rmErr)
		}
	}
	if err == nil {
		c.log.Info("PostgreSQL stopped", "data_dir", c.pgdata)
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readFrom returns the content of path from offset on (at most the last
// 64 KiB of it).
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > 64<<10 {
		offset = fi.Size() - 64<<10
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// tail returns the last n lines of b, each indented, for error messages.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var sb strings.Builder
	for _, l := range lines {
		if l != "" {
			sb.WriteString("    " + l + "\n")
		}
	}
	return sb.String()
}

// durability returns the settings that decide whether a confirmed commit
// survives a crash. They are named on every start, so that a data folder
// made by an older version that ran without them gets them back.
func (c *Cluster) durability() []string {
	if c.noSync {
		// Test data is disposable: skip durability.
		return []string{"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	}
	return []string{"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on"}
}
