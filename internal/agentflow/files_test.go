package agentflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/sdk/agent"
)

// loseFirstAnswer forwards every request and loses the server's answer to
// the first createMessage, as a connection that broke after the server
// stored the message would; it records the attachmentFileIds of every
// createMessage it forwarded.
type loseFirstAnswer struct {
	mu    sync.Mutex
	lost  bool
	files [][]string
}

func (l *loseFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var req struct {
		OperationName string `json:"operationName"`
		Variables     struct {
			Input struct {
				AttachmentFileIDs []string `json:"attachmentFileIds"`
			} `json:"input"`
		} `json:"variables"`
	}
	create := json.Unmarshal(body, &req) == nil && req.OperationName == "CreateMessage"
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !create {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files = append(l.files, req.Variables.Input.AttachmentFileIDs)
	if !l.lost {
		l.lost = true
		resp.Body.Close()
		return nil, errors.New("connection reset after the server stored the answer")
	}
	return resp, nil
}

// TestAttachFileRidesEveryRetry: a handler's Task.AttachFile uploads the
// file and the answer carries it; the answer whose reply was lost is sent
// again with the same file ids, the server answers the repeat with the
// stored message (one answer, one attachment), and Alex downloads the
// file's bytes. An agent without files_out gets ErrNoFilesOut and its
// answer still goes out, without a file.
func TestAttachFileRidesEveryRetry(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesRequireScan: "false"}})
	thread := env.Main("Support/Eskalation")
	capPath := "/api/v1/principals/" + env.World.ID("lotse") + "/capabilities"
	content := []byte("floor,state\n2,broken\n")

	// Without files_out: a clear error, nothing uploaded, the answer posted.
	env.MustPost("alex", thread, "f-1", "@lotse a report please")
	var refused error
	runOnce(t, env, nil, func(ctx context.Context, task *agent.Task) error {
		_, refused = task.AttachFile(ctx, "report.csv", content)
		return task.Answer(ctx, "No file, sorry.")
	})
	if !errors.Is(refused, agent.ErrNoFilesOut) {
		t.Fatalf("AttachFile without files_out: %v, want ErrNoFilesOut", refused)
	}
	if n := env.Count(`SELECT count(*) FROM stored_files WHERE uploader_principal_id = $1`, env.World.ID("lotse")); n != 0 {
		t.Fatalf("%d files uploaded without files_out", n)
	}

	if r := env.REST(http.MethodPut, capPath, env.World.Token("robin"), map[string]any{"files_out": true}); r.Status != http.StatusOK {
		t.Fatalf("grant files_out: %d %s", r.Status, r.Body)
	}
	env.MustPost("alex", thread, "f-2", "@lotse the report again please")
	lose := &loseFirstAnswer{}
	var id string
	runOnce(t, env, lose, func(ctx context.Context, task *agent.Task) error {
		var err error
		if id, err = task.AttachFile(ctx, "report.csv", content); err != nil {
			return err
		}
		return task.Answer(ctx, "The report is attached.")
	})
	lose.mu.Lock()
	sent := lose.files
	lose.mu.Unlock()
	if len(sent) != 2 || len(sent[0]) != 1 || sent[0][0] != id || len(sent[1]) != 1 || sent[1][0] != id {
		t.Fatalf("createMessage carried %v, want [%s] on the first try and on its repeat", sent, id)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND content_md = 'The report is attached.'`, thread); n != 1 {
		t.Fatalf("%d answers stored, want one", n)
	}
	if n := env.Count(`SELECT count(*) FROM stored_files f JOIN messages m ON m.id = f.message_id WHERE f.id = $1 AND m.content_md = 'The report is attached.'`, id); n != 1 {
		t.Fatalf("the file %s is not attached to the answer", id)
	}
	r := env.REST(http.MethodGet, "/api/v1/files/"+id, env.World.Token("alex"), nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, content) {
		t.Fatalf("Alex's download: %d %q", r.Status, r.Body)
	}
}

// runOnce answers the next run of Lotse with handle (Config.Once), its
// client's requests through transport (nil: the default).
func runOnce(t *testing.T, env *apitest.Env, transport http.RoundTripper, handle agent.Handler) {
	t.Helper()
	opts := agent.ClientOptions{}
	if transport != nil {
		opts.HTTPClient = &http.Client{Transport: transport}
	}
	client, err := agent.NewClient(env.URL, env.World.Token("lotse"), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := agent.Config{Client: client, Once: true, RetryBackoff: 10 * time.Millisecond}
	if err := agent.Run(ctx, cfg, handle); err != nil {
		t.Fatal(err)
	}
}
