package levelcompare_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"bothy.example.com/bothy/internal/devtools/lint/levelcompare"
)

// TestAnalyzer runs the analyzer on a fixture (testdata/src) that holds
// every kind of comparison it must report (the want comments) and those it
// must leave alone: the level package's own, data, other types, test and
// generated files. So the rule cannot pass by finding nothing.
func TestAnalyzer(t *testing.T) {
	if err := levelcompare.Analyzer.Flags.Set("levelpkg", "example.com/levelcheck/authz"); err != nil {
		t.Fatal(err)
	}
	defer levelcompare.Analyzer.Flags.Set("levelpkg", levelcompare.LevelPackage)
	analysistest.Run(t, analysistest.TestData(), levelcompare.Analyzer, "example.com/levelcheck/authz", "example.com/levelcheck/bad")
}
