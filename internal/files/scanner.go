package files

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/files/clamd"
)

// StartPingLimit bounds the PING of CheckScanner (or files.clamd_timeout
// when shorter): a scanner that does not answer within it is reported and
// the start goes on, so a black-holed address delays the start by this
// much at most, well inside the startup probe's minute.
const StartPingLimit = 5 * time.Second

// pinger is a scanner that can say whether it is alive (clamd.Client).
type pinger interface {
	Ping(ctx context.Context) error
}

// CheckScanner asks the scanner of files.clamd_addr, once at a server's
// start, whether it answers, so that a wrong address shows at the start
// and not only as failed scans. An address that can never work (no clamd
// address, or something that answers but is not clamd) is an error and
// stops the start: no later attempt can succeed. A scanner that does not
// answer is logged as an error and the start goes on: clamd may be
// starting or restarting (it loads its database for a while before it
// listens) and come back, and meanwhile uploads answer scan_status failed
// (with files.require_scan, unreadable) rather than the whole chat going
// down. Without a scanner it does nothing.
func (s *Service) CheckScanner(ctx context.Context) error {
	p, ok := s.d.Scanner.(pinger)
	if !ok {
		return nil
	}
	addr := ""
	limit := StartPingLimit
	if c, ok := s.d.Scanner.(*clamd.Client); ok {
		addr = c.Addr
		if c.Timeout > 0 && c.Timeout < limit {
			limit = c.Timeout
		}
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := p.Ping(ctx)
	switch {
	case err == nil:
		s.d.Log.Info("files: clamd answers PING", "clamd_addr", addr)
		return nil
	case errors.Is(err, clamd.ErrBadAddress), errors.Is(err, clamd.ErrBadReply):
		return fmt.Errorf("files.clamd_addr %q: %w (is it clamd's address?)", addr, err)
	default:
		s.d.Log.Error("files: clamd does not answer PING; uploads are scanned failed until it does",
			"clamd_addr", addr, "err", err.Error())
		return nil
	}
}
