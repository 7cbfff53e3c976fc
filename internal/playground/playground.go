// Package playground serves GraphiQL, Bothy's GraphQL playground for
// developers, from browser assets embedded in the binary: no CDN is used, so
// the playground works on a machine without internet access.
//
// The page (page.go) mounts local copies of GraphiQL 4 and React 18. It
// keeps the developer's headers and tabs across reloads (GraphiQL's own
// storage, never overridden by the page), introspects again when the
// headers change, and opens on a first tab with a query that answers once a
// token is set. In bothy dev it starts as the first example principal and
// lists the others' tokens.
//
// Routes answered by (*Playground).ServeHTTP (GET and HEAD only):
//
//	/                          the GraphiQL page
//	/playground                the GraphiQL page
//	/playground/assets/<name>  the embedded files (see AssetsPath)
//
// Register mounts exactly those routes on an http.ServeMux.
//
// The files under assets/ are third-party code and are not committed: they
// are copied from the npm packages pinned in package.json/package-lock.json
// by fetch-assets.sh (run by `make generate`). A binary built without them
// still compiles and runs; its playground page then only explains how to get
// the assets, and the GraphQL endpoint itself is unaffected.
package playground

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// AssetsPath is the URL path prefix under which the embedded GraphiQL and
// React files are served, e.g. /playground/assets/graphiql.min.js.
const AssetsPath = "/playground/assets/"

// PagePath is the path that answers the GraphiQL page besides "/".
const PagePath = "/playground"

// Title is the title of the GraphiQL page.
const Title = "Bothy GraphiQL"

// The four embedded files. Their names are those under assets/ and under
// AssetsPath; fetch-assets.sh copies them from node_modules.
const (
	graphiqlJS  = "graphiql.min.js"             // graphiql/graphiql.min.js
	graphiqlCSS = "graphiql.min.css"            // graphiql/graphiql.min.css
	reactJS     = "react.production.min.js"     // react/umd/react.production.min.js
	reactDOMJS  = "react-dom.production.min.js" // react-dom/umd/react-dom.production.min.js
)

// assetNames lists the files the page needs, in the order they load.
var assetNames = []string{reactJS, reactDOMJS, graphiqlCSS, graphiqlJS}

// assets holds the files copied by fetch-assets.sh. Only assets/README.md is
// committed, which keeps the pattern valid when the copies are missing.
//
//go:embed assets
var assets embed.FS

// Playground serves the GraphiQL page and its embedded assets. Build one
// with New; it is safe for concurrent use and never changes after New.
type Playground struct {
	endpoint string
	assets   map[string]*asset // nil when any file is missing
	missing  []string          // names missing from the embedded files
	page     []byte            // GraphiQL page, or the fallback page
	pageTag  string            // ETag of page
	pageCSP  string            // Content-Security-Policy of page
}

// asset is one embedded file, ready to serve.
type asset struct {
	data        []byte
	contentType string
	sri         string // "sha256-<base64>" for the integrity attribute
	version     string // short hex digest used as ?v= cache buster
	etag        string
}

// New returns the playground for the GraphQL endpoint at endpoint, which is
// a path on the same server ("/graphql") or an absolute URL, with opts (at
// most one; bothy dev passes the example world's principals). It reads the
// assets embedded in the binary and computes their SRI hashes once.
func New(endpoint string, opts ...Options) *Playground {
	sub, err := fs.Sub(assets, "assets")
	if err != nil { // cannot happen: "assets" is a valid path
		panic(fmt.Sprintf("playground: %v", err))
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return newPlayground(sub, endpoint, o)
}

// newPlayground builds a Playground from the files at the root of fsys; the
// tests use it to inject a fake or empty file system.
func newPlayground(fsys fs.FS, endpoint string, opts Options) *Playground {
	p := &Playground{endpoint: endpoint}
	found := make(map[string]*asset, len(assetNames))
	for _, name := range assetNames {
		data, err := fs.ReadFile(fsys, name)
		if err != nil || len(data) == 0 {
			p.missing = append(p.missing, name)
			continue
		}
		sum := sha256.Sum256(data)
		found[name] = &asset{
			data:        data,
			contentType: contentType(name),
			sri:         "sha256-" + base64.StdEncoding.EncodeToString(sum[:]),
			version:     hex.EncodeToString(sum[:6]),
			etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
		}
	}
	if len(p.missing) == 0 {
		p.assets = found
		p.page = p.renderPage(opts)
		p.pageCSP = graphiqlCSP(p.page, endpoint)
	} else {
		p.page = renderFallback(endpoint, p.missing)
		p.pageCSP = fallbackCSP
	}
	sum := sha256.Sum256(p.page)
	p.pageTag = `"` + hex.EncodeToString(sum[:16]) + `"`
	return p
}

// HasAssets reports whether all GraphiQL and React files are embedded. When
// it is false the page is a short notice that says how to get them
// (`make generate` or internal/playground/fetch-assets.sh), and the asset
// routes answer 404.
func (p *Playground) HasAssets() bool { return p.assets != nil }

// ServeHTTP answers GET and HEAD for "/" and PagePath with the page, and for
// AssetsPath+name with the embedded file of that name; any other path is
// 404 and any other method 405. Mount it on those paths (see Register) or
// in front of a mux that sends them here.
func (p *Playground) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	isPage := path == "/" || path == PagePath
	isAsset := strings.HasPrefix(path, AssetsPath)
	if !isPage && !isAsset {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	if isPage {
		p.servePage(w, r)
		return
	}
	p.serveAsset(w, r, strings.TrimPrefix(path, AssetsPath))
}

// Register mounts the playground on mux at "GET /{$}" (the root only),
// "GET /playground" and "GET /playground/assets/"; GET patterns also match
// HEAD. Other paths of mux, such as the GraphQL endpoint, are untouched.
func (p *Playground) Register(mux *http.ServeMux) {
	mux.Handle("GET /{$}", p)
	mux.Handle("GET "+PagePath, p)
	mux.Handle("GET "+AssetsPath, p)
}

func (p *Playground) servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", p.pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("ETag", p.pageTag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(p.page))
}

