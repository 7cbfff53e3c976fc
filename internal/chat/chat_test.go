package chat_test

import (
	"context"
	"errors"
	"testing"

	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCreateChannelIsOneTransaction: a channel and its main thread are
// stored together or not at all, alone or inside a caller's transaction.
func TestCreateChannelIsOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, db.Options{URL: pgtest.URL(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d := db.New(pool, 3)
	svc := chat.NewService(d, clock.Real{}, 50, 200)
	w := chat.NewWriter(svc)
	robin, err := identity.NewWriter(identity.NewService(pool, clock.Real{})).CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindUser,
		Handle: "robin", DisplayName: "Robin", Email: "robin@example.com", IsOwner: true})
	if err != nil {
		t.Fatal(err)
	}
	space, err := w.CreateSpace(ctx, "Support", "")
	if err != nil {
		t.Fatal(err)
	}
	errLater := errors.New("the caller's unit fails after the channel")
	tests := []struct {
		name       string
		kind       chat.ChannelKind
		createdBy  string
		outerFails bool
		wantErr    bool
		wantStored bool
		wantMain   bool
	}{
		{"text channel with its main thread", "text", robin.ID, false, false, true, true},
		{"forum channel has no main thread", "forum", robin.ID, false, false, true, false},
		// The main thread's creator does not exist: its insert fails after
		// the channel's, and the channel must not stay behind.
		{"failed main thread leaves no channel", "text", ids.New(), false, true, false, false},
		{"the caller's failure after it leaves no channel", "text", robin.ID, true, true, false, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := svc.ChannelsOfSpace(ctx, space.ID)
			if err != nil {
				t.Fatal(err)
			}
			name := "channel-" + string(rune('a'+i))
			made, err := createChannelIn(ctx, d, w, chat.NewChannel{SpaceID: space.ID, Name: name, Kind: tc.kind, CreatedBy: tc.createdBy}, tc.outerFails, errLater)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			after, err := svc.ChannelsOfSpace(ctx, space.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored := len(after) == len(before)+1; stored != tc.wantStored || (!stored && len(after) != len(before)) {
				t.Fatalf("%d channels before, %d after; want stored %v", len(before), len(after), tc.wantStored)
			}
			if !tc.wantStored {
				return
			}
			checkMainThread(t, svc, made.ID, tc.wantMain)
		})
	}
}

// checkMainThread checks that the stored channel has a main thread when
// wantMain (a text channel) and none otherwise, and that the main thread
// is of the channel and of kind main.
func checkMainThread(t *testing.T, svc *chat.Service, channelID string, wantMain bool) {
	t.Helper()
	ctx := context.Background()
	got, err := svc.GetChannel(ctx, channelID)
	if err != nil {
		t.Fatal(err)
	}
	if (got.MainThreadID != "") != wantMain {
		t.Fatalf("main thread %q, want one: %v", got.MainThreadID, wantMain)
	}
	if wantMain {
		th, err := svc.GetThread(ctx, got.MainThreadID)
		if err != nil || th.ChannelID != channelID || th.Kind != "main" {
			t.Fatalf("main thread %+v (%v)", th, err)
		}
	}
}

// createChannelIn creates the channel in through w: alone, or when
// outerFails inside a transaction of d whose unit fails with errLater
// after the channel is created.
func createChannelIn(ctx context.Context, d *db.DB, w *chat.Writer, in chat.NewChannel, outerFails bool, errLater error) (chat.Channel, error) {
	if !outerFails {
		return w.CreateChannel(ctx, in)
	}
	var made chat.Channel
	err := d.InTx(ctx, func(ctx context.Context) error {
		var err error
		if made, err = w.CreateChannel(ctx, in); err != nil {
			return err
		}
		return errLater
	})
	return made, err
}
