package server

import "testing"

// TestMessageHead: the type and id of a transport message are read from
// its fields, whatever the struct's name; other values are not messages.
func TestMessageHead(t *testing.T) {
	t.Parallel()
	type kind string
	type transportMessage struct {
		Payload []byte
		ID      string
		Type    kind
	}
	if typ, id, ok := messageHead(&transportMessage{ID: "s1", Type: "next"}); !ok || typ != "next" || id != "s1" {
		t.Fatalf("a pointer to a message: %q %q %v", typ, id, ok)
	}
	if typ, id, ok := messageHead(wsMessage{ID: "s2", Type: "complete"}); !ok || typ != "complete" || id != "s2" {
		t.Fatalf("a message value: %q %q %v", typ, id, ok)
	}
	for _, v := range []any{map[string]string{"type": "next"}, "next", struct{ Type int }{1}, nil} {
		if _, _, ok := messageHead(v); ok {
			t.Fatalf("%#v read as a message", v)
		}
	}
}
