package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// quickStartLines returns the command lines of the README's quick start
// block (between the quickstart markers), comments and all, as a developer
// copies them.
func quickStartLines(t *testing.T, readme string) []string {
	t.Helper()
	start := strings.Index(readme, "<!-- quickstart")
	end := strings.Index(readme, "<!-- /quickstart -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no quickstart block")
	}
	block := readme[start:end]
	open := strings.Index(block, "```sh\n")
	close := strings.LastIndex(block, "```")
	if open < 0 || close <= open {
		t.Fatal("the quickstart block has no sh code")
	}
	var lines []string
	for _, l := range strings.Split(block[open+len("```sh\n"):close], "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestREADMEQuickStart runs every command line of the README's quick start
// in a fresh clone of this repository, as written, with one change: the
// server listens on a free port instead of 8080 (server.addr from the
// environment, and the same address in the lines that name it), so the test
// runs beside a developer's server. The dev server stays up in the
// background while the later lines run; the agent's --once line answers a
// real request of Alex; a second dev start is refused without harm; Ctrl-C
// ends the dev server with status 0.
func TestREADMEQuickStart(t *testing.T) {
	t.Parallel()
	clone, lines := quickStartClone(t)

	addr := freeAddr(t)
	env := append(os.Environ(), "BOTHY_SERVER_ADDR="+addr, "BOTHY_DATABASE_URL=")
	command := func(line string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", strings.ReplaceAll(line, "127.0.0.1:8080", addr))
		cmd.Dir = clone
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	base := "http://" + addr

	var dev *exec.Cmd
	var devOut apitest.Buffer
	devDone := make(chan error, 1)
	t.Cleanup(func() {
		if dev != nil && dev.ProcessState == nil {
			syscall.Kill(-dev.Process.Pid, syscall.SIGINT)
			select {
			case <-devDone:
			case <-time.After(30 * time.Second):
				syscall.Kill(-dev.Process.Pid, syscall.SIGKILL)
			}
		}
	})

	for _, line := range lines {
		t.Logf("$ %s", line)
		cmdLine := strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
		switch {
		case strings.HasPrefix(cmdLine, "bin/bothy dev"):
			// dev is set before it starts, so that the cleanup stops it
			// should the test end while it starts.
			dev = command(line)
			startQuickStartDev(t, dev, &devOut, devDone, base)
			secondStart(t, command(line), base)
		case strings.Contains(cmdLine, "agent run") && strings.Contains(cmdLine, "--once"):
			if dev == nil {
				t.Fatal("the agent line comes before bin/bothy dev")
			}
			runQuickStartAgent(t, command(line), clone, base)
		default:
			runQuickStartLine(t, command(line), line, cmdLine)
		}
	}
	if dev == nil {
		t.Fatal("the quick start has no bin/bothy dev line")
	}
	stopQuickStartDev(t, dev, &devOut, devDone, clone)
}

// stopQuickStartDev sends dev, the quick start's bin/bothy dev, Ctrl-C and
// checks that it ends cleanly within a minute and frees the data folder of
// the clone.
func stopQuickStartDev(t *testing.T, dev *exec.Cmd, devOut *apitest.Buffer, devDone chan error, clone string) {
	t.Helper()
	// Ctrl-C ends the dev server cleanly and frees the data folder.
	syscall.Kill(-dev.Process.Pid, syscall.SIGINT)
	select {
	case err := <-devDone:
		if err != nil {
			t.Fatalf("bin/bothy dev after Ctrl-C: %v\n%s", err, devOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("bin/bothy dev did not stop on Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(clone, defaultDevData, devURLName)); err == nil {
		t.Fatal("database.url stays after the dev server stopped")
	}
}

// quickStartClone clones this repository into a temporary folder, linking
// the playground's npm packages, and returns the clone and the command
// lines of its README's quick start.
func quickStartClone(t *testing.T) (clone string, lines []string) {
	t.Helper()
	for _, tool := range []string{"git", "make", "curl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	rootOut, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("not in a git work tree: %v", err)
	}
	root := strings.TrimSpace(string(rootOut))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines = quickStartLines(t, string(readme))

	clone = filepath.Join(t.TempDir(), "bothy")
	if out, err := exec.Command("git", "clone", "-q", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// The pinned npm packages of the playground are the same bytes in the
	// clone; link them instead of a second download.
	nm := filepath.Join(root, "internal", "playground", "node_modules")
	if _, err := os.Stat(nm); err == nil {
		if err := os.Symlink(nm, filepath.Join(clone, "internal", "playground", "node_modules")); err != nil {
			t.Fatal(err)
		}
	}
	return clone, lines
}

// startQuickStartDev starts dev, the quick start's bin/bothy dev, writing
// its standard output to devOut and its end to devDone, and checks its
// banner and every address it names.
func startQuickStartDev(t *testing.T, dev *exec.Cmd, devOut *apitest.Buffer, devDone chan error, base string) {
	t.Helper()
	dev.Stdout, dev.Stderr = devOut, io.Discard
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { devDone <- dev.Wait() }()
	waitBanner(t, devOut, devDone)
	banner := devOut.String()
	for _, want := range []string{"Bothy development server on " + base, "database    postgres", "Main threads",
		"Support/Allgemein", `clientMsgId: "hello-`, "bin/bothy agent run --server " + base} {
		if !strings.Contains(banner, want) {
			t.Fatalf("the banner lacks %q:\n%s", want, banner)
		}
	}
	checkBannerAddresses(t, banner, base)
}

// runQuickStartAgent runs agent, the quick start's agent run --once, while
// Alex asks Lotse, and checks the answer it posts.
func runQuickStartAgent(t *testing.T, agent *exec.Cmd, clone, base string) {
	t.Helper()
	var agentOut apitest.Buffer
	agent.Stdout, agent.Stderr = &agentOut, &agentOut
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Wait() }()
	started := askLotse(t, clone, base)
	select {
	case err := <-agentDone:
		if err != nil {
			t.Fatalf("agent run --once: %v\n%s", err, agentOut.String())
		}
	case <-time.After(2 * time.Minute):
		syscall.Kill(-agent.Process.Pid, syscall.SIGKILL)
		t.Fatalf("agent run --once did not finish:\n%s", agentOut.String())
	}
	checkAnswer(t, clone, base, started)
}

// runQuickStartLine runs cmd, made of a line of the quick start (cmdLine
// is that line without its comment), for up to eight minutes and checks
// its output.
func runQuickStartLine(t *testing.T, cmd *exec.Cmd, line, cmdLine string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Start()
	if err == nil {
		go func() {
			<-ctx.Done()
			if cmd.ProcessState == nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		}()
		err = cmd.Wait()
	}
	cancel()
	if err != nil {
		t.Fatalf("%s: %v\n%s\n%s", line, err, stdout.String(), stderr.String())
	}
	checkAnswers(t, cmdLine, stdout.String(), stderr.String())
}

// waitBanner waits until the dev server printed its whole banner.
func waitBanner(t *testing.T, out *apitest.Buffer, done chan error) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(out.String(), "(each clientMsgId is used once") {
		select {
		case err := <-done:
			t.Fatalf("bin/bothy dev ended: %v\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner:\n%s", out.String())
		}
	}
}

// checkBannerAddresses: every address the banner prints answers 200.
func checkBannerAddresses(t *testing.T, banner, base string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(banner))
	n := 0
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if !strings.HasPrefix(f, base) || strings.Contains(sc.Text(), "agent run") {
				continue
			}
			n++
			req, _ := http.NewRequest(http.MethodGet, f, nil)
			if strings.HasSuffix(f, "/graphql") {
				req.URL.RawQuery = "query=%7B__typename%7D"
				req.Header.Set("Authorization", "Bearer "+tokenFromBanner(t, banner, "alex"))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the banner's address %s answers %d", f, resp.StatusCode)
			}
		}
	}
	if n < 4 {
		t.Fatalf("the banner names %d addresses:\n%s", n, banner)
	}
}

// tokenFromBanner returns the token the banner lists for handle.
func tokenFromBanner(t *testing.T, banner, handle string) string {
	t.Helper()
	for _, l := range strings.Split(banner, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == handle {
			return f[2]
		}
	}
	t.Fatalf("no token of %s in the banner", handle)
	return ""
}

// secondStart: a second dev start on the busy folder ends with what to do,
// and the first server keeps answering.
func secondStart(t *testing.T, second *exec.Cmd, base string) {
	t.Helper()
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is in use by another bothy dev") || strings.Contains(string(out), "pg_ctl") {
		t.Fatalf("second dev start: %v\n%s", err, out)
	}
	resp, err := http.Get(base + "/api/v1")
	if err != nil {
		t.Fatalf("the first server stopped answering: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the first server answers %d after a second start", resp.StatusCode)
	}
}

