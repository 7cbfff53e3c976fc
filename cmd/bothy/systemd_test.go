package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/config"
)

// units are the systemd units of contrib/: one replica, and the template
// of several replicas on one host.
var units = []string{"bothy.service", "bothy@.service"}

// maxExposure is the highest `systemd-analyze security` rating the units
// may have (0 is the best, 10 the worst; systemd calls 1.0 to 4.9 "OK").
const maxExposure = 3.0

// unitFile is a parsed unit: its lines by key, in order.
type unitFile map[string][]string

func readUnit(t *testing.T, path string) (unitFile, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		u[section+"."+k] = append(u[section+"."+k], v)
	}
	return u, data
}

// one returns the single value of key, failing when it is absent or set
// more than once.
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("unit: want one %s, got %q", key, u[key])
	}
	return u[key][0]
}

// systemdUnits checks contrib's units without a running systemd:
// systemd-analyze verify accepts them (their binary replaced by the test's),
// systemd-analyze security --offline rates them at most maxExposure, they
// run as the static user of contrib/sysusers.d/bothy.conf, and the template
// differs from the single unit only in what makes instances differ.
func systemdUnits(t *testing.T, bin string) {
	analyze := tool(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	parsed := map[string]unitFile{}
	for _, name := range units {
		u, data := readUnit(t, filepath.Join("..", "..", "contrib", name))
		parsed[name] = u
		path := filepath.Join(dir, name)
		os.WriteFile(path, bytes.ReplaceAll(data, []byte("/usr/local/bin/bothy"), []byte(bin)), 0o644)
		target := path
		if strings.Contains(name, "@") {
			// verify and security need an instance of a template; its
			// name is the port.
			target = filepath.Join(dir, strings.Replace(name, "@", "@8080", 1))
		}
		analyzeUnit(t, analyze, name, target)
		checkUnitUserAndDocs(t, name, u)
	}
	// The template is the single unit with per-instance addresses: the
	// sandbox cannot drift apart between the two.
	single, tmpl := parsed["bothy.service"], parsed["bothy@.service"]
	for key := range mergeKeys(single, tmpl) {
		if key == "Unit.Description" || key == "Service.ExecStart" {
			continue
		}
		if strings.Join(single[key], "\n") != strings.Join(tmpl[key], "\n") {
			t.Errorf("%s differs between bothy.service (%q) and bothy@.service (%q)", key, single[key], tmpl[key])
		}
	}
	// systemd's SIGKILL must not cut the drain short.
	stop, err := time.ParseDuration(single.one(t, "Service.TimeoutStopSec"))
	if err != nil || stop <= config.Defaults().Duration(config.ServerShutdownTimeout) {
		t.Errorf("TimeoutStopSec=%s: want a duration above server.shutdown_timeout (%s)", single.one(t, "Service.TimeoutStopSec"), config.Defaults().Duration(config.ServerShutdownTimeout))
	}
}

// analyzeUnit checks the unit file target (of contrib's name) with
// systemd-analyze: verify accepts it without a word, and security
// --offline rates it at most maxExposure.
func analyzeUnit(t *testing.T, analyze, name, target string) {
	t.Helper()
	out, err := exec.Command(analyze, "verify", target).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", name, err, out)
	}
	// --threshold counts in tenths: the exit status says whether the
	// rating is above it; the printed rating says by how much.
	out, err = exec.Command(analyze, "security", "--offline=true", fmt.Sprintf("--threshold=%d", int(maxExposure*10)), target).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security %s printed no rating: %v\n%s", name, err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || score > maxExposure {
		t.Fatalf("systemd-analyze security rates %s %.1f, want at most %.1f: %v\n%s", name, score, maxExposure, err, out)
	}
	t.Logf("systemd-analyze security: %s %.1f", name, score)
}

// checkUnitUserAndDocs checks that the unit u (contrib's name) runs as the
// static user bothy and that each of its Documentation= entries is a URL
// or an installed file.
func checkUnitUserAndDocs(t *testing.T, name string, u unitFile) {
	t.Helper()
	if u["Service.DynamicUser"] != nil || u.one(t, "Service.User") != "bothy" || u.one(t, "Service.Group") != "bothy" {
		t.Fatalf("%s must run as the static user bothy of contrib/sysusers.d/bothy.conf (the config file is readable by its group)", name)
	}
	for _, doc := range strings.Fields(u.one(t, "Unit.Documentation")) {
		if !strings.HasPrefix(doc, "https://") && !strings.HasPrefix(doc, "file:///") && !strings.HasPrefix(doc, "man:") {
			t.Fatalf("%s: Documentation=%s is neither a URL nor an installed file", name, doc)
		}
	}
}

