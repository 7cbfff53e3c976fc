// Package runner hands each run of an agent to a command: any MCP-capable
// agent runtime configured with Bothy's /mcp answers the run through its
// tools, on a run token that reaches that run alone (the MCP guide: the runner).
//
// The adapter of [bothy.example.com/bothy/sdk/agent] does everything around it: the event stream,
// the claim, the lease (renewed while the command runs), fencing,
// follow-ups and the end. For each run the Handler mints a run token for
// the adapter's holder and starts the command once, with
//
//	BOTHY_MCP_URL    the server's /mcp
//	BOTHY_MCP_TOKEN  the run token
//	BOTHY_RUN_ID     the run's id
//
// and the trust-aware prompt on its standard input (the request of the
// person who asked, every other message fenced as data with its trust).
// The command reads the context and answers with the tools
// (read_run_context, post_answer, ...). When it exits 0 having answered,
// the run is finished completed; when it fails, or exits without an
// answer, the run fails (runner_failed, runner_no_answer). When the run is
// cancelled, its person loses the right to ask or another process takes
// it over, the command is killed (its whole process group).
//
// The server cannot see the command's own tools: whether an answer was
// derived from untrusted text the command read beyond the context (a web
// page, a mailbox) rests on the command declaring it with post_answer's
// input_trust (the MCP guide, Provenance).
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"bothy.example.com/bothy/sdk/agent"
)

// Config is what a runner needs.
type Config struct {
	// Command is run by /bin/sh -c once per run.
	Command string
	// Client is the agent's client (its own token): it mints the run
	// tokens and reads whether the run was answered.
	Client *agent.Client
	// Server is the server's base URL; BOTHY_MCP_URL is Server + "/mcp".
	Server string
	// Holder is the adapter's holder (agent.Config.Holder): the run token
	// acts as it, under the adapter's claim.
	Holder string
	// Output receives the command's standard output and error (the
	// runner's standard error when nil).
	Output io.Writer
	// Env is the environment the command starts with besides the three
	// variables (os.Environ() when nil).
	Env []string
	// KillGrace is how long a killed command's process group has between
	// SIGTERM and SIGKILL (2 s when zero).
	KillGrace time.Duration
}

// Reasons a run fails with when its command did not answer it.
const (
	// ReasonFailed: the command exited non-zero or could not start.
	ReasonFailed = "runner_failed"
	// ReasonNoAnswer: the command exited 0 without an answer in the run.
	ReasonNoAnswer = "runner_no_answer"
)

// Handler returns the agent.Handler that hands each run to cfg.Command.
//
// Errors (of the handler, failing the run): a run token refused (the
// claim lost, the run ended), the command failing or not answering.
func Handler(cfg Config) (agent.Handler, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return nil, errors.New("runner: Config needs a Command")
	}
	if cfg.Client == nil || cfg.Holder == "" || cfg.Server == "" {
		return nil, errors.New("runner: Config needs a Client, a Server and the adapter's Holder")
	}
	if cfg.Output == nil {
		cfg.Output = os.Stderr
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	mcpURL := strings.TrimRight(cfg.Server, "/") + "/mcp"
	return func(ctx context.Context, t *agent.Task) error {
		runID := t.RunID()
		tok, err := cfg.Client.CreateRunToken(ctx, runID, cfg.Holder)
		if err != nil {
			return fmt.Errorf("runner: run token: %w", err)
		}
		p := t.Prompt()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cfg.Command)
		cmd.Env = append(withoutOurs(cfg.Env), "BOTHY_MCP_URL="+mcpURL, "BOTHY_MCP_TOKEN="+tok, "BOTHY_RUN_ID="+runID)
		cmd.Stdin = bytes.NewReader([]byte(p.System + "\n\n" + p.User + "\n"))
		cmd.Stdout, cmd.Stderr = cfg.Output, cfg.Output
		// The command may start children of its own (an agent CLI and its
		// tools): the whole group goes when the run is taken away.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
		cmd.WaitDelay = cfg.KillGrace
		runErr := cmd.Run()
		if cmd.Process != nil {
			// Whatever of the group is left once the command itself ended.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if runErr != nil {
			t.Fail(ReasonFailed)
			return nil
		}
		r, err := cfg.Client.Run(ctx, runID)
		if err != nil {
			return fmt.Errorf("runner: read the run: %w", err)
		}
		if len(r.Answers) == 0 {
			t.Fail(ReasonNoAnswer)
			return nil
		}
		return agent.ErrAnswered
	}, nil
}

// withoutOurs drops the variables the runner sets (and the agent's own
// token, which the command must not hold) from env.
func withoutOurs(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "BOTHY_MCP_URL", "BOTHY_MCP_TOKEN", "BOTHY_RUN_ID", "BOTHY_AGENT_TOKEN":
			continue
		}
		out = append(out, kv)
	}
	return out
}