// checkAnswers: a command line succeeded with a real answer: curl got a
// JSON document that is no problem, token create printed a token, --help
// printed the usage.
func checkAnswers(t *testing.T, line, stdout, stderr string) {
	t.Helper()
	switch {
	case strings.HasPrefix(line, "curl"):
		var doc map[string]any
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("%s: not JSON: %s", line, stdout)
		}
		if s, ok := doc["status"].(float64); ok && s >= 400 {
			t.Fatalf("%s: %s", line, stdout)
		}
	case strings.Contains(line, "token create"):
		if !strings.HasPrefix(strings.TrimSpace(stdout), "bothy_") {
			t.Fatalf("%s printed %q", line, stdout)
		}
	case strings.Contains(line, "--help"):
		if !strings.Contains(stdout+stderr, "Usage") {
			t.Fatalf("%s printed no usage: %s", line, stdout+stderr)
		}
	}
}

// devWorld reads the ids and tokens bothy dev wrote to the data folder.
func devWorld(t *testing.T, clone string) (alex, thread string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clone, defaultDevData, "world.json"))
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Principals map[string]struct{ Token string } `json:"principals"`
		Channels   map[string]struct {
			MainThreadID string `json:"main_thread_id"`
		} `json:"channels"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	return w.Principals["alex"].Token, w.Channels["Support/Allgemein"].MainThreadID
}

// gql posts a GraphQL request as token and decodes data into out.
func gql(t *testing.T, base, token, query string, vars map[string]any, out any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Data   json.RawMessage `json:"data"`
		Errors []any           `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Errors) > 0 {
		t.Fatalf("graphql: %v %v", err, doc.Errors)
	}
	if err := json.Unmarshal(doc.Data, out); err != nil {
		t.Fatal(err)
	}
}