// TestTemplateInstanceAddresses: every instance of contrib/bothy@.service,
// whose name is its port, listens on valid addresses of its own: the API
// on that port of 127.0.0.1 and /metrics on another loopback address, for
// the first and the last port as for two neighbours. The old mapping
// (808%i) gave instance 10 the port 80810.
func TestTemplateInstanceAddresses(t *testing.T) {
	t.Parallel()
	u, _ := readUnit(t, filepath.Join("..", "..", "contrib", "bothy@.service"))
	start := u.one(t, "Service.ExecStart")
	seen := map[string]string{}
	for _, instance := range []string{"1", "10", "8080", "8081", "65535"} {
		api, metrics := instanceAddrs(t, start, instance)
		for _, a := range []string{api, metrics} {
			host, port, err := net.SplitHostPort(a)
			if err != nil {
				t.Fatalf("bothy@%s: address %q: %v", instance, a, err)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || port != instance {
				t.Errorf("bothy@%s listens on %s: want the port %s, the instance's name", instance, a, instance)
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				t.Errorf("bothy@%s listens on %s: want a loopback address (nginx and Prometheus are on the host)", instance, a)
			}
			if other, ok := seen[a]; ok {
				t.Errorf("bothy@%s and %s both listen on %s", instance, other, a)
			}
			seen[a] = instance
		}
	}
}

// instanceAddrs returns the --addr and --metrics-addr of ExecStart line
// for instance, as systemd expands %i.
func instanceAddrs(t *testing.T, line, instance string) (api, metrics string) {
	t.Helper()
	args := strings.Fields(strings.ReplaceAll(line, "%i", instance))
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--addr":
			api = args[i+1]
		case "--metrics-addr":
			metrics = args[i+1]
		}
	}
	if api == "" || metrics == "" {
		t.Fatalf("bothy@.service: ExecStart=%s lacks --addr or --metrics-addr: each instance needs its own addresses", line)
	}
	return api, metrics
}

func mergeKeys(a, b unitFile) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// docBlock returns the lines of the first ```sh block after heading in
// docs/operations.md.
func docBlock(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	at := strings.Index(doc, "\n"+heading+"\n")
	if at < 0 {
		t.Fatalf("docs/operations.md has no heading %q", heading)
	}
	doc = doc[at:]
	open := strings.Index(doc, "```sh\n")
	if open < 0 {
		t.Fatalf("docs/operations.md: no sh block after %q", heading)
	}
	doc = doc[open+len("```sh\n"):]
	close := strings.Index(doc, "```")
	var lines []string
	for _, l := range strings.Split(doc[:close], "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// account returns the uid and gid of name in the passwd file of root.
func account(t *testing.T, root, name string) (uint32, uint32) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatalf("no passwd file in the install root: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 7 && fields[0] == name {
			uid, _ := strconv.Atoi(fields[2])
			gid, _ := strconv.Atoi(fields[3])
			if !strings.HasSuffix(fields[6], "nologin") {
				t.Errorf("user %s has the shell %s, want nologin", name, fields[6])
			}
			return uint32(uid), uint32(gid)
		}
	}
	t.Fatalf("contrib/sysusers.d/bothy.conf made no user %s", name)
	return 0, 0
}

// exampleDatabaseURL is the database URL of the install steps in
// docs/operations.md; the test puts its own database in its place.
const exampleDatabaseURL = "postgres://bothy:SECRET@db.example.com:5432/bothy?sslmode=verify-full"

// systemdInstall runs the install steps of docs/operations.md ("systemd")
// into a scratch root instead of /: every path under /etc or /usr moves
// below it, systemd-sysusers makes the user there, make dist is the test's
// binary, and systemctl is left out. Then it starts each unit's ExecStart
// the way systemd would: as the user of User= (when the test runs as root;
// otherwise as the test's user, which proves less), with the environment
// of EnvironmentFile=, on the installed configuration. The replica must
// start, answer ready and stop cleanly on SIGTERM; the template's instance
// serves /metrics on its own address.
func systemdInstall(t *testing.T, bin, databaseURL string) {
	sysusers := tool(t, "systemd-sysusers", "systemd")
	root := scratchRoot(t)
	asRoot := os.Geteuid() == 0

	runInstallSteps(t, bin, databaseURL, sysusers, root, asRoot)
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if asRoot {
		uid, gid = account(t, root, "bothy")
	}
	// The password is root's alone.
	if st, err := os.Stat(filepath.Join(root, "etc", "bothy", "env")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("/etc/bothy/env after the install: %v %v, want mode 0600", st, err)
	}
	for _, name := range units {
		u := checkInstalledUnit(t, root, name)
		startUnit(t, u, root, name, uid, gid)
	}
}

