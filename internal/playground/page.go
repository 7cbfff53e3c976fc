package playground

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
)

// Principal is one principal the development playground offers to act as:
// its handle, kind and token. Only bothy dev passes any (see Options).
type Principal struct {
	Handle string `json:"handle"`
	Kind   string `json:"kind"`
	Token  string `json:"token"`
}

// Options configure the page. The zero value is the page of bothy serve.
type Options struct {
	// ActAs lists the example world's principals (bothy dev only): the first
	// is the default Authorization header of a first visit, and the first
	// tab's comment lists every one with its token to paste. Never set it
	// for a server that holds real data: the tokens are in the page.
	ActAs []Principal
	// SignInURL, when set, is the start of the sign-in through the
	// organisation's identity provider (/auth/login): the page links it,
	// and on the way back takes the session token from the URL's
	// fragment (#session=...) into the Authorization header.
	SignInURL string
}

// placeholderHeaders are the headers of a first visit without ActAs.
const placeholderHeaders = `{"Authorization": "Bearer <token>"}`

// welcomeQuery is the first tab of a first visit: a query that answers as
// soon as the Authorization header holds a token.
const welcomeQuery = `# Welcome to Bothy's GraphQL playground.
#
# Requests need the header Authorization: Bearer <token> (the Headers tab
# below; bothy dev prints the example world's tokens). The Docs pane on the
# left shows the whole schema once the header is set.
%s
query Viewer {
  viewer {
    handle
    kind
    displayName
  }
}

# Watch an agent write: run LiveAnswers (the run button lists both
# operations), then mention @lotse in a channel you read. The run's live
# box arrives as it grows; replace, when set, is the whole text before
# append, and the answer ends it (done, text empty: the answer holds it).
subscription LiveAnswers {
  events {
    __typename
    ... on RunLiveUpdatedEvent { runId version append replace status done }
    ... on MessageEvent { message { kind author { handle } contentMd approval { id state } } }
  }
}

# When an agent asks you before a consequential action (a card of kind
# CARD in the thread), read what it wants to do and answer with one of its
# options: only you, the person who asked the agent, see the detail.
query Approval($approval: ID!) {
  approval(id: $approval) { state title detail options { id label } expiresAt }
}

mutation Answer($approval: ID!, $option: String!) {
  respondToApproval(id: $approval, optionId: $option) { state decidedAt option { label } }
}
`

// pageData is what the page template renders.
type pageData struct {
	Title                        string
	ReactURL, ReactSRI           string
	ReactDOMURL, ReactDOMSRI     string
	CSSURL, CSSSRI               string
	JSURL, JSSRI                 string
	Endpoint                     string
	Absolute                     bool
	DefaultHeaders, DefaultQuery string
	StoragePrefix                string
	SignInURL                    string
}

