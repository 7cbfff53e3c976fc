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

// TestNeeds: Needs answers a scenario's capabilities as the table declares
// them, a copy the caller may change, and false for a name the kit lacks.
func TestNeeds(t *testing.T) {
	t.Parallel()
	if got, ok := Needs("answers_once"); !ok || len(got) != 0 {
		t.Errorf("Needs(answers_once) = %v, %v; want none, true", got, ok)
	}
	got, ok := Needs("streams_live_box")
	if !ok || !slices.Equal(got, []string{capModel, capLive}) {
		t.Fatalf("Needs(streams_live_box) = %v, %v; want [model live], true", got, ok)
	}
	got[0] = capFiles
	if again, _ := Needs("streams_live_box"); again[0] != capModel {
		t.Errorf("changing Needs' answer changed the kit's table: %v", again)
	}
	if got, ok := Needs("answers_twice"); ok || got != nil {
		t.Errorf("Needs(answers_twice) = %v, %v; want nil, false", got, ok)
	}
}