// runInstallSteps runs the install steps of docs/operations.md
// ("systemd") into root, with the test's binary, database URL and
// systemd-sysusers, and checks that they write the database URL once and
// make the user bothy before they use its group.
func runInstallSteps(t *testing.T, bin, databaseURL, sysusers, root string, asRoot bool) {
	t.Helper()
	paths := regexp.MustCompile(`(^|[\s'"=])(/(?:etc|usr)/)`)
	group := ""
	steps := 0
	for _, line := range docBlock(t, "## systemd") {
		cmdLine := strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
		switch {
		case strings.HasPrefix(cmdLine, "make dist"), strings.HasPrefix(cmdLine, "systemctl "):
			continue
		}
		if strings.Contains(line, "-g bothy") {
			if group == "" {
				t.Fatalf("docs/operations.md uses the group bothy before systemd-sysusers made it: %s", line)
			}
			line = strings.ReplaceAll(line, "-g bothy", "-g "+group)
		}
		if strings.Contains(line, exampleDatabaseURL) {
			line = strings.ReplaceAll(line, exampleDatabaseURL, databaseURL)
			steps++
		}
		line = strings.ReplaceAll(line, "dist/bothy-*-linux-amd64", bin)
		line = paths.ReplaceAllString(line, "${1}"+root+"${2}")
		if strings.HasPrefix(cmdLine, "systemd-sysusers ") {
			line = strings.Replace(line, "systemd-sysusers ", sysusers+" --root="+root+" ", 1)
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("install step %q: %v\n%s", line, err, out)
		}
		if strings.HasPrefix(cmdLine, "systemd-sysusers ") {
			group = sysusersGroup(t, root, asRoot)
		}
	}
	if steps != 1 || group == "" {
		t.Fatalf("docs/operations.md's install steps no longer write %s into /etc/bothy/env, or make no user", exampleDatabaseURL)
	}
}

// sysusersGroup checks that systemd-sysusers made the user bothy in root
// and returns the group the later install steps use: bothy's when the
// test runs as root, the test's own otherwise.
func sysusersGroup(t *testing.T, root string, asRoot bool) string {
	t.Helper()
	if asRoot {
		_, gid := account(t, root, "bothy")
		return strconv.Itoa(int(gid))
	}
	account(t, root, "bothy")
	return strconv.Itoa(os.Getgid())
}

// checkInstalledUnit checks that the install steps installed contrib's
// unit name unchanged into root's /etc/systemd/system, with every file://
// documentation it names, and returns the parsed unit.
func checkInstalledUnit(t *testing.T, root, name string) unitFile {
	t.Helper()
	installed := filepath.Join(root, "etc", "systemd", "system", name)
	if !bytes.Equal(mustRead(t, installed), mustRead(t, filepath.Join("..", "..", "contrib", name))) {
		t.Fatalf("the install steps did not install contrib/%s as /etc/systemd/system/%s", name, name)
	}
	u, _ := readUnit(t, installed)
	for _, doc := range strings.Fields(u.one(t, "Unit.Documentation")) {
		if p, ok := strings.CutPrefix(doc, "file://"); ok {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: Documentation=%s is not installed by the steps of docs/operations.md", name, doc)
			}
		}
	}
	return u
}

