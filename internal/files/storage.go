package files

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"gocloud.dev/blob"
	// The two stores files.storage names: a folder (one replica, or a
	// volume every replica shares) and any S3-compatible store.
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob"
)

// OpenBucket opens the blob store of files.storage (a gocloud.dev/blob
// URL). A file:// folder is created when missing, so that a fresh
// installation (systemd's StateDirectory, bothy dev's data folder) needs
// no step of its own.
func OpenBucket(ctx context.Context, storage string) (*blob.Bucket, error) {
	u, err := url.Parse(storage)
	if err != nil {
		return nil, fmt.Errorf("config key files.storage: %q is not a URL", storage)
	}
	switch u.Scheme {
	case "file":
		if err := os.MkdirAll(u.Path, 0o750); err != nil {
			return nil, fmt.Errorf("config key files.storage: %w", err)
		}
	case "s3":
	default:
		return nil, fmt.Errorf("config key files.storage: %q is neither file:// nor s3://", storage)
	}
	b, err := blob.OpenBucket(ctx, storage)
	if err != nil {
		return nil, fmt.Errorf("config key files.storage: %w", err)
	}
	return b, nil
}
