// Command testcluster runs a command (make test's go test) with one
// PostgreSQL cluster that all its test processes share: it starts an
// ephemeral cluster of the installed server binaries, runs the command
// with BOTHY_TEST_DATABASE_URL pointing at it (internal/platform/pgtest
// then clones each test's database from one shared template instead of
// every test process starting a cluster and migrating a template of its
// own), stops the cluster and exits with the command's status.
//
// Usage: go run ./internal/devtools/testcluster -- COMMAND [ARG...]
//
// When BOTHY_TEST_DATABASE_URL is set already, or no cluster can start,
// it runs the command as it is, and the tests find their server as
// pgtest describes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"bothy.example.com/bothy/internal/platform/pgcluster"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// maxConnections is the shared cluster's max_connections: make test runs
// four test packages at once, each with up to eight tests whose servers
// open pools of their own.
const maxConnections = 1000

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: testcluster -- COMMAND [ARG...]")
		os.Exit(2)
	}
	os.Exit(run(args))
}

// run runs args with a shared cluster when it can start one, and returns
// the command's exit status.
func run(args []string) int {
	env := os.Environ()
	if os.Getenv(pgtest.EnvURL) == "" {
		stop, url, err := start()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: no shared PostgreSQL cluster (%v); each test process starts its own\n", err)
		} else {
			defer stop()
			env = append(env, pgtest.EnvURL+"="+url)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// An interrupt reaches the command through the terminal's process
	// group; this process waits for it to end and then stops the cluster.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		return 1
	}
}

// minFree is the space a tmpfs must have left for the shared cluster to
// live on it: the test databases of make test (dropped in batches) and
// the WAL between checkpoints take a few hundred megabytes at a time.
const minFree = 4 << 30

// start starts the shared cluster in a temporary folder (in memory when
// the machine has room there) and returns how to stop it and its
// administration URL.
func start() (func(), string, error) {
	dir, err := os.MkdirTemp(memoryDir(), "bothy-testcluster-")
	if err != nil {
		return nil, "", err
	}
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{DataDir: dir, Ephemeral: true, NoSync: true, MaxConnections: maxConnections})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return func() { _ = c.Stop() }, c.URL("postgres"), nil
}
