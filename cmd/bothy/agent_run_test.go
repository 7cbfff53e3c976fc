package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAgentRunRefusesBadModelFlags: every wrong combination of model flags
// is refused with a clear error before anything is contacted.
func TestAgentRunRefusesBadModelFlags(t *testing.T) {
	t.Parallel()
	base := []string{"agent", "run", "--server", "http://127.0.0.1:1", "--token", "bothy_a_x"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--model", "openai"}, "needs --base-url and --model-name"},
		{[]string{"--model", "openai", "--base-url", "http://localhost:11434/v1"}, "needs --base-url and --model-name"},
		{[]string{"--model", "openai", "--model-name", "llama3.2"}, "needs --base-url and --model-name"},
		{[]string{"--model", "openai", "--base-url", "localhost:11434", "--model-name", "llama3.2"}, "absolute http or https URL"},
		{[]string{"--model", "openai", "--base-url", "http://localhost:11434/v1", "--model-name", "llama3.2", "--model-timeout", "0s"}, "--model-timeout must be positive"},
		{[]string{"--model", "openai", "--base-url", "http://localhost:11434/v1", "--model-name", "llama3.2", "--model-max-tokens", "-1"}, "--model-max-tokens at least 0"},
		{[]string{"--base-url", "http://localhost:11434/v1"}, "belong to --model openai"},
		{[]string{"--model", "gpt"}, `--model "gpt" is unknown`},
		{[]string{"--model", "echo", "extra"}, "takes no arguments"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		err := run(t.Context(), append(append([]string{}, base...), c.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// TestAgentRunHelpNamesFlagsAndEnvironment: --help lists the model flags
// and both environment variables.
func TestAgentRunHelpNamesFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"agent", "run", "--help"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	help := errOut.String()
	for _, want := range []string{"--model", "-base-url", "-model-name", "-model-timeout", "-model-max-tokens", "(default 2m0s)", "BOTHY_AGENT_TOKEN", "BOTHY_MODEL_API_KEY", "openai", "-runner", "BOTHY_MCP_TOKEN"} {
		if !strings.Contains(help, want) {
			t.Errorf("agent run --help lacks %q:\n%s", want, help)
		}
	}
}
