package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"

	"bothy.example.com/bothy/internal/authz"
)

// sweepBatch bounds the rows and blobs one sweep step looks at.
const sweepBatch = 500

// Sweep deletes what has outlived its time: files scheduled for deletion
// (a deleted message's, after files.deleted_ttl), unattached uploads
// older than files.orphan_ttl, and blobs that have no row (an upload that
// crashed between its bytes and its commit) once they are older than
// files.orphan_ttl, which no upload in progress is; every deleted file is
// audited (file.delete, by the system actor). It also finishes the scans
// and extractions a crash or a failure left pending. Blobs go before rows,
// so that a failure leaves a row whose sweep is retried, never bytes that
// nothing names. It returns how many files and orphan blobs it deleted.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	bucket, err := s.store(ctx)
	if err != nil {
		return 0, fmt.Errorf("files sweep: %w", err)
	}
	now := s.d.Clock.Now()
	due, err := s.st.due(ctx, now, now.Add(-s.d.Limits.OrphanTTL), sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("files sweep: %w", err)
	}
	n := 0
	for _, f := range due {
		if err := bucket.Delete(ctx, f.storageKey); err != nil && !isNotFound(err) {
			return n, fmt.Errorf("files sweep: delete blob: %w", err)
		}
		if err := s.st.remove(ctx, f.ID); err != nil {
			return n, fmt.Errorf("files sweep: %w", err)
		}
		n++
		if err := s.d.Authz.AuditSystem(ctx, authz.FileDelete, authz.KindFile, f.ID); err != nil {
			return n, fmt.Errorf("files sweep: audit: %w", err)
		}
	}
	if _, err := s.retryPending(ctx, now); err != nil {
		return n, err
	}
	orphans, err := s.sweepBlobs(ctx, bucket, now.Add(-s.d.Limits.OrphanTTL))
	return n + orphans, err
}

// sweepBlobs deletes blobs without a row last modified before cutoff.
func (s *Service) sweepBlobs(ctx context.Context, bucket *blob.Bucket, cutoff time.Time) (int, error) {
	it := bucket.List(nil)
	n := 0
	for {
		var keys []string
		for len(keys) < sweepBatch {
			obj, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return n, fmt.Errorf("files sweep: list blobs: %w", err)
			}
			if !obj.IsDir && obj.ModTime.Before(cutoff) {
				keys = append(keys, obj.Key)
			}
		}
		if len(keys) == 0 {
			return n, nil
		}
		known, err := s.st.keysExist(ctx, keys)
		if err != nil {
			return n, fmt.Errorf("files sweep: %w", err)
		}
		for _, k := range keys {
			if known[k] {
				continue
			}
			if err := bucket.Delete(ctx, k); err != nil && !isNotFound(err) {
				return n, fmt.Errorf("files sweep: delete orphan blob: %w", err)
			}
			n++
		}
	}
}
