package server

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// multipartOverhead is what a multipart body may carry besides the file
// itself (boundaries and part headers): the body limit of an upload is
// files.max_bytes plus this, and the files module counts the file's own
// bytes against files.max_bytes exactly.
const multipartOverhead = 64 << 10

// isMultipart reports whether r's body is multipart/form-data.
func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// limitUpload is the body limit of an upload (files.max_bytes, not
// http.max_body_bytes) and its read deadline (files.upload_timeout, not
// http.read_timeout). Unlike httpx.LimitBody it does not buffer the body:
// the file streams to the store as it arrives.
func limitUpload(maxBytes int64, timeout time.Duration, next http.Handler) http.Handler {
	limit := maxBytes + multipartOverhead
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			httpx.WriteProblem(w, r, files.ErrTooLarge())
			return
		}
		// An error means the writer cannot move deadlines (a test
		// recorder): there is no connection to protect then.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// requirePreflight refuses a multipart request to /graphql without the
// header GraphQL-Require-Preflight (400): a browser sends a multipart
// form cross-site without a CORS preflight, a custom header forces one,
// so that no other site can make a signed-in browser upload a file.
func requirePreflight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && isMultipart(r) && r.Header.Get("GraphQL-Require-Preflight") == "" {
			httpx.WriteProblem(w, r, problem.Newf(problem.ValidationFailed, "preflight_required",
				"a multipart request to /graphql must carry the header GraphQL-Require-Preflight: 1"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveFile answers GET /api/v1/files/{file_id} (getFileContent): the
// bytes of a file the caller may read (file.read), as a download that no
// browser renders: Content-Disposition attachment, the generic media type
// (the sniffed one is in the file's metadata), nosniff and a sandboxing
// CSP. A file the caller may not read, a missing one and one withheld for
// its scan state answer the same 404.
func serveFile(fs *files.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.NoteOperation(r.Context(), "getFileContent")
		httpx.NoteAction(r.Context(), string(authz.FileRead))
		p, ok := identity.FromContext(r.Context())
		if !ok {
			httpx.WriteProblem(w, r, problem.New(problem.Unauthorized, ""))
			return
		}
		f, body, err := fs.Open(r.Context(), p, r.PathValue("file_id"))
		if err != nil {
			httpx.WriteProblem(w, r, err)
			return
		}
		defer body.Close()
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(f.Size, 10))
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Name}))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "sandbox")
		h.Set("Cache-Control", "private, no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, body)
	})
}
