package playground

import (
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	gqlplayground "github.com/99designs/gqlgen/graphql/playground"
)

const testEndpoint = "/graphql"

// embedded returns the playground built from the files embedded in the test
// binary. It fails (never skips) when they are missing: CI must have run
// fetch-assets.sh before go test.
func embedded(t *testing.T) *Playground {
	t.Helper()
	p := New(testEndpoint)
	if !p.HasAssets() {
		t.Fatalf("GraphiQL assets are not embedded (missing %v): run `make generate` "+
			"(or internal/playground/fetch-assets.sh) before `go test`", p.missing)
	}
	return p
}

// get serves one GET request and returns the response and its body.
func get(t *testing.T, h http.Handler, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// attrURL finds the URL-valued attributes of an HTML page.
var attrURL = regexp.MustCompile(`(?i)\b(src|href|action|formaction|poster|srcset|data)\s*=\s*["']?([^"'\s>]*)`)

// propOverride finds a headers or query prop of GraphiQL (one per line in
// the page; defaultHeaders and defaultQuery do not match).
var propOverride = regexp.MustCompile(`(?m)^\s*(headers|query)\s*:`)

// integrityOf finds the integrity attribute following a src/href value.
var integrityOf = regexp.MustCompile(`(?s)(?:src|href)="([^"]+)"\s*integrity="([^"]+)"`)

func TestEmbeddedAssetsPresent(t *testing.T) {
	p := embedded(t)
	for _, name := range assetNames {
		if len(p.assets[name].data) < 1000 {
			t.Errorf("%s: only %d bytes: rerun fetch-assets.sh", name, len(p.assets[name].data))
		}
	}
}

func TestPageReferencesOnlyLocalAssetsWithMatchingIntegrity(t *testing.T) {
	p := embedded(t)
	for _, path := range []string{"/", PagePath} {
		res, page := get(t, p, path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", path, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		checkPageSettings(t, path, page)
		checkPageReferencesLocalAssets(t, path, page)
		checkPageIntegrity(t, p, path, page)
	}
}

// checkPageSettings checks that page, served at path, is the GraphiQL
// page with the Authorization header as default in an enabled, kept
// headers editor, that it overrides nothing GraphiQL stored, and that it
// holds no token.
func checkPageSettings(t *testing.T, path, page string) {
	t.Helper()
	// html/template writes the JS string with <, > as \u003c, \u003e.
	if !strings.Contains(page, "GraphiQL") || !strings.Contains(page, `defaultHeaders: "{\"Authorization\": \"Bearer \u003ctoken\u003e\"}"`) {
		t.Errorf("GET %s: not the GraphiQL page with the Authorization header as default:\n%s", path, page)
	}
	if !strings.Contains(page, "isHeadersEditorEnabled: true") || !strings.Contains(page, "shouldPersistHeaders: true") {
		t.Errorf("GET %s: headers editor not enabled or not kept", path)
	}
	// headers: or query: would override what GraphiQL stored and open a
	// new tab on every reload.
	if propOverride.MatchString(page) {
		t.Errorf("GET %s: the page overrides GraphiQL's stored headers or query", path)
	}
	if strings.Contains(page, "bothy_") {
		t.Errorf("GET %s: a token in the page of bothy serve", path)
	}
}

// checkPageReferencesLocalAssets checks that every URL attribute of page,
// served at path, is one of the four local assets and that each of them
// is referenced.
func checkPageReferencesLocalAssets(t *testing.T, path, page string) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range attrURL.FindAllStringSubmatch(page, -1) {
		u := html.UnescapeString(m[2])
		if !strings.HasPrefix(u, AssetsPath) {
			t.Errorf("GET %s: %s=%q is not under %s", path, m[1], u, AssetsPath)
			continue
		}
		seen[strings.SplitN(strings.TrimPrefix(u, AssetsPath), "?", 2)[0]] = true
	}
	for _, name := range assetNames {
		if !seen[name] {
			t.Errorf("GET %s: page does not reference %s", path, name)
		}
	}
}

// checkPageIntegrity checks that every asset reference of page, served at
// path, carries an integrity hash of the bytes p serves there.
func checkPageIntegrity(t *testing.T, p *Playground, path, page string) {
	t.Helper()
	refs := integrityOf.FindAllStringSubmatch(page, -1)
	if len(refs) != len(assetNames) {
		t.Fatalf("GET %s: %d references with integrity, want %d", path, len(refs), len(assetNames))
	}
	for _, m := range refs {
		// Attribute values are HTML-escaped ('+' is written &#43;).
		u, integrity := html.UnescapeString(m[1]), html.UnescapeString(m[2])
		res, body := get(t, p, u)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", u, res.StatusCode)
			continue
		}
		sum := sha256.Sum256([]byte(body))
		if want := "sha256-" + base64.StdEncoding.EncodeToString(sum[:]); integrity != want {
			t.Errorf("%s: integrity %q, served bytes hash to %q", u, integrity, want)
		}
	}
}

