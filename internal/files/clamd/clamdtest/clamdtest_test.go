package clamdtest_test

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/files/clamd/clamdtest"
)

// TestNewlineCommands checks the n-prefixed form of the commands, answered
// with a newline, which package clamd does not use but a person trying the
// fake with nc does.
func TestNewlineCommands(t *testing.T) {
	srv := clamdtest.NewServer()
	defer srv.Close()
	for cmd, want := range map[string]string{
		"nPING\n":    "PONG",
		"nVERSION\n": "ClamAV 1.4.0/27000/Fake clamdtest",
		"nSCAN /x\n": "UNKNOWN COMMAND",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Addr(), "tcp://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		got, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil || strings.TrimSuffix(got, "\n") != want {
			t.Errorf("%q answered %q, %v, want %q", cmd, got, err, want)
		}
	}
}

// TestCloseEndsHangingConnections checks that Close returns while a
// connection hangs, and that the client sees the connection end.
func TestCloseEndsHangingConnections(t *testing.T) {
	srv := clamdtest.NewServer()
	srv.SetMode(clamdtest.Hang)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Addr(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("zPING\x00"))
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 8)); err == nil {
		t.Errorf("read %d bytes from a closed fake", n)
	}
}

// TestEICARNotInSource checks the string's published length and that no Go
// file of the package holds it whole, the reason it is built at run time.
func TestEICARNotInSource(t *testing.T) {
	eicar := clamdtest.EICAR()
	if len(eicar) != 68 {
		t.Fatalf("EICAR is %d bytes, want 68", len(eicar))
	}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(src, eicar) {
			t.Errorf("%s holds the EICAR string whole", f)
		}
	}
}