// scratchRoot returns a new folder that stands for / in systemdInstall,
// with the folders every systemd host has, which the steps install into.
// It is removed when the test ends.
func scratchRoot(t *testing.T) string {
	t.Helper()
	// Everything below root must be reachable by the user bothy, as / is.
	root, err := os.MkdirTemp("", "bothy-install-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	for _, d := range []string{"etc/systemd/system", "usr/local/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// startUnit runs the ExecStart of u (of a template: the instance named by
// a free port) below root as uid:gid with the environment of its
// EnvironmentFile, waits until it serves and is ready, and stops it with
// its KillSignal.
func startUnit(t *testing.T, u unitFile, root, name string, uid, gid uint32) {
	t.Helper()
	args, line, addr, metrics := unitExecStart(t, u, root, name)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = unitEnvironment(t, u, root, name, line, addr, uid, gid)
	cmd.Dir = "/"
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	}
	var logs watch
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	select {
	case <-logs.seen(`"msg":"serving"`):
	case <-exited:
		t.Fatalf("%s as installed did not start: %v\n%s", name, cmd.ProcessState, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s as installed did not serve within a minute:\n%s", name, logs.String())
	}
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("http://" + addr + "/readyz"); code != http.StatusOK {
		t.Fatalf("%s: /readyz %d\n%s", name, code, logs.String())
	}
	if metrics != "" {
		if code := get("http://" + metrics + "/metrics"); code != http.StatusOK {
			t.Fatalf("%s: /metrics on the instance's metrics address: %d", name, code)
		}
	}
	if strings.Contains(logs.String(), unknownEnvMsg) {
		t.Fatalf("%s warned about its own environment:\n%s", name, logs.String())
	}
	if sig := u.one(t, "Service.KillSignal"); sig != "SIGTERM" {
		t.Fatalf("%s: KillSignal=%s, want SIGTERM (the drain)", name, sig)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("%s stopped with %d\n%s", name, code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM", name)
	}
}

// unitExecStart returns the ExecStart of u, named name, as it runs below
// root: its arguments with the paths under /etc and /usr moved below root,
// the command line, the API address the replica is to listen on (a free
// one, or the one a template's instance, a free port, derives) and the
// instance's metrics address ("" for a unit that is no template).
func unitExecStart(t *testing.T, u unitFile, root, name string) (args []string, line, addr, metrics string) {
	t.Helper()
	addr = freeAddr(t)
	line = u.one(t, "Service.ExecStart")
	if strings.Contains(line, "%i") {
		// The instance is the port: the unit derives both addresses.
		_, port, _ := net.SplitHostPort(addr)
		if addr, metrics = instanceAddrs(t, line, port); !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Fatalf("%s: the instance's API listens on %s, not on 127.0.0.1", name, addr)
		}
		line = strings.ReplaceAll(line, "%i", port)
	}
	if strings.Contains(line, "%") {
		t.Fatalf("%s: ExecStart has specifiers the test does not know: %s", name, line)
	}
	args = strings.Fields(line)
	for i, a := range args {
		if strings.HasPrefix(a, "/etc/") || strings.HasPrefix(a, "/usr/") {
			args[i] = filepath.Join(root, a)
		}
	}
	return args, line, addr, metrics
}

// unitEnvironment returns the environment systemd gives the ExecStart line
// of u, named name, below root: its own variables, those of the
// EnvironmentFile, and STATE_DIRECTORY, made for uid:gid; and a free
// server.addr, addr, where line sets none.
func unitEnvironment(t *testing.T, u unitFile, root, name, line, addr string, uid, gid uint32) []string {
	t.Helper()
	// systemd passes only its own variables and the EnvironmentFile's;
	// PATH for the program, and a free server.addr where the unit sets
	// none: the example's 127.0.0.1:8080 may be taken on this machine.
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "BOTHY_SERVER_DRAIN_DELAY=0s"}
	if !strings.Contains(line, "--addr") {
		env = append(env, "BOTHY_SERVER_ADDR="+addr)
	}
	envFile := u.one(t, "Service.EnvironmentFile")
	if strings.HasPrefix(envFile, "-") {
		t.Fatalf("%s: EnvironmentFile=%s may be missing; without it the unit starts without database.url", name, envFile)
	}
	for _, l := range strings.Split(string(mustRead(t, filepath.Join(root, envFile))), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			env = append(env, l)
		}
	}
	// StateDirectory=: systemd makes /var/lib/NAME for the service's user
	// and names it in STATE_DIRECTORY; here it is under root.
	if state := u["Service.StateDirectory"]; len(state) > 0 {
		dir := filepath.Join(root, "var", "lib", state[0])
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		// The path to it is open to everyone, as /var/lib is.
		for _, p := range []string{root, filepath.Join(root, "var"), filepath.Join(root, "var", "lib")} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(dir, int(uid), int(gid)); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, "STATE_DIRECTORY="+dir)
	}
	return env
}