func TestAssetHeaders(t *testing.T) {
	p := embedded(t)
	want := map[string]string{
		graphiqlJS:  "text/javascript; charset=utf-8",
		graphiqlCSS: "text/css; charset=utf-8",
		reactJS:     "text/javascript; charset=utf-8",
		reactDOMJS:  "text/javascript; charset=utf-8",
	}
	for name, ct := range want {
		checkAssetServed(t, p, name, ct)
	}
	for _, target := range []string{AssetsPath + "nope.js", AssetsPath, AssetsPath + "../playground.go", "/other", "/playground/"} {
		if res, _ := get(t, p, target); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", target, res.StatusCode)
		}
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d %v", rec.Code, rec.Header())
	}
	rec = httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD /: %d, %d body bytes", rec.Code, rec.Body.Len())
	}
}

// checkAssetServed checks how p serves the asset name: whole, as content
// type ct, cached for good at its versioned URL and revalidated at the
// unversioned one, with an ETag that a conditional GET answers 304.
func checkAssetServed(t *testing.T, p *Playground, name, ct string) {
	t.Helper()
	res, body := get(t, p, p.assetURL(name))
	if res.StatusCode != http.StatusOK || len(body) != len(p.assets[name].data) {
		t.Fatalf("%s: status %d, %d bytes", name, res.StatusCode, len(body))
	}
	if got := res.Header.Get("Content-Type"); got != ct {
		t.Errorf("%s: Content-Type %q, want %q", name, got, ct)
	}
	if got := res.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
		t.Errorf("%s (versioned): Cache-Control %q", name, got)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("ETag") == "" {
		t.Errorf("%s: headers %v", name, res.Header)
	}
	// Unversioned (or stale) URLs must revalidate.
	res, _ = get(t, p, AssetsPath+name)
	if got := res.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("%s (unversioned): Cache-Control %q", name, got)
	}
	// Conditional GET.
	req := httptest.NewRequest(http.MethodGet, AssetsPath+name, nil)
	req.Header.Set("If-None-Match", p.assets[name].etag)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("%s: If-None-Match gave %d", name, rec.Code)
	}
}

// The "no request leaves the machine" rule, checked statically here and
// enforced at run time by the page's Content-Security-Policy:
//
//  1. The page has no http(s):// or protocol-relative URL at all, and every
//     src/href is a local /playground/assets/ path (see the test above).
//  2. The CSS loads nothing from outside: every url(...) is a data: URI or
//     relative, and there is no @import of an absolute URL.
//  3. The minified JS cannot be proven by a scan never to build a URL, so
//     the scan is a tripwire for upgrades: every absolute URL literal in it
//     must be on a host in harmlessJSHosts, each of which is there because
//     its URLs are never fetched (XML namespace names) or are only text in
//     an error message or a link a developer may click. A new host fails
//     the test until a person has looked at it. What the JS could still do
//     dynamically is blocked by the CSP (connect-src, script-src, ... 'self'),
//     which TestPageCSP checks.
//  4. No CDN host name (cdnHost) appears anywhere in the page or the assets,
//     whatever the context. A CDN's bare name in prose is not a host: the
//     GraphiQL bundle's React-15 error message reads "If you are using a CDN
//     source (jsdelivr, unpkg, etc)", which loads nothing and is allowed.
var (
	absURL          = regexp.MustCompile(`(?i)(?:https?:)?//([a-z0-9-]+(?:\.[a-z0-9-]+)+)`)
	httpURL         = regexp.MustCompile(`(?i)https?://([a-z0-9-]+(?:\.[a-z0-9-]+)+)`)
	cssURL          = regexp.MustCompile(`(?i)url\(\s*["']?([^"')\s]*)`)
	cssImport       = regexp.MustCompile(`(?i)@import`)
	cdnHost         = regexp.MustCompile(`(?i)[a-z0-9.-]*\b(jsdelivr\.(net|com)|unpkg\.com|cdnjs\.cloudflare\.com|cdnjs\.com|esm\.sh|esm\.run|googleapis\.com|gstatic\.com|skypack\.dev|jspm\.(io|dev)|bootstrapcdn\.com|cloudflare\.com|fastly\.net|akamaihd\.net|statically\.io|rawgit\.com|githack\.com|jsdelivr\.map\.fastly\.net|cdn\.[a-z0-9-]+\.[a-z]+)\b`)
	harmlessJSHosts = map[string]string{
		"www.w3.org":       "XML/SVG/MathML namespace names, never fetched",
		"reactjs.org":      "React's error-decoder link in minified error text",
		"github.com":       "license notes and a link in GraphiQL's React<16 error text",
		"radix-ui.com":     "docs link in a Radix accessibility console warning",
		"codemirror.net":   "link in the keyboard-shortcuts dialog, opened only by a click",
		"commonmark.org":   "link in the description text of a GraphQL directive",
		"en.wikipedia.org": "link in graphql-js's Float scalar description text",
	}
)

