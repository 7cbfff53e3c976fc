// Package clamd is a small client of ClamAV's clamd protocol: it streams a
// file to the daemon with the INSTREAM command and reads the verdict, and it
// pings the daemon. It was written for Bothy from the protocol's public
// description (the clamd manual page) and does nothing else of the protocol:
// no sessions, no scanning of paths on the daemon's disk, which would need a
// file system shared with the daemon.
//
// Every call opens its own connection and closes it before it returns, so a
// Client holds no state and may be used by several goroutines at once.
package clamd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// Defaults of the Client's zero fields.
const (
	// DefaultTimeout bounds each step of a call (dial, one chunk's write,
	// the wait for the reply) when Client.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultChunkSize is the size of the INSTREAM chunks when
	// Client.ChunkSize is zero.
	DefaultChunkSize = 64 << 10
	// MaxChunkSize is the largest chunk Scan sends, whatever
	// Client.ChunkSize says: a chunk is held in memory whole, and clamd
	// gains nothing from larger ones.
	MaxChunkSize = 1 << 20
	// maxReply bounds what is read of a reply: clamd's replies are one short
	// line, so anything longer is not clamd and must not fill memory.
	maxReply = 4 << 10
)

// Status is the outcome of a scan that clamd answered.
type Status int

const (
	// Clean means clamd found nothing ("stream: OK").
	Clean Status = iota + 1
	// Infected means clamd matched a signature ("stream: <name> FOUND").
	Infected
)

// String names the status as the scan_status does.
func (s Status) String() string {
	switch s {
	case Clean:
		return "clean"
	case Infected:
		return "infected"
	default:
		return fmt.Sprintf("Status(%d)", int(s))
	}
}

// Verdict is clamd's answer to a scan.
type Verdict struct {
	// Status is Clean or Infected.
	Status Status
	// Signature is the name of the matched signature when Status is
	// Infected (for the EICAR test file, "Eicar-Test-Signature" or similar),
	// empty otherwise.
	Signature string
}

// Errors a call can return, to be told apart with errors.Is. Failures of the
// network keep their own error (for example a refused connection), wrapped.
var (
	// ErrSizeLimit means the stream was longer than the daemon accepts
	// (clamd answered "INSTREAM size limit exceeded", its StreamMaxLength)
	// or than Client.MaxSize: the file was not scanned.
	ErrSizeLimit = errors.New("clamd: stream size limit exceeded")
	// ErrTimeout means a step of the call took longer than Client.Timeout.
	// A call stopped by its context returns the context's error instead.
	ErrTimeout = errors.New("clamd: timed out")
	// ErrBadReply means the daemon answered something that is not a clamd
	// reply to the command sent, so the address is probably not clamd.
	ErrBadReply = errors.New("clamd: unexpected reply")
	// ErrBadAddress means Client.Addr is not a clamd address (a scheme
	// other than tcp or unix, or no host or path): no call can succeed.
	ErrBadAddress = errors.New("clamd: bad address")
)

// ReplyError is clamd's own report of a failure ("... ERROR"), for example
// when the daemon cannot allocate memory or read its database. The file was
// not scanned.
type ReplyError struct {
	// Reply is the daemon's reply without its terminator.
	Reply string
}

// Error returns the daemon's reply.
func (e *ReplyError) Error() string { return "clamd: " + e.Reply }

// Client talks to one clamd. Its zero fields take the defaults above; Addr is
// required.
type Client struct {
	// Addr is the daemon's address: "tcp://host:3310" or "unix:///path/to/clamd.ctl".
	// A bare "host:port" is taken as TCP.
	Addr string
	// Timeout bounds each step of a call: the dial, the write of each chunk
	// and the wait for the reply (which includes clamd's scanning time). The
	// context's deadline, if earlier, bounds the call as a whole. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// ChunkSize is the size of the INSTREAM chunks. Zero means
	// DefaultChunkSize; more than MaxChunkSize means MaxChunkSize.
	ChunkSize int
	// MaxSize, when positive, is the longest stream Scan sends: a longer one
	// ends the call with ErrSizeLimit before the rest is read, without
	// waiting for the daemon to refuse it. Set it to clamd's StreamMaxLength
	// (25 MiB by default) or lower.
	MaxSize int64
}

