package ids_test

import (
	"testing"

	"github.com/google/uuid"

	"bothy.example.com/bothy/internal/platform/ids"
)

func TestBinary(t *testing.T) {
	id := ids.New()
	for _, tc := range []struct {
		name    string
		in      []string
		wantErr bool
	}{
		{"none", nil, false},
		{"some", []string{id, "00000000-0000-0000-0000-000000000000"}, false},
		{"not a uuid", []string{id, "not-a-uuid"}, true},
		{"empty", []string{""}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ids.Binary(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if len(got) != len(tc.in) {
				t.Fatalf("%d values for %d ids", len(got), len(tc.in))
			}
			for i, b := range got {
				if s := uuid.UUID(b).String(); s != tc.in[i] {
					t.Errorf("value %d is %s, want %s", i, s, tc.in[i])
				}
			}
		})
	}
}