func TestPageAndAssetsNameNoOutsideHost(t *testing.T) {
	p := embedded(t)
	_, page := get(t, p, "/")

	// 1. The page.
	if m := absURL.FindAllString(page, -1); len(m) > 0 {
		t.Errorf("page names absolute URLs %v", m)
	}

	// 2. The CSS.
	css := string(p.assets[graphiqlCSS].data)
	for _, m := range cssURL.FindAllStringSubmatch(css, -1) {
		if u := m[1]; !strings.HasPrefix(u, "data:") && absURL.MatchString(u) {
			t.Errorf("%s loads url(%s)", graphiqlCSS, u)
		}
	}
	if cssImport.MatchString(css) {
		t.Errorf("%s has an @import", graphiqlCSS)
	}
	if m := httpURL.FindAllString(css, -1); len(m) > 0 {
		t.Errorf("%s names URLs %v", graphiqlCSS, m)
	}

	// 3. The JS.
	for _, name := range []string{reactJS, reactDOMJS, graphiqlJS} {
		hosts := map[string]bool{}
		for _, m := range httpURL.FindAllStringSubmatch(string(p.assets[name].data), -1) {
			hosts[strings.ToLower(m[1])] = true
		}
		var unknown []string
		for h := range hosts {
			if _, ok := harmlessJSHosts[h]; !ok {
				unknown = append(unknown, h)
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 {
			t.Errorf("%s names hosts %v not in harmlessJSHosts: check that nothing is "+
				"loaded from them, then add them with the reason", name, unknown)
		}
	}

	// 4. CDN hosts anywhere.
	all := map[string]string{"page": page}
	for name, a := range p.assets {
		all[name] = string(a.data)
	}
	for name, text := range all {
		if m := cdnHost.FindAllString(text, 5); len(m) > 0 {
			t.Errorf("%s names CDN hosts %v", name, m)
		}
	}
}

func TestPageCSP(t *testing.T) {
	p := embedded(t)
	res, page := get(t, p, "/")
	csp := res.Header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "connect-src 'self'", "style-src 'self' 'unsafe-inline'", "font-src 'self' data:"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
	if strings.Contains(csp, "http") || strings.Contains(csp, "*") {
		t.Errorf("CSP %q allows an outside host", csp)
	}
	// The inline script must be allowed by its hash, not by 'unsafe-inline'.
	scripts := inlineScript.FindAllStringSubmatch(page, -1)
	if len(scripts) != 1 {
		t.Fatalf("page has %d inline scripts, want 1", len(scripts))
	}
	sum := sha256.Sum256([]byte(scripts[0][1]))
	want := "script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "';"
	if !strings.Contains(csp, want) {
		t.Errorf("CSP %q lacks %q", csp, want)
	}

	// An absolute endpoint on another origin is allowed for connect only.
	abs := graphiqlCSP([]byte(page), "https://api.example.test/graphql")
	if !strings.Contains(abs, "connect-src 'self' https://api.example.test wss://api.example.test;") {
		t.Errorf("CSP for absolute endpoint: %q", abs)
	}
}

func TestRegister(t *testing.T) {
	p := embedded(t)
	mux := http.NewServeMux()
	p.Register(mux)
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "gql") })
	for target, want := range map[string]int{
		"/":                    http.StatusOK,
		PagePath:               http.StatusOK,
		p.assetURL(graphiqlJS): http.StatusOK,
		AssetsPath + "x.js":    http.StatusNotFound,
		"/elsewhere":           http.StatusNotFound,
	} {
		if res, _ := get(t, mux, target); res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", target, res.StatusCode, want)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/graphql", nil))
	if rec.Body.String() != "gql" {
		t.Errorf("POST /graphql not routed to its handler: %d %q", rec.Code, rec.Body.String())
	}
}

