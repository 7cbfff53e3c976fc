package playground

import (
	"bytes"
	"strings"
	"testing"
)

// TestPageRunsSubscriptions: the page hands GraphiQL a subscription URL on
// this server next to the HTTP one, and the embedded GraphiQL build holds
// the graphql-ws client (graphql-transport-ws protocol) that runs
// subscriptions with it, so no other file or host is needed. GraphiQL
// sends the headers tab (Authorization) as the connection_init payload.
func TestPageRunsSubscriptions(t *testing.T) {
	p := embedded(t)
	_, page := get(t, p, "/")
	for _, want := range []string{
		`const subscriptionUrl = wsProto + '//' + location.host + "/graphql";`,
		`GraphiQL.createFetcher({ url, subscriptionUrl, headers: fetcherHeaders })`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q:\n%s", want, page)
		}
	}
	js := p.assets[graphiqlJS].data
	for _, want := range []string{"graphql-transport-ws", "connection_init", "connectionParams"} {
		if !bytes.Contains(js, []byte(want)) {
			t.Fatalf("the embedded %s holds no graphql-ws client (%q missing)", graphiqlJS, want)
		}
	}
	// Same-host WebSocket connections are allowed by 'self' (CSP Level 3).
	if !strings.Contains(p.pageCSP, "connect-src 'self'") {
		t.Fatalf("CSP %s", p.pageCSP)
	}
}
