package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/files/clamd/clamdtest"
	"bothy.example.com/bothy/internal/platform/config"
)

// readText reads a file's text on REST as who.
func readText(env *apitest.Env, token, file, query string) *apitest.Response {
	return env.REST(http.MethodGet, "/api/v1/files/"+file+"/text"+query, token, nil)
}

// TestFilesText: the text of uploaded files on both faces, the trust it
// lowers, and files withheld without a scanner.
func TestFilesText(t *testing.T) {
	t.Parallel()
	t.Run("BothFaces", testFilesTextBothFaces)
	t.Run("LowersTrust", testFilesTextLowersTrust)
	t.Run("RequireScan", testFilesTextRequireScan)
}

// testFilesTextBothFaces: with the fake clamd, an upload is scanned clean
// and its text extracted (READY) in the upload; GET /api/v1/files/{id}/text
// and GraphQL's File.text and fileText answer it, cut at max_bytes; the
// EICAR file is infected, never extracted, and its bytes and text answer
// the 404 of a missing file, as a hidden file's text does.
func testFilesTextBothFaces(t *testing.T) {
	t.Parallel()
	clam := clamdtest.NewServer()
	t.Cleanup(clam.Close)
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesClamdAddr: clam.Addr()}})
	alex := env.World.Token("alex")
	missing := "01a22d00-0000-7000-8000-000000000000"

	up := wantAnswer(t, "upload", upload(t, env, "alex", "notes.md", []byte("# Notes\nThe printer on floor 2 needs toner.\n")), http.StatusCreated,
		map[string]any{"scan_status": "clean", "text_status": "ready"})
	file := up["id"].(string)
	wantAnswer(t, "text", readText(env, alex, file, ""), http.StatusOK,
		map[string]any{"text": "# Notes\nThe printer on floor 2 needs toner.\n", "truncated": false, "text_status": "ready", "file_id": file})
	wantAnswer(t, "text cut", readText(env, alex, file, "?max_bytes=7"), http.StatusOK, map[string]any{"text": "# Notes", "truncated": true})
	wantGraphQLFileText(t, env, alex, file)

	// EICAR: infected, withheld, never extracted.
	up = wantAnswer(t, "EICAR upload", upload(t, env, "alex", "eicar.txt", clamdtest.EICAR()), http.StatusCreated,
		map[string]any{"scan_status": "infected", "text_status": "failed"})
	bad := up["id"].(string)
	missingText := readText(env, alex, missing, "")
	apitest.WantProblem(t, "missing text", missingText, http.StatusNotFound, "not_found", "")
	if r := readText(env, alex, bad, ""); !apitest.SameAnswer(t, r, missingText) {
		t.Fatalf("infected text: %d %s", r.Status, r.Body)
	}
	if r := download(t, env, "alex", bad); !apitest.SameAnswer(t, r, download(t, env, "alex", missing)) {
		t.Fatalf("infected bytes: %d %s", r.Status, r.Body)
	}
	if n := env.Count(`SELECT count(*) FROM stored_files WHERE id = $1 AND text_content IS NULL`, bad); n != 1 {
		t.Fatal("the infected file was extracted")
	}
	// Its message says so: the attachment shows the scan state.
	p := postWithFiles(env, "alex", env.Main("Support/Allgemein"), "eicar-1", "a file", bad)
	if p.Status != http.StatusCreated || !strings.Contains(string(p.Body), `"scan_status":"infected"`) || !strings.Contains(string(p.Body), `"text_status":"failed"`) {
		t.Fatalf("message with the infected file: %d %s", p.Status, p.Body)
	}

	// Hidden equals missing on /text.
	mkt := mustUpload(t, env, "sam", "plan.txt", []byte("campaign"))
	wantStatus(t, "attach in Marketing", postWithFiles(env, "sam", env.Main("Marketing/Kampagnen"), "mkt-t", "the plan", mkt), http.StatusCreated)
	if r := readText(env, alex, mkt, ""); !apitest.SameAnswer(t, r, missingText) {
		t.Fatalf("hidden text: %d %s", r.Status, r.Body)
	}
}

