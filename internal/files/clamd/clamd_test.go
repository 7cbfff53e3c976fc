package clamd_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/files/clamd"
	"bothy.example.com/bothy/internal/files/clamd/clamdtest"
)

// noLeak fails the test if goroutines started during it are still running
// shortly after it ends: every call must leave nothing behind.
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				n := runtime.Stack(buf, true)
				t.Errorf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// scanCase is one call of Scan against the fake clamd and what it must
// return.
type scanCase struct {
	name      string
	mode      clamdtest.Mode
	streamMax int64
	client    clamd.Client
	ctx       func(t *testing.T) context.Context
	body      io.Reader
	want      clamd.Verdict
	wantErr   error
	wantReply bool // the error is a *clamd.ReplyError
}

// scanNote is a file without a virus.
var scanNote = []byte("Minutes of the planning meeting: Alex, Sam and Robin agreed on the dates.\n")

func TestScan(t *testing.T) {
	// Each case's body is a reader that its run consumes: the tables are
	// built anew for every run of the test.
	tests := slices.Concat(scanVerdictCases(), scanSizeLimitCases(), scanDaemonFaultCases(), scanContextCases())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScanCase(t, tt) })
	}
}

// scanVerdictCases are the scans clamd answers with a verdict, whatever
// the chunks and reads the stream is cut into.
func scanVerdictCases() []scanCase {
	eicar := clamdtest.EICAR()
	// The EICAR string after 10 bytes, so that chunks of 16 bytes cut it in
	// three: the fake must see it across chunk boundaries.
	split := append([]byte("0123456789"), eicar...)
	return []scanCase{
		{name: "clean", body: bytes.NewReader(scanNote), want: clamd.Verdict{Status: clamd.Clean}},
		{name: "empty", body: bytes.NewReader(nil), want: clamd.Verdict{Status: clamd.Clean}},
		{name: "eicar", body: bytes.NewReader(eicar), want: clamd.Verdict{Status: clamd.Infected, Signature: clamdtest.Signature}},
		{
			name:   "eicar split across chunks",
			client: clamd.Client{ChunkSize: 16},
			body:   bytes.NewReader(split),
			want:   clamd.Verdict{Status: clamd.Infected, Signature: clamdtest.Signature},
		},
		{
			name:   "eicar through a reader that returns a byte at a time",
			client: clamd.Client{ChunkSize: 7},
			body:   &oneByteReader{r: bytes.NewReader(split)},
			want:   clamd.Verdict{Status: clamd.Infected, Signature: clamdtest.Signature},
		},
		{
			// A gigabyte's buffer would show in the test's memory; the
			// chunk is clamped to MaxChunkSize.
			name:   "chunk size above the maximum",
			client: clamd.Client{ChunkSize: 1 << 30},
			body:   bytes.NewReader(scanNote),
			want:   clamd.Verdict{Status: clamd.Clean},
		},
	}
}

// scanSizeLimitCases are the streams at or beyond the daemon's or the
// client's size limit.
func scanSizeLimitCases() []scanCase {
	return []scanCase{
		{
			name:      "daemon's size limit",
			streamMax: 1 << 10,
			body:      bytes.NewReader(bytes.Repeat([]byte("a"), 64<<10)),
			client:    clamd.Client{ChunkSize: 512},
			wantErr:   clamd.ErrSizeLimit,
		},
		{
			name:      "daemon's size limit with a stream far beyond it",
			streamMax: 1 << 10,
			body:      io.LimitReader(zeros{}, 8<<20),
			wantErr:   clamd.ErrSizeLimit,
		},
		{
			name:    "client's size limit",
			client:  clamd.Client{MaxSize: 100, ChunkSize: 64},
			body:    bytes.NewReader(bytes.Repeat([]byte("b"), 1000)),
			wantErr: clamd.ErrSizeLimit,
		},
		{
			name:   "client's size limit exactly reached",
			client: clamd.Client{MaxSize: int64(len(scanNote)), ChunkSize: 8},
			body:   bytes.NewReader(scanNote),
			want:   clamd.Verdict{Status: clamd.Clean},
		},
	}
}

// scanDaemonFaultCases are the daemons that fail, answer no clamd reply or
// never answer.
func scanDaemonFaultCases() []scanCase {
	return []scanCase{
		{name: "daemon failure", mode: clamdtest.Fail, body: bytes.NewReader(scanNote), wantReply: true},
		{name: "garbage reply", mode: clamdtest.Garbage, body: bytes.NewReader(scanNote), wantErr: clamd.ErrBadReply},
		{name: "dropped connection", mode: clamdtest.Drop, body: bytes.NewReader(scanNote), wantErr: clamd.ErrBadReply},
		{
			name:    "hanging daemon, reply",
			mode:    clamdtest.Hang,
			client:  clamd.Client{Timeout: 200 * time.Millisecond},
			body:    bytes.NewReader(scanNote),
			wantErr: clamd.ErrTimeout,
		},
		{
			// A stream larger than the socket buffers blocks in a write.
			name:    "hanging daemon, write",
			mode:    clamdtest.Hang,
			client:  clamd.Client{Timeout: 200 * time.Millisecond},
			body:    io.LimitReader(zeros{}, 64<<20),
			wantErr: clamd.ErrTimeout,
		},
	}
}