func (p *Playground) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a := p.assets[name] // nil map or unknown name: nil
	if a == nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", a.etag)
	// The page links each file with ?v=<digest>, so that URL names these
	// exact bytes and may be cached for good; any other URL (no or an old
	// digest) is revalidated so a new build is never hidden by a cache.
	if r.URL.Query().Get("v") == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.data))
}

// assetURL is the versioned local URL of an embedded file.
func (p *Playground) assetURL(name string) string {
	return AssetsPath + name + "?v=" + p.assets[name].version
}

// inlineScript matches the page's inline <script> elements (those without
// a src attribute), whose hashes the Content-Security-Policy allows.
var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// graphiqlCSP is the Content-Security-Policy of the GraphiQL page. It lets
// the browser load scripts, styles, images and fonts only from this server
// (plus data: fonts/images, which graphiql.min.css inlines) and connect
// only to this server and the GraphQL endpoint: whatever the third-party
// code does, no request leaves for another host.
func graphiqlCSP(page []byte, endpoint string) string {
	scripts := []string{"'self'"}
	for _, m := range inlineScript.FindAllSubmatch(page, -1) {
		sum := sha256.Sum256(m[1])
		scripts = append(scripts, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	connect := []string{"'self'"}
	if u, err := url.Parse(endpoint); err == nil && u.Scheme != "" && u.Host != "" {
		ws := "ws"
		if u.Scheme == "https" {
			ws = "wss"
		}
		connect = append(connect, u.Scheme+"://"+u.Host, ws+"://"+u.Host)
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + strings.Join(scripts, " "),
		"style-src 'self' 'unsafe-inline'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src " + strings.Join(connect, " "),
		"base-uri 'none'",
		"form-action 'none'",
	}, "; ")
}

// fallbackCSP allows the fallback page nothing but its inline style.
const fallbackCSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

var fallbackPage = template.Must(template.New("fallback").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}: assets missing</title>
<style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;line-height:1.5}code{background:#eee;padding:0 .2em}</style>
</head>
<body>
<h1>GraphiQL is not built into this binary</h1>
<p>The GraphiQL playground serves its JavaScript and CSS from files embedded
at build time, and this binary was built without them
(missing: {{range $i, $n := .Missing}}{{if $i}}, {{end}}<code>{{$n}}</code>{{end}}).</p>
<p>To get them, run <code>make generate</code> (or
<code>internal/playground/fetch-assets.sh</code>, which needs node and npm)
and rebuild the server.</p>
<p>The GraphQL endpoint <code>{{.Endpoint}}</code> still works: send it
requests with any GraphQL client.</p>
</body>
</html>
`))

// renderFallback renders the page served when the assets are missing.
func renderFallback(endpoint string, missing []string) []byte {
	var b bytes.Buffer
	err := fallbackPage.Execute(&b, struct {
		Title, Endpoint string
		Missing         []string
	}{Title, endpoint, missing})
	if err != nil { // cannot happen: fixed template, string fields
		panic(fmt.Sprintf("playground: %v", err))
	}
	return b.Bytes()
}

// contentType is the Content-Type of an embedded file, by extension.
func contentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".js"):
		return "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".css"):
		return "text/css; charset=utf-8"
	default:
		return "application/octet-stream"
	}
}
