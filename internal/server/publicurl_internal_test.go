package server

import "testing"

// TestCheckPublicURL: http.public_url is empty or an absolute http(s) URL
// with a host and nothing after it; anything else stops the start.
func TestCheckPublicURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"": true, "https://chat.example.com": true, "https://chat.example.com/": true, "http://127.0.0.1:8080": true,
		"chat.example.com": false, "ftp://chat.example.com": false, "https://": false, "https://chat.example.com/bothy": false,
		"https://chat.example.com/?a=1": false, "https://chat.example.com/#x": false, "https://alex:pw@chat.example.com": false,
	} {
		if err := checkPublicURL(raw); (err == nil) != ok {
			t.Errorf("checkPublicURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}
