package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/playground"
	"bothy.example.com/bothy/internal/world"
)

// The data folder of bothy dev (--data, default .bothy-dev) holds, besides
// the embedded cluster and world.json, two small files that let the other
// commands and a second start find the running development server:
//
//	bothy-dev.lock  locked (flock) while a bothy dev runs on the folder; holds
//	                its pid and base URL for the message of a second start
//	database.url    the connection URL of the running embedded database;
//	                removed when bothy dev stops
const (
	defaultDevData = ".bothy-dev"
	devLockName    = "bothy-dev.lock"
	devURLName     = "database.url"
)

// devLock is the held lock of a data folder.
type devLock struct {
	f    *os.File
	path string
}

// lockDevData takes the lock of the data folder dir without waiting. When
// another bothy dev holds it, the error says which process and address and
// what to do; the running server and its database are left alone.
func lockDevData(dir string) (*devLock, error) {
	path := filepath.Join(dir, devLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, busyError(dir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("--data: lock %s: %w", path, err)
	}
	return &devLock{f: f, path: path}, nil
}

// busyError is the answer of a second bothy dev on a folder in use.
func busyError(dir, holder string) error {
	who := "another bothy dev"
	if pid, base, ok := strings.Cut(holder, " "); ok {
		who = fmt.Sprintf("another bothy dev (pid %s, serving %s)", pid, base)
	}
	return fmt.Errorf("the data folder %s is in use by %s.\n"+
		"Use that server, or stop it with Ctrl-C in its terminal and start again.\n"+
		"To run a second development server beside it, give it its own folder and address:\n"+
		"  bothy dev --data /tmp/bothy2 --addr 127.0.0.1:8081", dir, who)
}

// announce records the pid and base URL of the running server in the lock
// file, for the message of a second start.
func (l *devLock) announce(base string) {
	if err := l.f.Truncate(0); err == nil {
		l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+base+"\n"), 0)
	}
}

// release unlocks the folder; the file stays (an empty lock file is free).
func (l *devLock) release() {
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// writeDevURL records the database URL of the running dev server in dir;
// the returned function removes it again.
func writeDevURL(dir, url string) (func(), error) {
	path := filepath.Join(dir, devURLName)
	if err := os.WriteFile(path, []byte(url+"\n"), 0o600); err != nil {
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// devDatabaseURL returns the database URL of the bothy dev running on the
// data folder dir. It fails with what to do when no dev server runs there.
func devDatabaseURL(dir string) (string, error) {
	none := fmt.Errorf("database.url is empty and no bothy dev runs on the data folder %s: "+
		"start one (bin/bothy dev, or make run), pass --data DIR of a running one, "+
		"or set database.url in the config file or as %s", dir, config.EnvName(config.DatabaseURL))
	b, err := os.ReadFile(filepath.Join(dir, devURLName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", none
	}
	if err != nil {
		return "", err
	}
	// The URL file is removed on a clean stop; after a crash it can stay
	// behind, so it counts only while the folder's lock is held.
	if l, err := lockDevData(dir); err == nil {
		l.release()
		return "", none
	}
	return strings.TrimSpace(string(b)), nil
}

// withDevData adds --data to the flags of a command that needs
// database.url, and returns the flag's value.
func (c *common) withDevData() *string {
	return c.fs.String("data", defaultDevData, "data folder of a running bothy dev whose database is used when database.url is empty")
}

// databaseURL is database.url, or else the database of the bothy dev that
// runs on dataDir.
func databaseURL(cfg *config.Config, dataDir string) (string, error) {
	if u := cfg.String(config.DatabaseURL); u != "" {
		return u, nil
	}
	return devDatabaseURL(dataDir)
}

// bannerHandles are the example world's principals in the order the banner
// and the playground show them; alex, a person with trigger rights, first.
var bannerHandles = []string{"alex", "sam", "robin", "writer", "lotse", "texter", "feedbot"}

// actAs are the example world's principals that the dev playground offers.
func actAs(w *world.World) []playground.Principal {
	var out []playground.Principal
	for _, h := range bannerHandles {
		if p, ok := w.Principals[h]; ok {
			out = append(out, playground.Principal{Handle: h, Kind: p.Kind, Token: p.Token})
		}
	}
	return out
}

// clientMsgID returns a fresh clientMsgId for the banner's example, so a
// copied example never replays an earlier message by accident.
func clientMsgID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "hello-" + hex.EncodeToString(b)
}

// printBanner writes what a developer needs after bothy dev started: the
// addresses, the database, the world's main threads and tokens, and examples
// to copy.
func printBanner(w io.Writer, base, dbURL, worldFile string, wd *world.World) {
	fmt.Fprintf(w, "Bothy development server on %s\n", base)
	fmt.Fprintf(w, "  playground  %s/   (set the header Authorization: Bearer <token>)\n", base)
	fmt.Fprintf(w, "  GraphQL     %s/graphql\n", base)
	fmt.Fprintf(w, "  REST        %s/api/v1   OpenAPI %s/api/openapi.yaml\n", base, base)
	fmt.Fprintf(w, "  database    %s\n", dbURL)
	fmt.Fprintf(w, "  world       %s\n", worldFile)
	fmt.Fprintf(w, "\nTokens of the example world:\n")
	for _, h := range bannerHandles {
		if p, ok := wd.Principals[h]; ok {
			fmt.Fprintf(w, "  %-8s %-5s %s\n", h, p.Kind, p.Token)
		}
	}
	fmt.Fprintf(w, "\nMain threads of the example world's channels:\n")
	keys := make([]string, 0, len(wd.Channels))
	for k, ch := range wd.Channels {
		if ch.MainThreadID != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-24s %s\n", k, wd.Channels[k].MainThreadID)
	}
	thread := wd.Channels["Support/Allgemein"].MainThreadID
	lotse := wd.Principals["lotse"].Token
	if thread == "" || lotse == "" {
		return
	}
	fmt.Fprintf(w, "\nTry it: run the reference agent for Lotse in a second terminal:\n")
	fmt.Fprintf(w, "  BOTHY_AGENT_TOKEN=%s bin/bothy agent run --server %s\n", lotse, base)
	fmt.Fprintf(w, "then, in the playground as alex (Authorization: Bearer %s), ask Lotse in Support/Allgemein:\n", wd.Principals["alex"].Token)
	fmt.Fprintf(w, "  mutation { createMessage(threadId: %q, input: {clientMsgId: %q, contentMd: \"@lotse the printer is down\"}) { message { id triggerState startedThread { id } } } }\n", thread, clientMsgID())
	fmt.Fprintf(w, "and read Lotse's answer in the thread the message started:\n")
	fmt.Fprintf(w, "  query { thread(id: \"<startedThread.id>\") { messages { messages { author { handle } contentMd } } } }\n")
	fmt.Fprintf(w, "(each clientMsgId is used once: change it before you post again)\n")
}
