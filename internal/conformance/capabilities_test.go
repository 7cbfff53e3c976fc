package conformance

import (
	"slices"
	"testing"
)

// TestCapabilities: a declaration names known capabilities or none; empty
// is the default (all but files); a scenario applies only when every
// capability it needs is declared.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		decl    string
		want    []string
		wantErr bool
	}{
		{"", []string{capModel, capLive, capTools}, false},
		{"none", nil, false},
		{"model", []string{capModel}, false},
		{"model, live,tools,files", []string{capModel, capLive, capTools, capFiles}, false},
		{"model,telepathy", nil, true},
	} {
		got, err := parseCapabilities(c.decl)
		if (err != nil) != c.wantErr || !slices.Equal(got, c.want) {
			t.Errorf("parseCapabilities(%q) = %v, %v; want %v, error %v", c.decl, got, err, c.want, c.wantErr)
		}
	}
	for _, c := range []struct {
		needs, declared, want []string
	}{
		{nil, nil, nil},
		{[]string{capModel}, nil, []string{capModel}},
		{[]string{capModel, capLive}, []string{capModel}, []string{capLive}},
		{[]string{capModel, capTools}, []string{capModel, capLive, capTools}, nil},
	} {
		if got := missing(c.needs, c.declared); !slices.Equal(got, c.want) {
			t.Errorf("missing(%v, %v) = %v; want %v", c.needs, c.declared, got, c.want)
		}
	}
	// Every scenario's needs are capabilities the kit knows.
	for _, s := range scenarios {
		for _, n := range s.needs {
			if !slices.Contains(Capabilities(), n) {
				t.Errorf("%s needs %q, which is no capability", s.name, n)
			}
		}
	}
}