// The page mounts GraphiQL with defaultHeaders and defaultQuery, never
// headers or query: those props would override what GraphiQL stored (the
// developer's token) and open a new tab on every reload. A wrapper swaps in
// a new fetcher when the headers change, which makes GraphiQL introspect
// again with them, so the Docs pane follows the token.
var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{margin:0}#graphiql{height:100vh}.loading{height:100%;display:flex;align-items:center;justify-content:center;font-size:2rem;font-family:system-ui,sans-serif}.signin{position:fixed;top:.5rem;right:1rem;z-index:10;font-family:system-ui,sans-serif}</style>
<script src="{{.ReactURL}}" integrity="{{.ReactSRI}}" crossorigin="anonymous"></script>
<script src="{{.ReactDOMURL}}" integrity="{{.ReactDOMSRI}}" crossorigin="anonymous"></script>
<link rel="stylesheet" href="{{.CSSURL}}" integrity="{{.CSSSRI}}" crossorigin="anonymous">
</head>
<body>
{{- if .SignInURL}}
<a class="signin" href="{{.SignInURL}}">Sign in</a>
{{- end}}
<div id="graphiql"><div class="loading">Loading…</div></div>
<script src="{{.JSURL}}" integrity="{{.JSSRI}}" crossorigin="anonymous"></script>
<script>
(function () {
  const wsProto = location.protocol === 'https:' ? 'wss:' : 'ws:';
{{- if .Absolute}}
  const url = {{.Endpoint}};
  const subscriptionUrl = url.replace(/^http/, 'ws');
{{- else}}
  const url = location.protocol + '//' + location.host + {{.Endpoint}};
  const subscriptionUrl = wsProto + '//' + location.host + {{.Endpoint}};
{{- end}}
  const prefix = {{.StoragePrefix}};
  const storage = {
    getItem: (k) => localStorage.getItem(prefix + k),
    setItem: (k, v) => localStorage.setItem(prefix + k, v),
    removeItem: (k) => localStorage.removeItem(prefix + k),
    clear: () => Object.keys(localStorage).filter((k) => k.startsWith(prefix)).forEach((k) => localStorage.removeItem(k)),
    get length() { return Object.keys(localStorage).filter((k) => k.startsWith(prefix)).length; },
  };
  const parse = (text) => {
    if (text === null || text === undefined) { return null; }
    if (text.trim() === '') { return {}; }
    try { const h = JSON.parse(text); return h && typeof h === 'object' ? h : null; } catch (e) { return null; }
  };
  // Back from a sign-in, the session token is in the fragment, which no
  // server or log saw: it becomes the Authorization header, and the
  // fragment leaves the address bar and the history.
  const signedIn = new URLSearchParams(location.hash.slice(1)).get('session');
  if (signedIn) {
    storage.setItem('graphiql:headers', JSON.stringify({ Authorization: 'Bearer ' + signedIn }, null, 2));
    history.replaceState(null, '', location.pathname + location.search);
  }
  // The fetcher carries the headers itself: GraphiQL's introspection does
  // not read the headers editor on its own, and a new fetcher makes it
  // introspect again.
  const initial = parse(storage.getItem('graphiql:headers')) || parse({{.DefaultHeaders}}) || {};
  // Subscriptions go over graphql-ws to the same endpoint; GraphiQL sends
  // the headers as the connection_init payload.
  const newFetcher = (fetcherHeaders) => GraphiQL.createFetcher({ url, subscriptionUrl, headers: fetcherHeaders });
  function Playground() {
    const [fetcher, setFetcher] = React.useState(() => newFetcher(initial));
    const last = React.useRef(JSON.stringify(initial));
    const timer = React.useRef(null);
    const onEditHeaders = React.useCallback((text) => {
      clearTimeout(timer.current);
      timer.current = setTimeout(() => {
        const h = parse(text);
        if (h === null) { return; }
        const norm = JSON.stringify(h);
        if (norm !== last.current) {
          last.current = norm;
          setFetcher(() => newFetcher(h));
        }
      }, 400);
    }, []);
    return React.createElement(GraphiQL, {
      fetcher: fetcher,
      storage: storage,
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: true,
      defaultHeaders: {{.DefaultHeaders}},
      defaultQuery: {{.DefaultQuery}},
      defaultEditorToolsVisibility: 'headers',
      inputValueDeprecation: true,
      onEditHeaders: onEditHeaders,
    });
  }
  ReactDOM.render(React.createElement(Playground), document.getElementById('graphiql'));
})();
</script>
</body>
</html>
`))

// renderPage renders the GraphiQL page for the embedded assets.
func (p *Playground) renderPage(opts Options) []byte {
	a := p.assets
	headers := placeholderHeaders
	lines := ""
	if len(opts.ActAs) > 0 {
		b, _ := json.MarshalIndent(map[string]string{"Authorization": "Bearer " + opts.ActAs[0].Token}, "", "  ")
		headers = string(b)
		var sb strings.Builder
		sb.WriteString("#\n# bothy dev: the Headers tab acts as " + opts.ActAs[0].Handle + ". To act as another\n# principal of the example world, paste its token there:\n")
		for _, pr := range opts.ActAs {
			fmt.Fprintf(&sb, "#   %-8s %-5s %s\n", pr.Handle, pr.Kind, pr.Token)
		}
		lines = sb.String()
	}
	var b bytes.Buffer
	err := pageTemplate.Execute(&b, pageData{
		Title:    Title,
		ReactURL: p.assetURL(reactJS), ReactSRI: a[reactJS].sri,
		ReactDOMURL: p.assetURL(reactDOMJS), ReactDOMSRI: a[reactDOMJS].sri,
		CSSURL: p.assetURL(graphiqlCSS), CSSSRI: a[graphiqlCSS].sri,
		JSURL: p.assetURL(graphiqlJS), JSSRI: a[graphiqlJS].sri,
		Endpoint:       p.endpoint,
		Absolute:       strings.HasPrefix(p.endpoint, "http://") || strings.HasPrefix(p.endpoint, "https://"),
		DefaultHeaders: headers,
		DefaultQuery:   fmt.Sprintf(welcomeQuery, lines),
		StoragePrefix:  "bothy:",
		SignInURL:      opts.SignInURL,
	})
	if err != nil { // cannot happen: fixed template, string fields
		panic(fmt.Sprintf("playground: %v", err))
	}
	return b.Bytes()
}
