//go:build chaos

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/gobuild"
)

// buildBothy builds cmd/bothy of this checkout into a folder of the
// chaos tests (gobuild): never bin/bothy, which another make build may
// replace while the processes restart.
func buildBothy(t *testing.T) string {
	t.Helper()
	return gobuild.Binary(t, gobuild.Bothy)
}

// baseURLFlag returns the flag of bothy agent run that names the model's
// API root: --model-base-url, or --base-url in the versions that call it
// so. Asking --help keeps the test working across the rename.
func baseURLFlag(t *testing.T, bin string) string {
	t.Helper()
	out, _ := exec.Command(bin, "agent", "run", "--help").CombinedOutput()
	switch {
	case bytes.Contains(out, []byte("-model-base-url")):
		return "--model-base-url"
	case bytes.Contains(out, []byte("-base-url")):
		return "--base-url"
	}
	t.Fatalf("bothy agent run --help names no flag for the model's base URL:\n%s", out)
	return ""
}

// sdkSlots are the slots that run an SDK's model example instead of the
// reference adapter, by the name the process is known by ("transport").
var sdkSlots = map[int]string{3: "python", 4: "typescript"}

// sdkCommands are the commands of the Python and TypeScript SDKs' model
// examples, installed and built by make sdk-python and make
// sdk-typescript (make chaos and make test run both first).
func sdkCommands(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds := map[string][]string{
		"python":     {filepath.Join(root, "bin/python-sdk/bin/python"), filepath.Join(root, "sdk/python/examples/model.py")},
		"typescript": {"node", filepath.Join(root, "sdk/typescript/examples/model.mjs")},
	}
	for _, need := range []string{cmds["python"][0], filepath.Join(root, "sdk/typescript/dist")} {
		if _, err := os.Stat(need); err != nil {
			t.Fatalf("%s is missing: run make sdk-python sdk-typescript first (%v)", need, err)
		}
	}
	return cmds
}

// modelKeyPrefix starts the model API key each process is given
// (BOTHY_MODEL_API_KEY, followed by the process's name): every adapter
// sends it as its bearer token, so the fake model knows which process
// asked, and the account can tell whose model requests a kill cut off.
const modelKeyPrefix = "chaos-key-"

// proc is one adapter process.
type proc struct {
	name      string
	slot, gen int
	transport string
	cmd       *exec.Cmd
	// done is closed when the process has exited and its output is read.
	done chan struct{}
	exit error
	// killed says that the test ended the process (SIGKILL or SIGTERM);
	// scheduled that the chaos schedule killed it with SIGKILL (its life
	// ran out, it was suspended past its lease, or its slot owed a kill).
	killed, scheduled atomic.Bool
	// serving is closed once the process logged "adapter started": it
	// reads the agent's stream from then on and may hold runs. A kill
	// before that tests only a start, not the run contract.
	serving chan struct{}
	mu      sync.Mutex
	holder  string
	// killedAt is when the test sent SIGKILL (the zero time before).
	killedAt time.Time
	// watch, when set, collects every line the process logs from then on.
	watch    bool
	watched  []string
	lastLine string
}

// Holder is the holder id the process logged at its start ("" before).
func (p *proc) Holder() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holder
}

// startedServing notes the process's start line with its holder; p.mu
// is held.
func (p *proc) startedServing(holder string) {
	p.holder = holder
	if !closed(p.serving) {
		close(p.serving)
	}
}

// served reports whether the process logged its start line. Once done is
// closed its every line is read, so the answer is final.
func (p *proc) served() bool { return closed(p.serving) }

// alive reports whether the process has not exited.
func (p *proc) alive() bool { return !closed(p.done) }

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// runStart is a "run started" line of an adapter process.
type runStart struct {
	proc    *proc
	runID   string
	attempt int
	at      time.Time
}

// supervisor starts, kills and watches the adapter processes.
type supervisor struct {
	t      *testing.T
	bin    string
	args   []string
	env    []string
	logDir string
	// sdks are the commands of the SDKs' examples by the "transport" that
	// names them (sdkSlots), with the server and the model in the
	// environment.
	sdks map[string][]string
	// started receives "run started" notices; a notice nobody waits for
	// is dropped.
	started chan runStart

	mu        sync.Mutex
	procs     []*proc
	current   map[int]*proc
	msgs      map[string]int // log lines by level and message
	errors    []string       // ERROR lines
	kills     int
	selfExits []string
}

func newSupervisor(t *testing.T, bin string, args, env []string, logDir string) *supervisor {
	return &supervisor{t: t, bin: bin, args: args, env: env, logDir: logDir, started: make(chan runStart, 16),
		current: map[int]*proc{}, msgs: map[string]int{}}
}

