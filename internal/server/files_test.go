package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// pngBytes is the head of a PNG image: enough for the media type to be
// sniffed from the content.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"), bytes.Repeat([]byte{0}, 64)...)

// multipartBody returns a multipart/form-data body with one part of name
// part holding data as the file filename (sent with the client's claim
// text/plain), and its Content-Type.
func multipartBody(t testing.TB, part, filename string, data []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+part+`"; filename="`+filename+`"`)
	h.Set("Content-Type", "text/plain")
	pw, err := w.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(data)
	w.Close()
	return buf.Bytes(), w.FormDataContentType()
}

// upload sends data as a file of who on REST and returns the answer.
func upload(t testing.TB, env *apitest.Env, who, filename string, data []byte) *apitest.Response {
	t.Helper()
	body, ct := multipartBody(t, "file", filename, data)
	return env.RESTWith(http.MethodPost, "/api/v1/files", env.World.Token(who), body, http.Header{"Content-Type": {ct}})
}

// mustUpload uploads data as who's file and returns its id.
func mustUpload(t testing.TB, env *apitest.Env, who, filename string, data []byte) string {
	t.Helper()
	r := upload(t, env, who, filename, data)
	if r.Status != http.StatusCreated {
		t.Fatalf("upload by %s: %d %s", who, r.Status, r.Body)
	}
	var f map[string]any
	json.Unmarshal(r.Body, &f)
	return f["id"].(string)
}

