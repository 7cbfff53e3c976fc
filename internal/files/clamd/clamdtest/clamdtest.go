// Package clamdtest runs a fake clamd for tests: a real TCP listener on
// 127.0.0.1 that speaks the part of the clamd protocol that package clamd
// uses (PING, VERSION and INSTREAM, with the z and n command prefixes) and
// flags the EICAR test string. It can be told to fail, hang, drop the
// connection or answer garbage, so a server's tests can reach every path of
// its scanning without a ClamAV installation.
package clamdtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// Signature is the name the fake reports for the EICAR string, the one a
// real clamd reports for it.
const Signature = "Win.Test.EICAR_HDB-1"

// DefaultStreamMaxLength is the longest stream the fake accepts unless told
// otherwise, clamd's own default StreamMaxLength (25 MiB).
const DefaultStreamMaxLength = 25 << 20

// eicarParts are the pieces of the EICAR anti-virus test string. It is kept
// in pieces and joined at run time, not in a constant that the compiler
// would fold, so that neither this source file nor a test binary contains it
// and no scanner on a developer's machine flags the repository.
var eicarParts = []string{
	`X5O!P%@AP[4\PZX54(P^)7CC)7}$`,
	`EICAR-STANDARD-ANTIVIRUS-`,
	`TEST-FILE!$H+H*`,
}

// EICAR returns the EICAR anti-virus test string, which every scanner
// (this fake included) reports as infected.
func EICAR() []byte { return []byte(strings.Join(eicarParts, "")) }

// Mode says how the fake answers.
type Mode int

const (
	// Normal answers as clamd does: PONG, a version, "stream: OK" or
	// "stream: Win.Test.EICAR_HDB-1 FOUND".
	Normal Mode = iota
	// Fail answers every scan with clamd's report of an internal failure
	// ("... ERROR"); PING still answers PONG, as a daemon that is up but
	// cannot scan does.
	Fail
	// Hang accepts connections and never reads or answers until Close.
	Hang
	// Garbage answers every command with bytes that are no clamd reply.
	Garbage
	// Drop closes every connection as soon as the command is read, without
	// an answer.
	Drop
)

// Server is a running fake clamd. Its methods may be called from several
// goroutines.
type Server struct {
	ln     net.Listener
	closed chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	mode      Mode
	streamMax int64
	scans     int
	infected  int
	conns     map[net.Conn]struct{}
}

// NewServer starts a fake clamd on 127.0.0.1 at a free port, in Normal mode.
// It panics if it cannot listen, like httptest.NewServer, since a test can do
// nothing else then. Close it when done.
func NewServer() *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("clamdtest: listening: %v", err))
	}
	s := &Server{
		ln:        ln,
		closed:    make(chan struct{}),
		streamMax: DefaultStreamMaxLength,
		conns:     map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.serve()
	return s
}

// Addr is the fake's address in the form of the setting files.clamd_addr:
// "tcp://127.0.0.1:PORT".
func (s *Server) Addr() string { return "tcp://" + s.ln.Addr().String() }

// SetMode changes how the fake answers the connections it accepts from now on.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// SetStreamMaxLength sets the longest stream the fake accepts (clamd's
// StreamMaxLength); a longer one is answered "INSTREAM size limit exceeded.
// ERROR" and the connection closed, as clamd does.
func (s *Server) SetStreamMaxLength(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamMax = n
}

// Scans returns how many streams the fake has scanned to a verdict, and how
// many of them it found infected, so a test can tell that a file was
// scanned at all.
func (s *Server) Scans() (total, infected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scans, s.infected
}

// Close stops the listener, ends every open connection (a hanging one
// included) and waits for the fake's goroutines to return.
func (s *Server) Close() {
	select {
	case <-s.closed:
		return
	default:
	}
	close(s.closed)
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		s.conns[c] = struct{}{}
		mode, limit := s.mode, s.streamMax
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			s.handle(c, mode, limit)
		}()
	}
}

// handle answers one command on c.
func (s *Server) handle(c net.Conn, mode Mode, limit int64) {
	if mode == Hang {
		<-s.closed
		return
	}
	br := bufio.NewReader(c)
	cmd, term, err := readCommand(br)
	if err != nil {
		return
	}
	reply := func(msg string) { _, _ = io.WriteString(c, msg+string(term)) }
	// The stream is read whatever the mode, so that the client's writes
	// succeed and what it meets is the answer under test.
	var data []byte
	if cmd == "INSTREAM" {
		data, err = readStream(br, limit)
		if errors.Is(err, errTooLong) {
			reply("INSTREAM size limit exceeded. ERROR")
			return
		}
		if err != nil {
			return
		}
	}
	switch mode {
	case Drop:
		return
	case Garbage:
		_, _ = c.Write([]byte("\xff\xfe HELO \x01\x02\x00"))
		return
	default:
		// Normal and Fail answer the command below (Fail differs only
		// for a scan); Hang never read it.
	}
	switch cmd {
	case "PING":
		reply("PONG")
	case "VERSION":
		reply("ClamAV 1.4.0/27000/Fake clamdtest")
	case "INSTREAM":
		if mode == Fail {
			reply("stream: Can't allocate memory ERROR")
			return
		}
		reply(s.scan(data))
	default:
		reply("UNKNOWN COMMAND")
	}
}

// scan counts a scan of the stream data and returns clamd's verdict on it:
// infected if it holds the EICAR string, clean otherwise.
func (s *Server) scan(data []byte) string {
	found := bytes.Contains(data, EICAR())
	s.mu.Lock()
	s.scans++
	if found {
		s.infected++
	}
	s.mu.Unlock()
	if found {
		return "stream: " + Signature + " FOUND"
	}
	return "stream: OK"
}

var errTooLong = errors.New("stream too long")

// readCommand reads "zCMD\0" or "nCMD\n" and returns the command and the
// terminator its reply takes.
func readCommand(br *bufio.Reader) (cmd string, term byte, err error) {
	prefix, err := br.ReadByte()
	if err != nil {
		return "", 0, err
	}
	switch prefix {
	case 'z':
		term = 0
	case 'n':
		term = '\n'
	default:
		return "", 0, fmt.Errorf("clamdtest: command prefix %q", prefix)
	}
	var b []byte
	for len(b) < 64 {
		ch, err := br.ReadByte()
		if err != nil {
			return "", 0, err
		}
		if ch == term {
			return string(b), term, nil
		}
		b = append(b, ch)
	}
	return "", 0, errors.New("clamdtest: command too long")
}

// readStream reads INSTREAM chunks (a 4-byte big-endian length, then the
// data) up to the chunk of length zero.
func readStream(br *bufio.Reader, limit int64) ([]byte, error) {
	var data []byte
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, err
		}
		n := int64(binary.BigEndian.Uint32(hdr[:]))
		if n == 0 {
			return data, nil
		}
		if int64(len(data))+n > limit {
			return nil, errTooLong
		}
		start := len(data)
		data = append(data, make([]byte, n)...)
		if _, err := io.ReadFull(br, data[start:]); err != nil {
			return nil, err
		}
	}
}