// askLotse posts the README's example as Alex and returns the thread it
// started.
func askLotse(t *testing.T, clone, base string) string {
	t.Helper()
	alex, main := devWorld(t, clone)
	var res struct {
		CreateMessage struct {
			Message struct {
				ID            string `json:"id"`
				TriggerState  string `json:"triggerState"`
				StartedThread *struct {
					ID string `json:"id"`
				} `json:"startedThread"`
			} `json:"message"`
		} `json:"createMessage"`
	}
	gql(t, base, alex, `mutation($t: ID!, $c: String!) { createMessage(threadId: $t, input: {clientMsgId: $c, contentMd: "@lotse the printer is down"}) { message { id triggerState startedThread { id } } } }`,
		map[string]any{"t": main, "c": fmt.Sprintf("hello-%d", time.Now().UnixNano())}, &res)
	m := res.CreateMessage.Message
	if m.StartedThread == nil || m.TriggerState != "ACCEPTED" {
		t.Fatalf("the example started no run: %+v", m)
	}
	return m.StartedThread.ID
}

// checkAnswer: Lotse answered in the started thread.
func checkAnswer(t *testing.T, clone, base, thread string) {
	t.Helper()
	alex, _ := devWorld(t, clone)
	var res struct {
		Thread struct {
			Messages struct {
				Messages []struct {
					Author    struct{ Handle string } `json:"author"`
					Kind      string                  `json:"kind"`
					ContentMd string                  `json:"contentMd"`
				} `json:"messages"`
			} `json:"messages"`
		} `json:"thread"`
	}
	gql(t, base, alex, `query($t: ID!) { thread(id: $t) { messages { messages { author { handle } kind contentMd } } } }`, map[string]any{"t": thread}, &res)
	for _, m := range res.Thread.Messages.Messages {
		if m.Author.Handle == "lotse" && m.Kind == "TEXT" && strings.Contains(m.ContentMd, "printer is down") {
			return
		}
	}
	t.Fatalf("no answer of Lotse in the started thread: %+v", res.Thread.Messages.Messages)
}
