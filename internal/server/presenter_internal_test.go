package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/platform/problem"
)

// TestPresenterQuietForClientsThatLeft: an internal error caused by the
// cancellation of a request whose client went away is not logged as an
// error; one of a live request is.
func TestPresenterQuietForClientsThatLeft(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	present := presenter(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})), nil, nil)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	present(gone, problem.Internal("feed.start", fmt.Errorf("read: %w", context.Canceled)))
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("a client that left was logged as an error: %s", logs.String())
	}
	present(context.Background(), problem.Internal("feed.start", fmt.Errorf("read: %w", context.Canceled)))
	if !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("an internal error of a live request was not logged: %s", logs.String())
	}
}
