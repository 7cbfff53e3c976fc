package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The answer outbox (Config.Outbox): an answer is written to a file before
// it is sent and removed once the server has given its verdict, so that an
// answer whose process died while sending it is sent again, under the same
// key, when the adapter starts next (the adapter guide: the answer outbox).
// The server stores a message once per key and answers a repeat with the
// original (Idempotent-Replay), so a re-send never doubles an answer.

// OutboxEntry is one answer waiting in the outbox.
type OutboxEntry struct {
	// Key is the answer's clientMsgId (AnswerKey).
	Key string `json:"key"`
	// ThreadID is where it goes, RunID the run it answers ("" for none)
	// and Holder the process that held the run when it was written.
	ThreadID string `json:"thread_id"`
	RunID    string `json:"run_id,omitempty"`
	Holder   string `json:"holder,omitempty"`
	// Text is the answer.
	Text string `json:"text"`
	// InputTrust is what the answer declared it was derived from
	// (MessageCreate.InputTrust); an entry of an older version has none
	// and is sent declaring UNVERIFIED, since what its model read is
	// unknown.
	InputTrust Trust `json:"input_trust,omitempty"`
	// AttachmentFileIDs are the files the answer attaches, sent again
	// with it so that a re-send is the same request.
	AttachmentFileIDs []string `json:"attachment_file_ids,omitempty"`
	// Written is when it was put in the outbox.
	Written time.Time `json:"written"`
}

// declared is the inputTrust the entry is sent with: its own, or
// UNVERIFIED for an entry written before answers declared one.
func (e OutboxEntry) declared() Trust {
	if e.InputTrust == "" {
		return TrustUnverified
	}
	return e.InputTrust
}

// Outbox is a folder of answers not yet confirmed by the server, one file
// each, readable only by the adapter's user.
type Outbox struct {
	dir string
}

// OpenOutbox opens (and makes) the outbox folder dir.
//
// Errors: the folder cannot be made.
func OpenOutbox(dir string) (*Outbox, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: outbox: %w", err)
	}
	return &Outbox{dir: dir}, nil
}

// file is the path of the entry of key: a hash, since keys are the
// server's ids and need no escaping this way.
func (o *Outbox) file(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(o.dir, hex.EncodeToString(sum[:12])+".json")
}

