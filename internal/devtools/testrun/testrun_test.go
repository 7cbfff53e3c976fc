package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOrder(t *testing.T) {
	t.Parallel()
	pkgs := []pkg{
		{ImportPath: "m/a", Match: []string{"./..."}},
		{ImportPath: "m/slow", Match: []string{"./...", "./slow"}},
		{ImportPath: "m/b", Match: []string{"./..."}},
		{ImportPath: "m/slower", Match: []string{"./slower", "./..."}},
		{ImportPath: "m/sdk/c", Match: []string{"./sdk/..."}},
	}
	order(pkgs, []string{"./slower", "./slow", "./...", "./sdk/..."})
	var got []string
	for _, p := range pkgs {
		got = append(got, p.ImportPath)
	}
	want := []string{"m/slower", "m/slow", "m/a", "m/b", "m/sdk/c"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order: %v, want %v", got, want)
	}
}

func TestNameBinaries(t *testing.T) {
	t.Parallel()
	tests := []string{"x_test.go"}
	pkgs := []pkg{
		{ImportPath: "m/internal/chat", TestGoFiles: tests},
		{ImportPath: "m/tools/image", XTestGoFiles: tests},
		{ImportPath: "m/tools/image/cmd/image", TestGoFiles: tests},
		{ImportPath: "m/internal/world"},
		{ImportPath: "m/sdk/world", TestGoFiles: tests},
	}
	nameBinaries(pkgs)
	var got []string
	for _, p := range pkgs {
		got = append(got, p.binary)
	}
	// world has one package with tests: the other needs no binary.
	want := []string{"chat.test", "m_tools_image.test", "m_tools_image_cmd_image.test", "", "world.test"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("nameBinaries: %q, want %q", got, want)
	}
}

func TestFinalEvents(t *testing.T) {
	t.Parallel()
	elapsed := 2.5
	pass := &event{Action: "pass", Package: "p", Elapsed: &elapsed}
	fail := &event{Action: "fail", Package: "p", Elapsed: &elapsed}
	exit := errors.New("exit status 3")
	for _, c := range []struct {
		name    string
		end     *event
		err     error
		actions []string
	}{
		{"passed", pass, nil, []string{"pass"}},
		{"failed", fail, exit, []string{"fail"}},
		{"passed, then exited 3", pass, exit, []string{"output", "fail"}},
		{"no end, exited 0", nil, nil, []string{"pass"}},
		{"no end, killed", nil, exit, []string{"output", "fail"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, ev := range finalEvents("p", c.end, c.err, 1) {
				got = append(got, ev.Action)
				if ev.Package != "p" || (ev.Action != "output" && ev.Elapsed == nil) {
					t.Fatalf("%+v", ev)
				}
			}
			if !reflect.DeepEqual(got, c.actions) {
				t.Fatalf("actions %v, want %v", got, c.actions)
			}
		})
	}
}

func TestPackageEnd(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		`{"Action":"pass","Package":"p","Elapsed":1}`:                      true,
		`{"Action":"fail","Package":"p","Elapsed":1}`:                      true,
		`{"Action":"skip","Package":"p","Elapsed":0}`:                      true,
		`{"Action":"pass","Package":"p","Test":"TestX","Elapsed":1}`:       false,
		`{"Action":"output","Package":"p","Output":"\"Action\":\"pass\""}`: false,
		`{"Action":"run","Package":"p","Test":"TestX"}`:                    false,
	} {
		if _, got := packageEnd([]byte(line)); got != want {
			t.Errorf("packageEnd(%s) = %v, want %v", line, got, want)
		}
	}
}

func TestLineWriter(t *testing.T) {
	t.Parallel()
	var lines []string
	w := &lineWriter{line: func(b []byte) { lines = append(lines, string(b)) }}
	for _, part := range []string{"Alex\nSa", "m\n", "Robin"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	w.flush()
	if want := []string{"Alex\n", "Sam\n", "Robin\n"}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
}

// TestRunModule runs the packages of testdata/mod as make test runs them:
// each package ends as go test would end it (a failing test, a build that
// fails, a TestMain that exits 3 after its tests passed, no test files),
// the package named first starts first, and a second run links nothing
// (go test -c leaves a binary in the folder whose build ID is current).
func TestRunModule(t *testing.T) {
	t.Parallel()
	mod, err := filepath.Abs(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	// -x makes the go commands print what they run, the linker among it;
	// it changes no build.
	var goSaid bytes.Buffer
	o := options{dir: t.TempDir(), procs: 1, parallel: 2, timeout: time.Minute, workDir: mod, stderr: &goSaid,
		env: []string{"GOWORK=off", "GOFLAGS=" + os.Getenv("GOFLAGS") + " -x"}, patterns: []string{"./exits", "./..."}}
	var out bytes.Buffer
	ok, err := runAll(t.Context(), o, &out)
	if err != nil || ok {
		t.Fatalf("runAll: %v, %v; want a failed run", ok, err)
	}
	ends, first := packageEnds(t, out.Bytes())
	want := map[string]string{"pass": "pass", "fail": "fail", "none": "skip", "broken": "fail", "exits": "fail"}
	if !reflect.DeepEqual(ends, want) {
		t.Fatalf("package ends %v, want %v\n%s", ends, want, out.Bytes())
	}
	if first != "exits" {
		t.Fatalf("first package %q, want exits, named first", first)
	}
	if !bytes.Contains(out.Bytes(), []byte(`"Action":"build-fail"`)) || !bytes.Contains(out.Bytes(), []byte("undefinedName")) {
		t.Fatalf("no build failure in the events:\n%s", out.Bytes())
	}
	// Again, two at once, without the broken package: nothing changed,
	// nothing links.
	o.procs, o.patterns = 2, []string{"./pass", "./fail", "./none"}
	goSaid.Reset()
	out.Reset()
	if ok, err := runAll(t.Context(), o, &out); err != nil || ok {
		t.Fatalf("runAll: %v, %v; want a failed run\n%s", ok, err, out.Bytes())
	}
	if ends, _ := packageEnds(t, out.Bytes()); !reflect.DeepEqual(ends, map[string]string{"pass": "pass", "fail": "fail", "none": "skip"}) {
		t.Fatalf("package ends %v\n%s", ends, out.Bytes())
	}
	// With -json, what -x prints comes as build-output events.
	if said := append(goSaid.Bytes(), out.Bytes()...); !bytes.Contains(said, []byte("WORK=")) || bytes.Contains(said, []byte("/link -o")) {
		t.Fatalf("the second run linked again, or -x said nothing:\n%s", said)
	}
}

// packageEnds returns the last element of each package's import path with
// the action that ended it, and the package that started first.
func packageEnds(t *testing.T, stream []byte) (map[string]string, string) {
	t.Helper()
	ends := map[string]string{}
	first := ""
	sc := bufio.NewScanner(bytes.NewReader(stream))
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not an event: %s", sc.Bytes())
		}
		name := ev.Package[strings.LastIndex(ev.Package, "/")+1:]
		if ev.Action == "start" && first == "" {
			first = name
		}
		if ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip") {
			ends[name] = ev.Action
		}
	}
	return ends, first
}