// gqlUpload sends data as who's file through the GraphQL multipart request
// convention, with header GraphQL-Require-Preflight when preflight is set.
func gqlUpload(t testing.TB, env *apitest.Env, who string, data []byte, preflight bool) (int, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	w.WriteField("operations", `{"query":"mutation($f: Upload!) { uploadFile(file: $f) { id name mimeType size sha256 scanStatus createdAt } }","variables":{"f":null}}`)
	w.WriteField("map", `{"0":["variables.f"]}`)
	fw, _ := w.CreateFormFile("0", "notes.txt")
	fw.Write(data)
	w.Close()
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", &buf)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+env.World.Token(who))
	if preflight {
		req.Header.Set("GraphQL-Require-Preflight", "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// testFilesUpload: POST /api/v1/files stores a file with its media type
// sniffed from the bytes (never the client's claim), its name cleaned, its
// digest and size, and scan status not_scanned without a scanner; GraphQL's
// uploadFile does the same through the multipart request convention and
// refuses a multipart request without GraphQL-Require-Preflight.
func testFilesUpload(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	r := upload(t, env, "alex", `..\..\etc/re`+"\u202e"+`port.txt`, pngBytes)
	sum := sha256.Sum256(pngBytes)
	wantAnswer(t, "upload", r, http.StatusCreated, map[string]any{"mime_type": "image/png", "name": "report.txt", "size": float64(len(pngBytes)),
		"sha256": hex.EncodeToString(sum[:]), "scan_status": "not_scanned"})
	wantCount(t, env, 1, "rows", `SELECT count(*) FROM stored_files WHERE uploader_principal_id = '`+env.World.ID("alex")+`'`)

	status, body := gqlUpload(t, env, "sam", []byte("plain notes from Sam\n"), true)
	var res struct {
		Data struct {
			UploadFile map[string]any `json:"uploadFile"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	if err := json.Unmarshal(body, &res); err != nil || status != http.StatusOK || len(res.Errors) > 0 {
		t.Fatalf("GraphQL upload: %d %s", status, body)
	}
	if u := res.Data.UploadFile; u["name"] != "notes.txt" || !strings.HasPrefix(u["mimeType"].(string), "text/plain") || u["scanStatus"] != "NOT_SCANNED" {
		t.Fatalf("GraphQL upload: %v", u)
	}
	if status, body := gqlUpload(t, env, "sam", []byte("x"), false); status != http.StatusBadRequest || !strings.Contains(string(body), "preflight_required") {
		t.Fatalf("multipart without GraphQL-Require-Preflight: %d %s", status, body)
	}

	// Not multipart, or another part than file: refused, nothing stored.
	apitest.WantProblem(t, "JSON body", env.REST(http.MethodPost, "/api/v1/files", env.World.Token("alex"), map[string]any{"file": "x"}),
		http.StatusUnsupportedMediaType, "unsupported_media_type", "content_type")
	wrong, ct := multipartBody(t, "document", "a.txt", []byte("x"))
	apitest.WantProblem(t, "other part", env.RESTWith(http.MethodPost, "/api/v1/files", env.World.Token("alex"), wrong, http.Header{"Content-Type": {ct}}),
		http.StatusBadRequest, "validation_failed", "")
	wantCount(t, env, 2, "rows after refusals", `SELECT count(*) FROM stored_files`)
}

// testFilesLimits: a file over files.max_bytes is 413 payload_too_large
// file_too_large on both faces, one that takes the uploader over
// files.quota_bytes 409 conflict quota_exceeded; neither leaves a row.
func testFilesLimits(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesMaxBytes: "1000", config.FilesQuotaBytes: "1500"}})
	apitest.WantProblem(t, "too large", upload(t, env, "alex", "big.bin", bytes.Repeat([]byte("a"), 1001)),
		http.StatusRequestEntityTooLarge, "payload_too_large", "file_too_large")
	if status, body := gqlUpload(t, env, "alex", bytes.Repeat([]byte("a"), 1001), true); !strings.Contains(string(body), "file_too_large") {
		t.Fatalf("GraphQL too large: %d %s", status, body)
	}
	mustUpload(t, env, "alex", "one.txt", bytes.Repeat([]byte("a"), 1000))
	apitest.WantProblem(t, "over quota", upload(t, env, "alex", "two.txt", bytes.Repeat([]byte("b"), 600)),
		http.StatusConflict, "conflict", "quota_exceeded")
	// Sam's quota is Sam's own.
	mustUpload(t, env, "sam", "two.txt", bytes.Repeat([]byte("b"), 600))
	if n := env.Count(`SELECT count(*) FROM stored_files`); n != 2 {
		t.Fatalf("%d rows", n)
	}
}

// post creates a message of who in thread with the given files and returns
// the answer.
func postWithFiles(env *apitest.Env, who, thread, clientMsgID, content string, fileIDs ...string) *apitest.Response {
	return env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/messages", env.World.Token(who),
		map[string]any{"client_msg_id": clientMsgID, "content_md": content, "attachment_file_ids": fileIDs})
}

// fieldError returns the code of the problem's first field error.
func fieldError(t *testing.T, r *apitest.Response) string {
	t.Helper()
	var p struct {
		Code   string `json:"code"`
		Errors []struct {
			Pointer string `json:"pointer"`
			Code    string `json:"code"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil || r.Status != http.StatusBadRequest || p.Code != "validation_failed" || len(p.Errors) == 0 ||
		!strings.HasPrefix(p.Errors[0].Pointer, "/attachment_file_ids") {
		t.Fatalf("want validation_failed on attachment_file_ids: %d %s", r.Status, r.Body)
	}
	return p.Errors[0].Code
}

// testFilesAttach: the uploader attaches a file to one message; the
// message shows it on both faces and a replay with the same files answers
// the original; a second attachment, another's file, a missing one and an
// agent without files_out are field errors; an owner grants files_out
// (REST and GraphQL) and the agent attaches then.
func testFilesAttach(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	file := mustUpload(t, env, "alex", "notes.txt", []byte("Alex's notes\n"))
	m := wantAnswer(t, "attach", postWithFiles(env, "alex", main, "att-1", "see the notes", file), http.StatusCreated, nil)
	as := m["attachments"].([]any)
	if len(as) != 1 {
		t.Fatalf("attachments: %v", as)
	}
	wantMembers(t, "attachment", as[0].(map[string]any), map[string]any{"file_id": file, "text_status": "failed", "scan_status": "not_scanned"})
	// The event feed carries the attachment in the message's REST shape
	// (the harness validates it against the document).
	var page map[string]any
	json.Unmarshal(env.REST(http.MethodGet, "/api/v1/events", env.World.Token("sam"), nil).Body, &page)
	if !strings.Contains(mustJSON(page), `"text_status":"failed"`) {
		t.Fatalf("events without the attachment: %v", page)
	}
	// A replay with the same files is the original, not "already attached".
	if again := postWithFiles(env, "alex", main, "att-1", "see the notes", file); again.Status != http.StatusOK || again.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	if code := fieldError(t, postWithFiles(env, "alex", main, "att-2", "again", file)); code != "already_attached" {
		t.Fatalf("second attachment: %s", code)
	}
	if code := fieldError(t, postWithFiles(env, "sam", main, "att-3", "not mine", mustUpload(t, env, "alex", "b.txt", []byte("b")))); code != "invalid_reference" {
		t.Fatalf("another's file: %s", code)
	}
	if code := fieldError(t, postWithFiles(env, "alex", main, "att-4", "missing", "01a22d00-0000-7000-8000-000000000000")); code != "invalid_reference" {
		t.Fatalf("missing file: %s", code)
	}
	wantGraphQLAttachment(t, env, m["id"].(string), file)
	wantFilesOutGranted(t, env, main)
}

// wantGraphQLAttachment checks that GraphQL shows the message msg (as sam,
// a reader) with one attachment, file, with its text status and its file.
func wantGraphQLAttachment(t *testing.T, env *apitest.Env, msg, file string) {
	t.Helper()
	// GraphQL shows the same attachment with its file.
	var got struct {
		Message struct {
			Attachments []struct {
				FileID     string                  `json:"fileId"`
				TextStatus string                  `json:"textStatus"`
				File       struct{ Sha256 string } `json:"file"`
			} `json:"attachments"`
		} `json:"message"`
	}
	res := env.GraphQL(env.World.Token("sam"), `query($id: ID!) { message(id: $id) { attachments { fileId textStatus file { sha256 } } } }`, map[string]any{"id": msg}, &got)
	if len(res.Errors) > 0 || len(got.Message.Attachments) != 1 || got.Message.Attachments[0].FileID != file ||
		got.Message.Attachments[0].TextStatus != "FAILED" || len(got.Message.Attachments[0].File.Sha256) != 64 {
		t.Fatalf("GraphQL attachments: %+v %+v", got, res.Errors)
	}
}

// wantFilesOutGranted checks that the agent lotse attaches a file to a
// message in main only with files_out, which only an owner grants (on
// either face, audited).
func wantFilesOutGranted(t *testing.T, env *apitest.Env, main string) {
	t.Helper()
	// An agent attaches only with files_out, which only an owner grants.
	agentFile := mustUpload(t, env, "lotse", "report.txt", []byte("Lotse's report\n"))
	if code := fieldError(t, postWithFiles(env, "lotse", main, "lotse-1", "my report", agentFile)); code != "capability_required" {
		t.Fatalf("agent without files_out: %s", code)
	}
	capPath := "/api/v1/principals/" + env.World.ID("lotse") + "/capabilities"
	apitest.WantProblem(t, "capabilities by a non-owner", env.REST(http.MethodPut, capPath, env.World.Token("alex"), map[string]any{"files_out": true}),
		http.StatusForbidden, "forbidden", "level_insufficient")
	if c := env.MustREST(t, http.MethodPut, capPath, env.World.Token("robin"), map[string]any{"files_out": true}, http.StatusOK); c["files_out"] != true {
		t.Fatalf("capabilities: %v", c)
	}
	wantStatus(t, "agent with files_out", postWithFiles(env, "lotse", main, "lotse-2", "my report", agentFile), http.StatusCreated)
	var caps struct {
		SetCapabilities struct {
			Capabilities struct{ FilesOut bool } `json:"capabilities"`
		} `json:"setCapabilities"`
	}
	res := env.GraphQL(env.World.Token("robin"), `mutation($id: ID!) { setCapabilities(principalId: $id, input: {filesOut: false}) { capabilities { filesOut } } }`,
		map[string]any{"id": env.World.ID("lotse")}, &caps)
	if len(res.Errors) > 0 || caps.SetCapabilities.Capabilities.FilesOut {
		t.Fatalf("GraphQL setCapabilities: %+v %+v", caps, res.Errors)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE action = 'principal.capabilities'`); n < 2 {
		t.Fatalf("%d audit rows of principal.capabilities", n)
	}
}

// download reads file as who.
func download(t *testing.T, env *apitest.Env, who, file string) *apitest.Response {
	t.Helper()
	return env.REST(http.MethodGet, "/api/v1/files/"+file, env.World.Token(who), nil)
}

// testFilesRead: the uploader reads an unattached file, nobody else;
// once attached, the message's readers read it (with the download
// headers), others get the 404 of a missing file, equal but for the
// correlation id; a run token reads its run's files and its context shows
// them; a deleted message's files are gone; with files.require_scan on, a
// file no scanner checked is served to nobody.
func testFilesRead(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesRequireScan: "false"}})
	content := []byte("Alex's notes for @lotse\n")
	file := mustUpload(t, env, "alex", "notes.txt", content)
	missing := "01a22d00-0000-7000-8000-000000000000"
	wantBytes(t, "uploader", download(t, env, "alex", file), content)
	notFound := download(t, env, "sam", missing)
	apitest.WantProblem(t, "missing", notFound, http.StatusNotFound, "not_found", "")
	for _, who := range []string{"sam", "robin"} {
		if r := download(t, env, who, file); !apitest.SameAnswer(t, r, notFound) {
			t.Fatalf("%s reads an unattached file of Alex's: %d %s", who, r.Status, r.Body)
		}
	}
	esk := postWithFiles(env, "alex", env.Main("Support/Allgemein"), "read-1", "@lotse please read the notes", file)
	wantStatus(t, "attach", esk, http.StatusCreated)
	wantDownload(t, "reader of the message", download(t, env, "sam", file), content)
	// An owner's read is audited, as every upload is.
	wantStatus(t, "owner", download(t, env, "robin", file), http.StatusOK)
	wantCount(t, env, 1, "audit rows of owners' reads", `SELECT count(*) FROM audit_log WHERE action = 'file.read.owner' AND decision = 'allow'`)
	wantCount(t, env, 1, "audit rows of uploads", `SELECT count(*) FROM audit_log WHERE action = 'file.upload' AND decision = 'allow'`)
	// The Marketing file is hidden from Alex.
	mkt := mustUpload(t, env, "sam", "plan.txt", []byte("campaign"))
	wantStatus(t, "attach in Marketing", postWithFiles(env, "sam", env.Main("Marketing/Kampagnen"), "mkt-1", "the plan", mkt), http.StatusCreated)
	if r := download(t, env, "alex", mkt); !apitest.SameAnswer(t, r, download(t, env, "alex", missing)) {
		t.Fatalf("hidden file: %d %s", r.Status, r.Body)
	}
	var gf struct{ File *struct{ ID string } }
	if res := env.GraphQL(env.World.Token("alex"), `query($id: ID!) { file(id: $id) { id } }`, map[string]any{"id": mkt}, &gf); gf.File != nil || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "not_found" {
		t.Fatalf("GraphQL file of a hidden file: %+v %+v", gf, res.Errors)
	}
	if res := env.GraphQL(env.World.Token("sam"), `query($id: ID!) { file(id: $id) { id } }`, map[string]any{"id": mkt}, &gf); gf.File == nil || gf.File.ID != mkt {
		t.Fatalf("GraphQL file of a readable file: %+v %+v", gf, res.Errors)
	}

	// The run the message started: its context shows the file, and a run
	// token of the run reads it.
	var esMsg map[string]any
	json.Unmarshal(esk.Body, &esMsg)
	run := runOf(t, env, esMsg["id"].(string))
	rc := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run+"/context", env.World.Token("lotse"), nil, http.StatusOK)
	trig := rc["trigger_message"].(map[string]any)["attachments"].([]any)
	if len(trig) != 1 || trig[0].(map[string]any)["file_id"] != file {
		t.Fatalf("run context attachments: %v", trig)
	}
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/start", env.World.Token("lotse"), map[string]any{"holder": "h1"}, http.StatusOK)
	tok := env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/tokens", env.World.Token("lotse"), map[string]any{"holder": "h1"}, http.StatusCreated)
	wantBytes(t, "run token", env.REST(http.MethodGet, "/api/v1/files/"+file, tok["token"].(string), nil), content)
	wantStatus(t, "run token, another thread's file", env.REST(http.MethodGet, "/api/v1/files/"+mkt, tok["token"].(string), nil), http.StatusNotFound)

	// Deleting the message withdraws its files.
	env.MustREST(t, http.MethodDelete, "/api/v1/messages/"+esMsg["id"].(string), env.World.Token("alex"), nil, http.StatusOK)
	if r := download(t, env, "alex", file); !apitest.SameAnswer(t, r, download(t, env, "alex", missing)) {
		t.Fatalf("file of a deleted message: %d %s", r.Status, r.Body)
	}
	wantCount(t, env, 1, "files scheduled for deletion", `SELECT count(*) FROM stored_files WHERE delete_after IS NOT NULL`)
}

// wantDownload checks that r, a download of notes.txt by a reader, answered
// exactly content with the headers of a download: an attachment named
// notes.txt, never sniffed, sandboxed, as bytes.
func wantDownload(t *testing.T, what string, r *apitest.Response, content []byte) {
	t.Helper()
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, content) || r.Header.Get("Content-Disposition") != `attachment; filename=notes.txt` ||
		r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Content-Security-Policy") != "sandbox" ||
		r.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("%s: %d %v %s", what, r.Status, r.Header, r.Body)
	}
}

// testFilesRequireScan: with files.require_scan on (the default), a file no
// scanner checked is withheld from its uploader too, with a missing file's
// answer.
func testFilesRequireScan(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	file := mustUpload(t, env, "alex", "notes.txt", []byte("notes"))
	if r := download(t, env, "alex", file); !apitest.SameAnswer(t, r, download(t, env, "alex", "01a22d00-0000-7000-8000-000000000000")) {
		t.Fatalf("unscanned file with require_scan: %d %s", r.Status, r.Body)
	}
}

// testFilesOverS3: the same upload and read on both faces with
// files.storage on an S3-compatible store (an in-process S3 server). Not
// parallel: the store's credentials are environment variables.
func testFilesOverS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("bothy-files"); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "sam-example")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesRequireScan: "false",
		config.FilesStorage: "s3://bothy-files?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(s3.URL)}})
	content := []byte("Sam's notes, kept in S3\n")
	file := mustUpload(t, env, "sam", "notes.txt", content)
	if r := download(t, env, "sam", file); r.Status != http.StatusOK || !bytes.Equal(r.Body, content) {
		t.Fatalf("read from S3: %d %s", r.Status, r.Body)
	}
	if status, body := gqlUpload(t, env, "sam", content, true); status != http.StatusOK || !strings.Contains(string(body), `"scanStatus":"NOT_SCANNED"`) {
		t.Fatalf("GraphQL upload to S3: %d %s", status, body)
	}
	list, err := backend.ListBucket("bothy-files", nil, gofakes3.ListBucketPage{})
	if err != nil || len(list.Contents) != 2 {
		t.Fatalf("objects in the bucket: %v %v", list, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestFiles runs the tests of the files face: upload, limits, attachments, reads, the scan and S3 as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestFiles(t *testing.T) {
	t.Run("FilesUpload", testFilesUpload)
	t.Run("FilesLimits", testFilesLimits)
	t.Run("FilesAttach", testFilesAttach)
	t.Run("FilesRead", testFilesRead)
	t.Run("FilesRequireScan", testFilesRequireScan)
	t.Run("FilesOverS3", testFilesOverS3)
}
