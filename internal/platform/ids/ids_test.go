package ids_test

import (
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/platform/ids"
)

func TestValid(t *testing.T) {
	id := ids.New()
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"new id", id, true},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", true},
		{"upper case", strings.ToUpper(id), false},
		{"braces", "{" + id + "}", false},
		{"urn", "urn:uuid:" + id, false},
		{"no hyphens", strings.ReplaceAll(id, "-", ""), false},
		{"hyphen moved", id[:7] + "-" + id[7:8] + id[9:], false},
		{"not hex", "g" + id[1:], false},
		{"array syntax", id[:35] + ",", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids.Valid(tc.in); got != tc.want {
				t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestArrayText(t *testing.T) {
	a, b := ids.New(), "00000000-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		name    string
		in      []string
		want    string
		wantErr bool
	}{
		{"none", nil, "{}", false},
		{"one", []string{a}, "{" + a + "}", false},
		{"some", []string{a, b}, "{" + a + "," + b + "}", false},
		{"not a uuid", []string{a, "not-a-uuid"}, "", true},
		{"array syntax smuggled in", []string{a[:35] + "}"}, "", true},
		{"upper case", []string{strings.ToUpper(a)}, "", true},
		{"empty", []string{""}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ids.ArrayText(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ArrayText = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestArrayParam: canonical ids go out as one array literal; a list with
// any other id goes out as it is, so the statement refuses it as before.
func TestArrayParam(t *testing.T) {
	a, b := "01a22f15-66c5-7d35-8dc6-1e991ea5bc89", "00000000-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		name string
		in   []string
		want any
	}{
		{"none", nil, "{}"},
		{"canonical", []string{a, b}, "{" + a + "," + b + "}"},
		{"not canonical", []string{a, "A-B"}, []string{a, "A-B"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch got := ids.ArrayParam(tc.in).(type) {
			case string:
				if got != tc.want {
					t.Errorf("got %q, want %v", got, tc.want)
				}
			case []string:
				if w, ok := tc.want.([]string); !ok || !slices.Equal(got, w) {
					t.Errorf("got %q, want %v", got, tc.want)
				}
			default:
				t.Errorf("got %T", got)
			}
		})
	}
}
