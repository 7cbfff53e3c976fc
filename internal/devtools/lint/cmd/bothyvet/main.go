// Command bothyvet runs Bothy's own analyzers as a go vet tool, so that
// make test checks the project's rules with vet's per-package cache:
//
//	go build -o bin/bothyvet ./internal/devtools/lint/cmd/bothyvet
//	go vet -vettool=$PWD/bin/bothyvet ./...
//
// The analyzers: levelcompare (no comparison of authorization levels
// outside internal/authz), mutablevar (no exported package-level map or
// slice).
package main

import (
	"golang.org/x/tools/go/analysis/unitchecker"

	"bothy.example.com/bothy/internal/devtools/lint/levelcompare"
	"bothy.example.com/bothy/internal/devtools/lint/mutablevar"
)

func main() { unitchecker.Main(levelcompare.Analyzer, mutablevar.Analyzer) }