// Put writes e durably (written to a temporary file, synced, renamed,
// and the folder synced) before the answer is sent.
//
// Errors: the file cannot be written.
func (o *Outbox) Put(e OutboxEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(o.dir, ".entry-*")
	if err != nil {
		return fmt.Errorf("agent: outbox: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("agent: outbox: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("agent: outbox: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("agent: outbox: %w", err)
	}
	if err := os.Rename(tmp.Name(), o.file(e.Key)); err != nil {
		return fmt.Errorf("agent: outbox: %w", err)
	}
	if d, err := os.Open(o.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Remove drops the entry of key; a missing one is no error.
//
// Errors: the file exists and cannot be removed.
func (o *Outbox) Remove(key string) error {
	if err := os.Remove(o.file(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("agent: outbox: %w", err)
	}
	return nil
}

// Pending returns the entries in the outbox, oldest first; unreadable
// files are skipped (and named in the error, which does not stop the
// others).
func (o *Outbox) Pending() ([]OutboxEntry, error) {
	names, err := os.ReadDir(o.dir)
	if err != nil {
		return nil, fmt.Errorf("agent: outbox: %w", err)
	}
	var out []OutboxEntry
	var bad []string
	for _, n := range names {
		if n.IsDir() || !strings.HasSuffix(n.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(o.dir, n.Name()))
		var e OutboxEntry
		if err == nil {
			err = json.Unmarshal(b, &e)
		}
		if err != nil || e.Key == "" || e.ThreadID == "" {
			bad = append(bad, n.Name())
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Written.Before(out[j].Written) })
	if len(bad) > 0 {
		return out, fmt.Errorf("agent: outbox: unreadable entries %s", strings.Join(bad, ", "))
	}
	return out, nil
}

// settled reports whether err is the server's verdict on an answer (it was
// stored, or refused for good), after which its outbox entry goes: not a
// failure to reach the server, nor this process stopping.
func settled(ctx context.Context, err error) bool {
	return err == nil || (ctx.Err() == nil && !IsTemporary(err) && ErrorCode(err) != "")
}

// replayOutbox sends every answer left in the outbox by a process that
// stopped before the server confirmed it: under its key, naming its run,
// as the holder that wrote it. An answer whose run has ended goes out
// without the run when the ending left the request standing (as afterEnd
// decides for a live process) and is dropped otherwise; one refused
// because the person lost trigger, or because another process holds the
// run now (which answers it), is dropped. Entries the server could not be
// reached for stay for the next start.
func (a *Adapter) replayOutbox(ctx context.Context) {
	entries, err := a.box.Pending()
	if err != nil {
		a.log.Warn("outbox: some entries are unreadable and stay", errAttrs(err)...)
	}
	for _, e := range entries {
		log := a.log.With("run_id", e.RunID, "thread_id", e.ThreadID, "client_msg_id", e.Key)
		in := MessageCreate{ClientMsgID: e.Key, ContentMD: e.Text, RunID: e.RunID, InputTrust: e.declared(), AttachmentFileIDs: e.AttachmentFileIDs}
		var res MessageResult
		err := a.retry(ctx, "CreateMessage", func(ctx context.Context) (err error) {
			res, err = a.cfg.Client.CreateMessage(ctx, e.ThreadID, e.Holder, in)
			return err
		})
		if err != nil && ErrorReason(err) == "run_not_active" && e.RunID != "" {
			err = a.replayEnded(ctx, log, e)
			if err == nil {
				a.dropEntry(log, e.Key)
				continue
			}
		}
		switch {
		case err == nil:
			log.Info("outbox: answer sent after a restart", "message_id", res.Message.ID, "replayed", res.Replayed)
			a.dropEntry(log, e.Key)
		case !settled(ctx, err):
			log.Warn("outbox: answer not sent; it stays for the next start", errAttrs(err)...)
		default:
			log.Info("outbox: answer dropped: the server refused it", errAttrs(err)...)
			a.dropEntry(log, e.Key)
		}
	}
}

// replayEnded sends an outbox answer whose run has ended: without the run
// when the ending left the request standing and no answer of the run
// covers it, else not at all (nil: nothing more to do).
func (a *Adapter) replayEnded(ctx context.Context, log *slog.Logger, e OutboxEntry) error {
	var r RunInfo
	if err := a.retry(ctx, "Run", func(ctx context.Context) (err error) {
		r, err = a.cfg.Client.Run(ctx, e.RunID)
		return err
	}); err != nil {
		return err
	}
	reason := ""
	if r.EndReason != nil {
		reason = *r.EndReason
	}
	if r.State.Active() || !requestStands(r.State, reason) {
		log.Info("outbox: answer dropped: its run ended and took the request away", "state", strings.ToLower(string(r.State)), "end_reason", reason)
		return nil
	}
	for _, ans := range r.Answers {
		if ans.ClientMsgID == e.Key {
			return nil
		}
	}
	res, err := a.cfg.Client.CreateMessage(ctx, e.ThreadID, "", MessageCreate{ClientMsgID: e.Key, ContentMD: e.Text, InputTrust: e.declared(), AttachmentFileIDs: e.AttachmentFileIDs})
	if err == nil {
		log.Info("outbox: answer sent without its ended run after a restart", "message_id", res.Message.ID)
	}
	return err
}

// dropEntry removes the outbox entry of key, logging a failure.
func (a *Adapter) dropEntry(log *slog.Logger, key string) {
	if err := a.box.Remove(key); err != nil {
		log.Error("outbox: entry not removed", errAttrs(err)...)
	}
}