// Ping asks the daemon whether it is alive (zPING, answered PONG).
func (c *Client) Ping(ctx context.Context) error {
	conn, done, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := c.write(ctx, conn, []byte("zPING\x00")); err != nil {
		return err
	}
	reply, err := c.readReply(ctx, conn)
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("%w to PING: %q", ErrBadReply, reply)
	}
	return nil
}

// Scan streams r to the daemon with INSTREAM and returns its verdict. An error
// means there is no verdict: the file must be treated as not scanned. Scan
// reads r until io.EOF; a read of r that blocks is not interrupted by the
// context (the context is checked between chunks), so r should be a local
// file or buffer rather than a client's upload in flight.
func (c *Client) Scan(ctx context.Context, r io.Reader) (Verdict, error) {
	conn, done, err := c.open(ctx)
	if err != nil {
		return Verdict{}, err
	}
	defer done()

	// One buffer holds a chunk's length and its data, so a chunk is one
	// write and one packet rather than two.
	buf := make([]byte, 4+c.chunkSize())
	if err := c.write(ctx, conn, []byte("zINSTREAM\x00")); err != nil {
		return Verdict{}, err
	}
	var sent int64
	for {
		if err := ctx.Err(); err != nil {
			return Verdict{}, fmt.Errorf("clamd: %w", err)
		}
		n, rerr := io.ReadFull(r, buf[4:])
		if n > 0 {
			sent += int64(n)
			if c.MaxSize > 0 && sent > c.MaxSize {
				return Verdict{}, fmt.Errorf("%w: more than %d bytes", ErrSizeLimit, c.MaxSize)
			}
			binary.BigEndian.PutUint32(buf[:4], uint32(n))
			if err := c.write(ctx, conn, buf[:4+n]); err != nil {
				return c.afterFailedWrite(ctx, conn, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return Verdict{}, fmt.Errorf("clamd: reading the stream: %w", rerr)
		}
	}
	// A chunk of length zero ends the stream.
	if err := c.write(ctx, conn, []byte{0, 0, 0, 0}); err != nil {
		return c.afterFailedWrite(ctx, conn, err)
	}
	reply, err := c.readReply(ctx, conn)
	if err != nil {
		return Verdict{}, err
	}
	return parseScanReply(reply)
}

// chunkSize is the size of Scan's chunks: ChunkSize, DefaultChunkSize when
// that is not positive, and never more than MaxChunkSize.
func (c *Client) chunkSize() int {
	size := c.ChunkSize
	if size <= 0 {
		size = DefaultChunkSize
	}
	return min(size, MaxChunkSize)
}

// afterFailedWrite is Scan's result once a write of the stream failed with
// werr. clamd closes the connection as soon as the stream passes its
// StreamMaxLength, after writing why: the reply, when there is one,
// explains the failed write better than the write's own error.
func (c *Client) afterFailedWrite(ctx context.Context, conn net.Conn, werr error) (Verdict, error) {
	if reply, err := c.readReply(ctx, conn); err == nil {
		return parseScanReply(reply)
	}
	return Verdict{}, werr
}

// parseScanReply reads the reply to INSTREAM: "stream: OK",
// "stream: <signature> FOUND" or "<reason> ERROR".
func parseScanReply(reply string) (Verdict, error) {
	switch {
	case reply == "stream: OK":
		return Verdict{Status: Clean}, nil
	case strings.HasPrefix(reply, "stream: ") && strings.HasSuffix(reply, " FOUND"):
		sig := strings.TrimSuffix(strings.TrimPrefix(reply, "stream: "), " FOUND")
		if sig == "" {
			return Verdict{}, fmt.Errorf("%w to INSTREAM: %q", ErrBadReply, reply)
		}
		return Verdict{Status: Infected, Signature: sig}, nil
	case strings.HasSuffix(reply, "ERROR"):
		if strings.Contains(reply, "size limit exceeded") {
			return Verdict{}, fmt.Errorf("%w (%s)", ErrSizeLimit, reply)
		}
		return Verdict{}, &ReplyError{Reply: reply}
	default:
		return Verdict{}, fmt.Errorf("%w to INSTREAM: %q", ErrBadReply, reply)
	}
}

// open dials the daemon within Timeout and the context, and arranges for the
// context's end to interrupt any read or write on the connection. done
// closes the connection and undoes the arrangement; it must be called.
func (c *Client) open(ctx context.Context) (conn net.Conn, done func(), err error) {
	network, address, err := splitAddr(c.Addr)
	if err != nil {
		return nil, nil, err
	}
	dctx, cancel := context.WithTimeoutCause(ctx, c.timeout(), ErrTimeout)
	defer cancel()
	var d net.Dialer
	conn, err = d.DialContext(dctx, network, address)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, nil, fmt.Errorf("clamd: dialing %s: %w", c.Addr, cerr)
		}
		if errors.Is(context.Cause(dctx), ErrTimeout) {
			return nil, nil, fmt.Errorf("%w: dialing %s", ErrTimeout, c.Addr)
		}
		return nil, nil, fmt.Errorf("clamd: dialing %s: %w", c.Addr, err)
	}
	// A deadline in the past wakes every blocked read and write at once;
	// context.AfterFunc runs it without a goroutine of ours waiting on the
	// context, and stop removes it, so nothing outlives the call.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return conn, func() { stop(); _ = conn.Close() }, nil
}