// scanContextCases are the calls whose context ends before, or while,
// the daemon answers.
func scanContextCases() []scanCase {
	return []scanCase{
		{
			name: "context deadline on a hanging daemon",
			mode: clamdtest.Hang,
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			body:    bytes.NewReader(scanNote),
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "context cancelled during the call",
			mode: clamdtest.Hang,
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(100*time.Millisecond, cancel)
				t.Cleanup(cancel)
				return ctx
			},
			body:    io.LimitReader(zeros{}, 64<<20),
			wantErr: context.Canceled,
		},
		{
			name: "context cancelled before the call",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
			body:    bytes.NewReader(scanNote),
			wantErr: context.Canceled,
		},
	}
}

// runScanCase scans tt.body with a fake clamd set up as tt says and checks
// the verdict or error, and that the call ended in time and left no
// goroutine behind.
func runScanCase(t *testing.T, tt scanCase) {
	noLeak(t)
	srv := clamdtest.NewServer()
	defer srv.Close()
	srv.SetMode(tt.mode)
	if tt.streamMax > 0 {
		srv.SetStreamMaxLength(tt.streamMax)
	}
	c := tt.client
	c.Addr = srv.Addr()
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	ctx := t.Context()
	if tt.ctx != nil {
		ctx = tt.ctx(t)
	}
	start := time.Now()
	got, err := c.Scan(ctx, tt.body)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Scan took %v", elapsed)
	}
	switch {
	case tt.wantReply:
		var re *clamd.ReplyError
		if !errors.As(err, &re) || !strings.HasSuffix(re.Reply, "ERROR") {
			t.Fatalf("Scan error = %v, want a *ReplyError", err)
		}
	case tt.wantErr != nil:
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("Scan error = %v, want %v", err, tt.wantErr)
		}
	default:
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
	}
	if got != tt.want {
		t.Errorf("Scan = %+v, want %+v", got, tt.want)
	}
}

func TestScanConnectionRefused(t *testing.T) {
	noLeak(t)
	// A port that was just free and is closed again refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + ln.Addr().String()
	ln.Close()
	c := clamd.Client{Addr: addr, Timeout: 2 * time.Second}
	_, err = c.Scan(t.Context(), strings.NewReader("hello"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Scan error = %v, want connection refused", err)
	}
	if err := c.Ping(t.Context()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Ping error = %v, want connection refused", err)
	}
}

func TestScanCountsVerdicts(t *testing.T) {
	srv := clamdtest.NewServer()
	defer srv.Close()
	c := clamd.Client{Addr: srv.Addr()}
	for _, body := range [][]byte{[]byte("sam@example.com"), clamdtest.EICAR()} {
		if _, err := c.Scan(t.Context(), bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	if total, infected := srv.Scans(); total != 2 || infected != 1 {
		t.Errorf("Scans() = %d, %d, want 2, 1", total, infected)
	}
}

func TestPing(t *testing.T) {
	tests := []struct {
		name    string
		mode    clamdtest.Mode
		wantErr error
	}{
		{name: "alive", mode: clamdtest.Normal},
		{name: "alive but failing scans", mode: clamdtest.Fail},
		{name: "garbage", mode: clamdtest.Garbage, wantErr: clamd.ErrBadReply},
		{name: "hang", mode: clamdtest.Hang, wantErr: clamd.ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeak(t)
			srv := clamdtest.NewServer()
			defer srv.Close()
			srv.SetMode(tt.mode)
			c := clamd.Client{Addr: srv.Addr(), Timeout: 200 * time.Millisecond}
			if err := c.Ping(t.Context()); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Ping error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestUnixSocket checks the unix:// form of the address against a relay to
// the fake's TCP port.
func TestUnixSocket(t *testing.T) {
	srv := clamdtest.NewServer()
	defer srv.Close()
	dir, err := os.MkdirTemp("", "clamd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "clamd.ctl")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		up, err := net.Dial("tcp", strings.TrimPrefix(srv.Addr(), "tcp://"))
		if err != nil {
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(up, conn) }()
		_, _ = io.Copy(conn, up)
	}()
	c := clamd.Client{Addr: "unix://" + path, Timeout: 5 * time.Second}
	v, err := c.Scan(t.Context(), bytes.NewReader(clamdtest.EICAR()))
	if err != nil || v.Status != clamd.Infected {
		t.Fatalf("Scan = %+v, %v", v, err)
	}
	ln.Close()
	<-done
}

func TestBadAddress(t *testing.T) {
	for _, addr := range []string{"http://clamd.example.com:3310", "tcp://", ""} {
		c := clamd.Client{Addr: addr}
		if err := c.Ping(t.Context()); !errors.Is(err, clamd.ErrBadAddress) {
			t.Errorf("Ping with address %q: %v, want ErrBadAddress", addr, err)
		}
	}
}

// oneByteReader returns at most one byte per Read, as a slow network reader may.
type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
