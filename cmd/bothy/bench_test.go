package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestBenchRefusesBadFlags: a mistake in the command line of bothy bench
// is a usage error (exit status 2) that says what is wrong, before any
// server starts.
func TestBenchRefusesBadFlags(t *testing.T) {
	// Not parallel: it sets the model variables, which bench reads.
	t.Setenv(modelBaseURLEnv, "")
	t.Setenv(modelNameEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "speed"}, `unknown benchmark "speed"`},
		{[]string{"bench", "injection", "--only", "person,files"}, `no origin "files"`},
		{[]string{"bench", "injection", "--model", "openai"}, "--model openai needs --base-url and --model-name"},
		{[]string{"bench", "injection", "--model", "anthropic"}, "--model anthropic needs --model-name"},
		{[]string{"bench", "injection", "--model", "echo"}, `--model "echo" is unknown`},
		{[]string{"bench", "injection", "--base-url", "http://localhost:11434/v1"}, "belong to --model openai and anthropic"},
		{[]string{"bench", "injection", "--cases", "-1"}, "--cases must be at least 0"},
		{[]string{"bench", "injection", "--parallel", "0"}, "--parallel at least 1"},
		{[]string{"bench", "injection", "extra"}, "takes no arguments"},
		{[]string{"bench", "injection", "--nope"}, "flag provided but not defined"},
		{[]string{"bench", "capacity"}, "bench capacity needs --server"},
		{[]string{"bench", "capacity", "--server", "http://127.0.0.1:1", "--base", "2,40"}, "want MESSAGES_PER_SECOND,LISTENERS,RUNS_PER_SECOND"},
		{[]string{"bench", "capacity", "--server", "http://127.0.0.1:1", "--base", "0,40,1"}, "messages above 0"},
		{[]string{"bench", "capacity", "--server", "http://127.0.0.1:1", "--step", "0s"}, "--step and --p99 above 0"},
		{[]string{"bench", "capacity", "extra"}, "takes no arguments"},
	} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), c.args, &out, &errOut)
		var usage usageError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &usage) {
			t.Errorf("%v: error %v, want a usage error containing %q", c.args, err, c.want)
		}
	}
}