// start runs a new adapter process in slot with the transport.
func (s *supervisor) start(slot, gen int, transport string) *proc {
	p := &proc{name: fmt.Sprintf("s%d-g%03d-%s", slot, gen, transport), slot: slot, gen: gen, transport: transport,
		done: make(chan struct{}), serving: make(chan struct{})}
	f, err := os.Create(filepath.Join(s.logDir, "adapter-"+p.name+".log"))
	if err != nil {
		s.t.Errorf("adapter log: %v", err)
		close(p.done)
		return p
	}
	if sdk, ok := s.sdks[transport]; ok {
		p.cmd = exec.Command(sdk[0], sdk[1:]...)
	} else {
		p.cmd = exec.Command(s.bin, append(append([]string{"agent", "run"}, s.args...), "--transport", transport)...)
	}
	// The last value of a key wins in Cmd.Env. Clip: the slots start
	// processes at once, and an append into s.env's spare capacity would
	// be a race.
	p.cmd.Env = append(slices.Clip(s.env), "BOTHY_MODEL_API_KEY="+modelKeyPrefix+p.name)
	lw := &lineWriter{file: f, line: func(l string) { s.line(p, l) }}
	p.cmd.Stdout, p.cmd.Stderr = lw, lw
	if err := p.cmd.Start(); err != nil {
		s.t.Errorf("start adapter %s: %v", p.name, err)
		f.Close()
		close(p.done)
		return p
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.current[slot] = p
	s.mu.Unlock()
	go func() {
		// Wait returns once the output is copied: every line is seen
		// before done closes.
		p.exit = p.cmd.Wait()
		lw.flush()
		f.Close()
		close(p.done)
	}()
	return p
}

// kill ends p with SIGKILL (also when it is suspended) and waits for it;
// it reports false when p had exited already.
func (s *supervisor) kill(p *proc) bool {
	if !p.alive() {
		return false
	}
	p.killed.Store(true)
	p.mu.Lock()
	p.killedAt = time.Now()
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	s.mu.Lock()
	s.kills++
	s.mu.Unlock()
	return true
}

// chaosKill is a SIGKILL of the schedule (not of the test's end): the
// account counts these per SDK.
func (s *supervisor) chaosKill(p *proc) {
	if s.kill(p) {
		p.scheduled.Store(true)
	}
}

// servingKills is how many processes of slot the schedule killed after
// they had started serving.
func (s *supervisor) servingKills(slot int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.procs {
		if p.slot == slot && p.scheduled.Load() && p.served() {
			n++
		}
	}
	return n
}

// stop ends p with SIGTERM, as an operator would, and with SIGKILL when it
// has not exited within 15 s.
func (s *supervisor) stop(p *proc) {
	if !p.alive() {
		return
	}
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		s.t.Errorf("adapter %s did not stop within 15 s of SIGTERM", p.name)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// exited records a process that ended without the test ending it.
func (s *supervisor) exited(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.mu.Lock()
	last := p.lastLine
	p.mu.Unlock()
	s.selfExits = append(s.selfExits, fmt.Sprintf("%s (holder %s): %v; last line: %s", p.name, p.Holder(), p.exit, last))
}

// line handles one line of p's output: it notes the holder, passes "run
// started" on, counts the line by level and message and keeps errors.
func (s *supervisor) line(p *proc, l string) {
	var m map[string]any
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		// The Python SDK's example logs text (logging.basicConfig): its
		// start line is "INFO:bothy_agent.adapter:adapter started
		// holder=adapter-... once=False".
		if _, rest, ok := strings.Cut(l, ":adapter started holder="); ok {
			holder, _, _ := strings.Cut(rest, " ")
			p.mu.Lock()
			p.startedServing(holder)
			p.mu.Unlock()
		}
		s.mu.Lock()
		s.msgs["(no JSON) "+l]++
		s.mu.Unlock()
		return
	}
	msg, _ := m["msg"].(string)
	level, _ := m["level"].(string)
	p.mu.Lock()
	p.lastLine = l
	if p.watch {
		p.watched = append(p.watched, l)
	}
	if msg == "adapter started" {
		holder, _ := m["holder"].(string)
		p.startedServing(holder)
	}
	p.mu.Unlock()
	if msg == "run started" {
		runID, _ := m["run_id"].(string)
		attempt, _ := m["attempt"].(float64)
		// The process's own time of the line: on a loaded machine the
		// test may read a line seconds after it was written.
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["time"]))
		if err != nil {
			at = time.Now()
		}
		select {
		case s.started <- runStart{proc: p, runID: runID, attempt: int(attempt), at: at}:
		default:
		}
	}
	s.mu.Lock()
	s.msgs[level+" "+msg]++
	if level == "ERROR" {
		s.errors = append(s.errors, p.name+": "+l)
	}
	s.mu.Unlock()
}

// messageCounts returns the counted log lines, most frequent first.
func (s *supervisor) messageCounts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.msgs))
	for k, n := range s.msgs {
		out = append(out, fmt.Sprintf("%6d  %s", n, k))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// count returns how often a line with level and message was logged.
func (s *supervisor) count(level, msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgs[level+" "+msg]
}

// lineWriter splits a process's output into lines: each goes to file and
// to line.
type lineWriter struct {
	mu   sync.Mutex
	file *os.File
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.file.Write(b)
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		l := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if l != "" {
			w.line(l)
		}
	}
	return len(b), nil
}

// flush hands on a last line without a line break.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := strings.TrimSpace(string(w.buf)); l != "" {
		w.line(l)
	}
	w.buf = nil
}
