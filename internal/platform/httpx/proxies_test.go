package httpx_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/platform/httpx"
)

func TestProxiesClient(t *testing.T) {
	trusted, err := httpx.ParseProxies("10.0.0.0/8, 192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		proxies httpx.Proxies
		remote  string
		xff     string
		want    string
	}{
		{"no proxies trusted: the peer", httpx.Proxies{}, "198.51.100.4:5000", "203.0.113.9", "198.51.100.4"},
		{"untrusted peer: forwarded header ignored", trusted, "198.51.100.4:5000", "203.0.113.9", "198.51.100.4"},
		{"trusted peer: the forwarded client", trusted, "10.1.2.3:5000", "203.0.113.9", "203.0.113.9"},
		{"forged left entries are skipped", trusted, "192.0.2.7:443", "1.2.3.4, 203.0.113.9, 10.9.9.9", "203.0.113.9"},
		{"trusted peer without header", trusted, "10.1.2.3:5000", "", "10.1.2.3"},
		{"all hops trusted: the leftmost", trusted, "10.1.2.3:5000", "10.0.0.5, 10.0.0.6", "10.0.0.5"},
		{"garbage hop ends the walk", trusted, "10.1.2.3:5000", "203.0.113.9, not-an-ip", "10.1.2.3"},
		{"IPv6 peer", trusted, "[2001:db8::1]:80", "203.0.113.9", "2001:db8::1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/graphql", nil)
			r.RemoteAddr = tc.remote
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if got := tc.proxies.Client(r); got != tc.want {
				t.Fatalf("client %q, want %q", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := httpx.ParseProxies(bad); err == nil || !strings.Contains(err.Error(), "http.trusted_proxies") {
			t.Fatalf("ParseProxies(%q) = %v, want an error naming the key", bad, err)
		}
	}
}