func TestFallbackWhenAssetsMissing(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"empty":       {},
		"readme only": {"README.md": {Data: []byte("filled by fetch-assets.sh")}},
		"partial": {
			graphiqlJS:  {Data: []byte("x")},
			graphiqlCSS: {Data: []byte("x")},
			reactJS:     {Data: []byte{}}, // an empty file counts as missing
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPlayground(fsys, testEndpoint, Options{})
			if p.HasAssets() {
				t.Fatal("HasAssets() = true")
			}
			for _, path := range []string{"/", PagePath} {
				res, page := get(t, p, path)
				if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
					t.Fatalf("GET %s: %d %q", path, res.StatusCode, res.Header.Get("Content-Type"))
				}
				for _, want := range []string{"make generate", "internal/playground/fetch-assets.sh", "<code>/graphql</code> still works", reactDOMJS} {
					if !strings.Contains(page, want) {
						t.Errorf("fallback page lacks %q:\n%s", want, page)
					}
				}
				if strings.Contains(page, "<script") || attrURL.MatchString(page) {
					t.Errorf("fallback page loads something:\n%s", page)
				}
				if csp := res.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") {
					t.Errorf("fallback CSP %q", csp)
				}
			}
			for _, a := range assetNames {
				if res, _ := get(t, p, AssetsPath+a); res.StatusCode != http.StatusNotFound {
					t.Errorf("GET %s: %d, want 404", a, res.StatusCode)
				}
			}
		})
	}
}

func TestInjectedAssetsAreServed(t *testing.T) {
	fsys := fstest.MapFS{}
	for _, name := range assetNames {
		fsys[name] = &fstest.MapFile{Data: []byte("/* " + name + " */")}
	}
	p := newPlayground(fsys, testEndpoint, Options{})
	if !p.HasAssets() {
		t.Fatalf("HasAssets() = false, missing %v", p.missing)
	}
	_, page := get(t, p, "/")
	sum := sha256.Sum256([]byte("/* " + graphiqlJS + " */"))
	if sri := "sha256-" + base64.StdEncoding.EncodeToString(sum[:]); !strings.Contains(page, sri) {
		t.Errorf("page lacks SRI %s of the injected graphiql.min.js", sri)
	}
	if _, body := get(t, p, AssetsPath+reactJS); body != "/* "+reactJS+" */" {
		t.Errorf("served %q", body)
	}
}

// TestHostRulesCatchCDNPage checks the rules above against gqlgen's default
// page, which loads everything from a CDN: they must reject it.
func TestHostRulesCatchCDNPage(t *testing.T) {
	_, page := get(t, gqlplayground.Handler("x", testEndpoint), "/")
	if !absURL.MatchString(page) {
		t.Error("absURL misses the CDN page's URLs")
	}
	if m := cdnHost.FindAllString(page, -1); len(m) == 0 {
		t.Error("cdnHost misses the CDN page's hosts")
	}
	for _, s := range []string{"https://unpkg.com/x", "//cdnjs.cloudflare.com/a", "fonts.googleapis.com", "esm.sh/react"} {
		if !cdnHost.MatchString(s) {
			t.Errorf("cdnHost misses %q", s)
		}
	}
	if cdnHost.MatchString("If you are using a CDN source (jsdelivr, unpkg, etc)") {
		t.Error("cdnHost flags prose without a host")
	}
}

// TestActAsOnlyWhenGiven: with ActAs (bothy dev) the first principal's token
// is the default header and the first tab lists every principal; without it
// no token is in the page.
func TestActAsOnlyWhenGiven(t *testing.T) {
	dev := New(testEndpoint, Options{ActAs: []Principal{{Handle: "alex", Kind: "user", Token: "bothy_s_alexalex"}, {Handle: "lotse", Kind: "agent", Token: "bothy_a_lotselotse"}}})
	_, page := get(t, dev, "/")
	for _, want := range []string{`Bearer bothy_s_alexalex`, `lotse    agent bothy_a_lotselotse`, "acts as alex"} {
		if !strings.Contains(page, want) {
			t.Fatalf("dev page lacks %q", want)
		}
	}
	_, page = get(t, New(testEndpoint), "/")
	if strings.Contains(page, "bothy_") || strings.Contains(page, "acts as") {
		t.Fatal("the serve page offers principals")
	}
}

// TestSignInLink: with a sign-in configured the page links it and takes
// the session token from the fragment the callback sends back into the
// stored Authorization header; without one it offers neither.
func TestSignInLink(t *testing.T) {
	_, page := get(t, New(testEndpoint, Options{SignInURL: "/auth/login"}), "/")
	for _, want := range []string{`<a class="signin" href="/auth/login">Sign in</a>`, `get('session')`, `history.replaceState`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page with a sign-in lacks %q", want)
		}
	}
	if _, page = get(t, New(testEndpoint), "/"); strings.Contains(page, `class="signin"`) {
		t.Fatal("the page without a sign-in links one")
	}
}
