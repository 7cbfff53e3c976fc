package mutablevar_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"bothy.example.com/bothy/internal/devtools/lint/mutablevar"
)

// TestAnalyzer runs the analyzer on a fixture that holds every kind of
// variable it must report (the want comments) and those it must leave
// alone: unexported tables, exported values of other types, constants,
// generated and test files.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), mutablevar.Analyzer, "example.com/vars")
}
