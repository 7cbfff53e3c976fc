// Package httptool makes agent tools of HTTP endpoints described in a
// tools file, so that a team connects its ticket system or deploy hook to
// an agent without code (the adapter guide: HTTP tools). Each tool POSTs the
// model's arguments as JSON to its URL, optionally with a secret header
// whose value comes from the environment, and hands the answer back to the
// model. Consequential tools run behind the SDK's gate (agent.RunTool).
//
// A tools file in YAML:
//
//	tools:
//	  - name: file_ticket
//	    description: File a ticket in the team's tracker.
//	    parameters:
//	      type: object
//	      properties:
//	        title: {type: string}
//	      required: [title]
//	    consequential: true
//	    url: https://tracker.example.com/hooks/tickets
//	    secret_header: Authorization
//	    secret_env: TRACKER_TOKEN
//	  - name: search_wiki
//	    description: Search the team's internal wiki.
//	    output_trust: system
//	    url: https://wiki.example.com/hooks/search
//
// What a tool answers is read by the model, so it lowers the run's
// in-play trust (agent.Task.InPlay) to the tool's output_trust:
// unverified unless the file says system.
package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"bothy.example.com/bothy/sdk/agent"
)

// Spec is one tool of a tools file.
type Spec struct {
	// Name is the function name the model calls: 1 to 64 of letters,
	// digits, '_' and '-', unique in the file.
	Name string `yaml:"name"`
	// Description tells the model what the tool does.
	Description string `yaml:"description"`
	// Parameters is the JSON Schema of the arguments (an object schema;
	// default {"type": "object"}).
	Parameters map[string]any `yaml:"parameters"`
	// Consequential marks a tool with effects outside the conversation:
	// with untrusted content in play it runs only after the run's person
	// approved the call.
	Consequential bool `yaml:"consequential"`
	// OutputTrust is how far the tool's answer may be trusted: unverified
	// (the default: a web page, a mailbox or a ticket holds anyone's
	// words) or system, for an internal source the operator trusts as
	// much as the server's own lines. The answer lowers the run's in-play
	// trust to it (agent.Tool.OutputTrust). No other level is taken: no
	// tool's answer may instruct the agent.
	OutputTrust string `yaml:"output_trust"`
	// URL is where the arguments are POSTed (http or https).
	URL string `yaml:"url"`
	// SecretHeader and SecretEnv name a request header and the
	// environment variable its value is read from at load time (both or
	// neither).
	SecretHeader string `yaml:"secret_header"`
	SecretEnv    string `yaml:"secret_env"`
}

// file is the document of a tools file.
type file struct {
	Tools []Spec `yaml:"tools"`
}

// Options adjust the tools made.
type Options struct {
	// Getenv reads the secrets (default os.Getenv).
	Getenv func(string) string
	// Client sends the requests (default: a client with Timeout).
	Client *http.Client
	// Timeout bounds one call (default 30 s).
	Timeout time.Duration
	// MaxAnswerBytes bounds what a tool hands back to the model (default
	// 16 KiB; longer is cut).
	MaxAnswerBytes int
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// outputTrusts are the values output_trust takes, in the REST spelling,
// and the levels they declare; unset is unverified.
var outputTrusts = map[string]agent.Trust{"": agent.TrustUnverified, "unverified": agent.TrustUnverified, "system": agent.TrustSystem}

// Load reads the tools file at path (see Parse).
//
// Errors: the file cannot be read; Parse's errors.
func Load(path string, opts Options) ([]agent.Tool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("httptool: %w", err)
	}
	return Parse(data, opts)
}

// Parse makes the tools of a tools file.
//
// Errors: the document is no tools file (unknown members included), a name
// is invalid or repeated, a URL is not http(s), output_trust is neither
// unverified nor system, a secret names only one of header and variable,
// or its variable is empty.
func Parse(data []byte, opts Options) ([]agent.Tool, error) {
	opts = withDefaults(opts)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("httptool: tools file: %w", err)
	}
	seen := map[string]bool{}
	var out []agent.Tool
	for i, s := range f.Tools {
		where := fmt.Sprintf("httptool: tool %d (%s)", i+1, s.Name)
		if !namePattern.MatchString(s.Name) || seen[s.Name] {
			return nil, fmt.Errorf("%s: name must be 1 to 64 of letters, digits, '_' and '-', unique", where)
		}
		seen[s.Name] = true
		t, err := makeTool(where, s, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// withDefaults fills in the defaults Options documents for the fields
// left unset.
func withDefaults(opts Options) Options {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	if opts.MaxAnswerBytes <= 0 {
		opts.MaxAnswerBytes = 16 << 10
	}
	return opts
}

// makeTool checks the spec s, whose name Parse checked, and makes its
// tool, reading its secret from the environment. where names the tool in
// the errors, which are Parse's.
func makeTool(where string, s Spec, opts Options) (agent.Tool, error) {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return agent.Tool{}, fmt.Errorf("%s: url must be an http or https URL", where)
	}
	trust, ok := outputTrusts[s.OutputTrust]
	if !ok {
		return agent.Tool{}, fmt.Errorf("%s: output_trust must be unverified or system", where)
	}
	if (s.SecretHeader == "") != (s.SecretEnv == "") {
		return agent.Tool{}, fmt.Errorf("%s: secret_header and secret_env go together", where)
	}
	secret := ""
	if s.SecretEnv != "" {
		if secret = opts.Getenv(s.SecretEnv); secret == "" {
			return agent.Tool{}, fmt.Errorf("%s: the variable %s of its secret is empty", where, s.SecretEnv)
		}
	}
	params := s.Parameters
	if params == nil {
		params = map[string]any{"type": "object"}
	}
	schema, err := json.Marshal(params)
	if err != nil {
		return agent.Tool{}, fmt.Errorf("%s: parameters are no JSON schema: %w", where, err)
	}
	call := caller{url: s.URL, header: s.SecretHeader, secret: secret, client: opts.Client, max: opts.MaxAnswerBytes, name: s.Name}
	return agent.Tool{Name: s.Name, Description: s.Description, Parameters: schema, Consequential: s.Consequential,
		OutputTrust: trust, Call: call.call}, nil
}

// caller POSTs one tool's calls.
type caller struct {
	url, header, secret, name string
	client                    *http.Client
	max                       int
}

// errArgs refuses arguments that are no JSON object.
var errArgs = errors.New("httptool: the arguments are no JSON object")

// call POSTs args and returns the answer's body (cut at max bytes).
func (c caller) call(ctx context.Context, args json.RawMessage) (string, error) {
	var obj map[string]any
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return "", errArgs
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(args))
	if err != nil {
		return "", fmt.Errorf("httptool: %s: %w", c.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "bothy-httptool")
	if c.header != "" {
		req.Header.Set(c.header, c.secret)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// The URL only; the error text of net/http holds no secret.
		return "", fmt.Errorf("httptool: %s: request failed: %w", c.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(c.max)+1))
	text := strings.ToValidUTF8(string(body), "")
	if len(body) > c.max {
		text = strings.ToValidUTF8(string(body[:c.max]), "") + " (cut)"
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("httptool: %s: answered %d", c.name, resp.StatusCode)
	}
	return text, nil
}