// arm sets the connection's deadline for the next step: Timeout from now, or
// the context's deadline if earlier. It reports the context's error when the
// context ended, because the context's AfterFunc may already have set its
// past deadline, which this one would otherwise overwrite.
func (c *Client) arm(ctx context.Context, conn net.Conn) error {
	dl := time.Now().Add(c.timeout())
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	if err := conn.SetDeadline(dl); err != nil {
		return fmt.Errorf("clamd: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("clamd: %w", err)
	}
	return nil
}

// write sends p as one step.
func (c *Client) write(ctx context.Context, conn net.Conn, p []byte) error {
	if err := c.arm(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Write(p); err != nil {
		return c.ioError(ctx, "writing", err)
	}
	return nil
}

// readReply reads one reply as one step: up to its NUL terminator (the z
// commands' convention), a newline or the end of the connection.
func (c *Client) readReply(ctx context.Context, conn net.Conn) (string, error) {
	if err := c.arm(ctx, conn); err != nil {
		return "", err
	}
	var got []byte
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if i := bytes.IndexAny(got, "\x00\n"); i >= 0 {
			got = got[:i]
			break
		}
		if len(got) > maxReply {
			return "", fmt.Errorf("%w: longer than %d bytes", ErrBadReply, maxReply)
		}
		if errors.Is(err, io.EOF) {
			if len(got) == 0 {
				return "", fmt.Errorf("%w: connection closed without a reply", ErrBadReply)
			}
			break
		}
		if err != nil {
			return "", c.ioError(ctx, "reading the reply", err)
		}
	}
	return strings.TrimSpace(string(got)), nil
}

// ioError names the cause of a failed read or write: the context's end, the
// Timeout, or the network's own error.
func (c *Client) ioError(ctx context.Context, op string, err error) error {
	if cerr := ctxErr(ctx); cerr != nil {
		return fmt.Errorf("clamd: %s: %w", op, cerr)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s", ErrTimeout, op)
	}
	return fmt.Errorf("clamd: %s: %w", op, err)
}

// ctxErr is the context's error, or context.DeadlineExceeded once its
// deadline has passed: the connection's deadline, set to the same instant,
// can fire before the context's own timer marks it done.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// splitAddr turns Addr into the network and address of net.Dial.
func splitAddr(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, "tcp://"):
		network, address = "tcp", strings.TrimPrefix(addr, "tcp://")
	case strings.HasPrefix(addr, "unix://"):
		network, address = "unix", strings.TrimPrefix(addr, "unix://")
	case strings.Contains(addr, "://"):
		return "", "", fmt.Errorf("%w %q: the scheme must be tcp or unix", ErrBadAddress, addr)
	default:
		network, address = "tcp", addr
	}
	if address == "" {
		return "", "", fmt.Errorf("%w %q: it names no host or path", ErrBadAddress, addr)
	}
	return network, address, nil
}