// wantGraphQLFileText checks GraphQL's File.text and fileText of file as
// alex (a token): READY, cut at maxBytes 7, and whole.
func wantGraphQLFileText(t *testing.T, env *apitest.Env, alex, file string) {
	t.Helper()
	var gf struct {
		File     *struct{ TextStatus, Text string }
		FileText *struct {
			Text      string
			Truncated bool
		}
	}
	if res := env.GraphQL(alex, `query($id: ID!) { file(id: $id) { textStatus text(maxBytes: 7) } fileText(id: $id) { text truncated } }`,
		map[string]any{"id": file}, &gf); len(res.Errors) > 0 || gf.File == nil || gf.File.TextStatus != "READY" || gf.File.Text != "# Notes" ||
		gf.FileText == nil || gf.FileText.Truncated || !strings.Contains(gf.FileText.Text, "toner") {
		t.Fatalf("GraphQL: %+v %+v", gf, res.Errors)
	}
}

// testFilesTextLowersTrust: a run token reads the text of its run's
// file and not another thread's; a file with text in the context is
// unverified data in play, so the trust summary's lowest and the answer's
// provenance are unverified though the person who triggered attached it,
// while a run without files keeps its trigger's trust.
func testFilesTextLowersTrust(t *testing.T) {
	t.Parallel()
	clam := clamdtest.NewServer()
	t.Cleanup(clam.Close)
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesClamdAddr: clam.Addr()}})
	file := mustUpload(t, env, "alex", "notes.md", []byte("# Notes\nThe printer on floor 2 needs toner.\n"))
	mkt := mustUpload(t, env, "sam", "plan.txt", []byte("campaign"))
	wantStatus(t, "attach in Marketing", postWithFiles(env, "sam", env.Main("Marketing/Kampagnen"), "mkt-t", "the plan", mkt), http.StatusCreated)
	// A run token reads the text of its run's file.
	esk := postWithFiles(env, "alex", env.Main("Support/Allgemein"), "text-1", "@lotse please read the notes", file)
	var msg map[string]any
	json.Unmarshal(esk.Body, &msg)
	run := runOf(t, env, msg["id"].(string))
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/start", env.World.Token("lotse"), map[string]any{"holder": "h1"}, http.StatusOK)
	tok := env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/tokens", env.World.Token("lotse"), map[string]any{"holder": "h1"}, http.StatusCreated)
	if r := readText(env, tok["token"].(string), file, ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "toner") {
		t.Fatalf("run token: %d %s", r.Status, r.Body)
	}
	if r := readText(env, tok["token"].(string), mkt, ""); r.Status != http.StatusNotFound {
		t.Fatalf("run token, another thread's file: %d %s", r.Status, r.Body)
	}

	lotse := env.World.Token("lotse")
	rc := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run+"/context", lotse, nil, http.StatusOK)
	if low := rc["trust_summary"].(map[string]any)["lowest"]; low != "unverified" || rc["trigger_message"].(map[string]any)["trust"] != "trigger" {
		t.Fatalf("trust summary with a file's text in play: %v", rc["trust_summary"])
	}
	thread := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run, lotse, nil, http.StatusOK)["thread_id"].(string)
	ans := env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/messages", tok["token"].(string),
		map[string]any{"client_msg_id": "ans-1", "content_md": "ordered toner", "run_id": run})
	if ans.Status != http.StatusCreated || !strings.Contains(string(ans.Body), `"provenance":"unverified"`) {
		t.Fatalf("answer after a file: %d %s", ans.Status, ans.Body)
	}
	// The control: a run without files keeps its trigger's trust.
	plain := env.MustPost("alex", env.Main("Support/Eskalation"), "plain-1", "@lotse no file here")
	rc = env.MustREST(t, http.MethodGet, "/api/v1/runs/"+runOf(t, env, plain["id"].(string))+"/context", lotse, nil, http.StatusOK)
	if low := rc["trust_summary"].(map[string]any)["lowest"]; low == "unverified" {
		t.Fatalf("trust summary without files: %v", rc["trust_summary"])
	}
}

// testFilesTextRequireScan: without a scanner and with files.require_scan
// on, a file is withheld: its text answers the 404 of a missing file and
// is never extracted.
func testFilesTextRequireScan(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	r := upload(t, env, "alex", "notes.txt", []byte("notes"))
	var up map[string]any
	json.Unmarshal(r.Body, &up)
	if up["scan_status"] != "not_scanned" || up["text_status"] != "failed" {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	alex := env.World.Token("alex")
	if got := readText(env, alex, up["id"].(string), ""); !apitest.SameAnswer(t, got, readText(env, alex, "01a22d00-0000-7000-8000-000000000000", "")) {
		t.Fatalf("withheld text: %d %s", got.Status, got.Body)
	}
}
