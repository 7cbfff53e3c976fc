package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/files/clamd"
	"bothy.example.com/bothy/internal/files/extract"
)

// TextStatus is where the extraction of a file's text stands, as stored
// (the GraphQL enum TextStatus has the same values in upper case).
type TextStatus string

// The text states. Every file starts Pending; a file its scan withholds
// (infected, scan failed, or not scanned while files.require_scan is on)
// is never extracted and ends Failed.
const (
	TextPending     TextStatus = "pending"
	TextReady       TextStatus = "ready"
	TextUnsupported TextStatus = "unsupported"
	TextTooLarge    TextStatus = "too_large"
	TextFailed      TextStatus = "failed"
)

// Scanner scans a file's bytes (the clamd client of files.clamd_addr).
type Scanner interface {
	Scan(ctx context.Context, r io.Reader) (clamd.Verdict, error)
}

// NewScanner returns the scanner of files.clamd_addr, nil for an empty
// address (no scanner). clamd's own stream limit is files.max_bytes at
// most, so that a file the server accepts is never cut short by the
// client.
func NewScanner(addr string, timeout time.Duration, maxBytes int64) Scanner {
	if addr == "" {
		return nil
	}
	return &clamd.Client{Addr: addr, Timeout: timeout, MaxSize: maxBytes}
}

// metrics are the files module's instruments.
type metrics struct {
	scans       *prometheus.CounterVec
	scanSeconds prometheus.Histogram
}

// scanVerdicts are the label values of bothy_file_scans_total.
var scanVerdicts = []ScanStatus{ScanClean, ScanInfected, ScanFailed}

// Instrument registers bothy_file_scans_total{verdict} (every verdict at
// zero from the start) and bothy_file_scan_duration_seconds in reg.
func (s *Service) Instrument(reg prometheus.Registerer) {
	m := &metrics{
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_file_scans_total",
			Help: "Malware scans of uploaded files by verdict (clean, infected, failed)."}, []string{"verdict"}),
		scanSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bothy_file_scan_duration_seconds",
			Help: "Time one scan of an uploaded file took, the clamd round trip included.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
	}
	for _, v := range scanVerdicts {
		m.scans.WithLabelValues(string(v)).Add(0)
	}
	reg.MustRegister(m.scans, m.scanSeconds)
	s.metrics = m
}

// process takes a stored file as far as it goes: a pending scan to its
// verdict, then a pending extraction to its text status (or to Failed
// when the scan withholds the file: its text is never extracted). Each
// step is stored as soon as it is known. An error leaves the file
// pending; the sweep takes it up again (retryPending).
func (s *Service) process(ctx context.Context, f *File) error {
	if f.ScanStatus == ScanPending && s.d.Scanner == nil {
		// The scanner was configured away since the upload.
		if err := s.st.setScan(ctx, f.ID, ScanNotScanned); err != nil {
			return err
		}
		f.ScanStatus = ScanNotScanned
	}
	if f.ScanStatus == ScanPending {
		if err := s.scan(ctx, f); err != nil {
			return err
		}
	}
	if f.TextStatus != TextPending {
		return nil
	}
	if !f.Servable(s.d.Limits.RequireScan) {
		f.TextStatus = TextFailed
		return s.st.setText(ctx, f.ID, TextFailed, nil, false)
	}
	bucket, err := s.store(ctx)
	if err != nil {
		return err
	}
	r, err := bucket.NewReader(ctx, f.storageKey, nil)
	if err != nil {
		return fmt.Errorf("files: open for extraction: %w", err)
	}
	defer r.Close()
	res, err := extract.Text(ctx, f.MIMEType, r, f.Size, extract.Options{MaxBytes: s.d.Limits.TextMaxBytes})
	if err != nil {
		return fmt.Errorf("files: extraction: %w", err)
	}
	f.TextStatus, f.textTruncated = textStatusOf(res.Status), res.Truncated
	var text *string
	if f.TextStatus == TextReady {
		text = &res.Text
	}
	return s.st.setText(ctx, f.ID, f.TextStatus, text, res.Truncated)
}

// textStatusOf maps extract's statuses onto the stored ones.
func textStatusOf(status string) TextStatus {
	switch status {
	case extract.StatusReady:
		return TextReady
	case extract.StatusUnsupported:
		return TextUnsupported
	case extract.StatusTooLarge:
		return TextTooLarge
	default:
		return TextFailed
	}
}

// scan streams f's bytes to the scanner and stores the verdict: clean,
// infected, or failed when the scanner gave none (down, too slow, the
// stream over its limit). Only a failure to read the blob or to store the
// verdict is an error, which leaves the file pending.
func (s *Service) scan(ctx context.Context, f *File) error {
	bucket, err := s.store(ctx)
	if err != nil {
		return err
	}
	r, err := bucket.NewReader(ctx, f.storageKey, nil)
	if err != nil {
		return fmt.Errorf("files: open for scanning: %w", err)
	}
	defer r.Close()
	start := time.Now()
	verdict, err := s.d.Scanner.Scan(ctx, r)
	took := time.Since(start)
	status := ScanFailed
	switch {
	case err == nil && verdict.Status == clamd.Clean:
		status = ScanClean
	case err == nil && verdict.Status == clamd.Infected:
		status = ScanInfected
		s.d.Log.Warn("files: an upload is infected; it is withheld", "file_id", f.ID, "signature", verdict.Signature)
	case errors.Is(err, context.Canceled):
		return err
	default:
		s.d.Log.Warn("files: an upload could not be scanned; it is withheld", "file_id", f.ID, "error", err.Error())
	}
	if err := s.st.setScan(ctx, f.ID, status); err != nil {
		return err
	}
	f.ScanStatus = status
	if s.metrics != nil {
		s.metrics.scans.WithLabelValues(string(status)).Inc()
		s.metrics.scanSeconds.Observe(took.Seconds())
	}
	return nil
}

// pendingGrace is how old a pending file must be before the sweep takes
// it up: longer than any upload's request, which processes its own file,
// so that the sweep only finishes what a crash or a failure left.
const pendingGrace = 15 * time.Minute

// retryPending processes the files left pending before now minus
// pendingGrace, and returns how many it finished.
func (s *Service) retryPending(ctx context.Context, now time.Time) (int, error) {
	list, err := s.st.pending(ctx, now.Add(-pendingGrace), sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("files sweep: pending: %w", err)
	}
	n := 0
	for i := range list {
		if err := s.process(ctx, &list[i]); err != nil {
			s.d.Log.Warn("files: a pending file stays pending until the next sweep", "file_id", list[i].ID, "error", err.Error())
			continue
		}
		n++
	}
	return n, nil
}
