package server_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/playground"
)

// chromiumPath finds Debian's headless-capable Chromium (.ci/run installs
// the package chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is not installed: apt-get install chromium (.ci/run does)")
	return ""
}

// headersEditorJS returns the text of GraphiQL's headers editor (the
// CodeMirror instance holding a JSON object that names Authorization; the
// query editor's first tab names it only in a comment).
const headersEditorJS = `(() => {
  for (const el of document.querySelectorAll('.CodeMirror')) {
    const v = el.CodeMirror && el.CodeMirror.getValue();
    if (v && v.trim().startsWith('{') && v.includes('Authorization')) return v;
  }
  return '';
})()`

// headlessChromium starts headless Chromium and returns a browser context
// that ends after two minutes at the latest, and the function that ends
// it and the browser.
func headlessChromium(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	return ctx, func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	}
}

// setHeaderJS is the script that sets the Authorization header of
// GraphiQL's headers editor to the bearer token, and answers whether it
// found the editor.
func setHeaderJS(token string) string {
	return `(() => {
  for (const el of document.querySelectorAll('.CodeMirror')) {
    const cm = el.CodeMirror;
    if (cm && cm.getValue().trim().startsWith('{') && cm.getValue().includes('Authorization')) {
      cm.setValue(JSON.stringify({Authorization: 'Bearer ` + token + `'}, null, 2));
      return true;
    }
  }
  return false;
})()`
}

// docsShowSchema waits up to 30 s for the Docs pane, once GraphiQL holds a
// schema, to list the root types, opening the pane when it is closed.
func docsShowSchema(t *testing.T) chromedp.ActionFunc {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var text string
			// Open the pane when it is closed (GraphiQL may keep it open).
			js := `(() => { let d = document.querySelector('.graphiql-doc-explorer');
			  if (!d) { const b = document.querySelector('button[aria-label="Show Documentation Explorer"]'); if (b) b.click(); d = document.querySelector('.graphiql-doc-explorer'); }
			  return d ? d.innerText : ''; })()`
			if err := chromedp.Evaluate(js, &text).Do(ctx); err != nil {
				return err
			}
			if strings.Contains(text, "Query") && strings.Contains(text, "Mutation") {
				return nil
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Docs pane shows no schema: %q", text)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}

// TestPlaygroundInBrowser loads the playground in headless Chromium, sets
// the Authorization header, and reloads: the header is kept, no tab is
// added, the Docs pane shows the schema (so the standard introspection
// passed with the new header), and no request left for another host.
func TestPlaygroundInBrowser(t *testing.T) {
	t.Parallel()
	// Without the embedded GraphiQL files the page is the fallback and no
	// selector would ever appear: say so now, not after the timeouts.
	if !playground.New("/graphql").HasAssets() {
		t.Fatal("the playground's GraphiQL files are not embedded: run make assets (make test does), then test again")
	}
	env := apitest.Start(t, apitest.Options{})
	token := env.World.Token("alex")

	ctx, cancel := headlessChromium(t)
	defer cancel()

	var mu sync.Mutex
	var requests []string
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	})

	page := env.URL + "/playground"
	var headers string
	var tabs int
	var set bool
	docsShowQuery := docsShowSchema(t)
	err := chromedp.Run(ctx,
		network.Enable(),
		chromedp.Navigate(page),
		chromedp.WaitVisible(`.graphiql-container`, chromedp.ByQuery),
		chromedp.Poll(headersEditorJS, &headers, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(setHeaderJS(token), &set),
		// GraphiQL stores the headers and the page introspects again.
		chromedp.Sleep(2*time.Second),
		docsShowQuery,
		chromedp.Reload(),
		chromedp.WaitVisible(`.graphiql-container`, chromedp.ByQuery),
		chromedp.Poll(headersEditorJS, &headers, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`document.querySelectorAll('.graphiql-tab').length`, &tabs),
		docsShowQuery,
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if !set {
		t.Fatal("no headers editor with an Authorization header on the first visit")
	}
	if !strings.Contains(headers, token) {
		t.Fatalf("after a reload the headers are %q, not the token set before", headers)
	}
	if tabs > 1 {
		t.Fatalf("a reload opened a new tab: %d tabs", tabs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) == 0 {
		t.Fatal("no request recorded")
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, env.URL+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("a request left the server: %s", u)
		}
	}
}
