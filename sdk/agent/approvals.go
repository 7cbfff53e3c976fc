package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ApprovalOption is one answer a person may give to an approval.
type ApprovalOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// ApprovalRequest is what a run asks its person (requestApproval): Title
// for every reader of the thread, Detail (the action and its arguments)
// and Options for the person only, ExpiresIn seconds (0: the server's
// 600).
type ApprovalRequest struct {
	Title     string
	Detail    string
	Options   []ApprovalOption
	ExpiresIn int
}

// Approval is an approval as the run's agent reads it.
type Approval struct {
	ID        string `json:"id"`
	MessageID string `json:"messageId"`
	// State is PENDING, DECIDED, EXPIRED or WITHDRAWN.
	State  string          `json:"state"`
	Option *ApprovalOption `json:"option"`
}

const approvalSel = `id messageId state option { id label }`

const (
	mutationRequestApproval = `mutation RequestApproval($id: ID!, $holder: String, $input: ApprovalRequest!) { requestApproval(runId: $id, holder: $holder, input: $input) { ` + approvalSel + ` } }`
	queryApproval           = `query Approval($id: ID!) { approval(id: $id) { ` + approvalSel + ` } }`
)

// RequestApproval asks the person who triggered the caller's own running
// run runID, as holder: the server posts a card in the run's thread and
// the run waits until the person answers or the approval expires.
//
// Errors: as Do; conflict with reason approval_pending while the run waits
// for another approval, and the refusals of every call on a run.
func (c *Client) RequestApproval(ctx context.Context, runID, holder string, req ApprovalRequest) (Approval, error) {
	in := map[string]any{"title": req.Title, "options": req.Options}
	if req.Detail != "" {
		in["detail"] = req.Detail
	}
	if req.ExpiresIn > 0 {
		in["expiresIn"] = req.ExpiresIn
	}
	vars := map[string]any{"id": runID, "input": in}
	if holder != "" {
		vars["holder"] = holder
	}
	var out struct {
		RequestApproval Approval `json:"requestApproval"`
	}
	err := c.Do(ctx, "RequestApproval", mutationRequestApproval, vars, &out, 0)
	return out.RequestApproval, err
}

// Approval reads approval id (the run's agent reads the option chosen).
//
// Errors: as Do; not_found when the caller may not read it.
func (c *Client) Approval(ctx context.Context, id string) (Approval, error) {
	var out struct {
		Approval *Approval `json:"approval"`
	}
	if err := c.Do(ctx, "Approval", queryApproval, map[string]any{"id": id}, &out, 0); err != nil {
		return Approval{}, err
	}
	if out.Approval == nil {
		return Approval{}, notFound("Approval")
	}
	return *out.Approval, nil
}

// ErrNoApprover is returned by Ask when ctx belongs to no run of an
// adapter (a model called outside one).
var ErrNoApprover = errors.New("agent: no run to ask an approval for")

// approver asks the person of one run and hands it the decisions the
// adapter's stream brings (agent.approval_decided).
type approver struct {
	client *Client
	runID  string
	holder string
	mu     sync.Mutex
	wait   map[string]chan Approval
}

type approverKey struct{}

func newApprover(c *Client, runID, holder string) *approver {
	return &approver{client: c, runID: runID, holder: holder, wait: map[string]chan Approval{}}
}

func (a *approver) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, approverKey{}, a)
}

// decided hands the decision of approval id to its waiter.
func (a *approver) decided(id string, d Approval) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.wait[id]; w != nil {
		select {
		case w <- d:
		default:
		}
	}
}

// approvalPoll is how often a waiting Ask reads its approval besides the
// stream's events (a lost event costs at most this long).
var approvalPoll = 5 * time.Second

// Ask asks the person who triggered the run of ctx (an adapter's model
// context) with req and waits for the answer: the option chosen, or ""
// when the approval expired or was withdrawn. The run waits meanwhile
// (its stall timer paused); the adapter keeps its lease.
//
// Errors: ErrNoApprover outside a run; the server's refusal of the
// request; ctx's error when the run is cancelled while waiting.
func Ask(ctx context.Context, req ApprovalRequest) (string, error) {
	a, ok := ctx.Value(approverKey{}).(*approver)
	if !ok {
		return "", ErrNoApprover
	}
	ap, err := a.client.RequestApproval(ctx, a.runID, a.holder, req)
	if err != nil {
		return "", err
	}
	w := make(chan Approval, 1)
	a.mu.Lock()
	a.wait[ap.ID] = w
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.wait, ap.ID)
		a.mu.Unlock()
	}()
	tick := time.NewTicker(approvalPoll)
	defer tick.Stop()
	for {
		select {
		case d := <-w:
			return optionOf(d), nil
		case <-tick.C:
			if cur, err := a.client.Approval(ctx, ap.ID); err == nil && cur.State != "PENDING" {
				return optionOf(cur), nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

func optionOf(a Approval) string {
	if a.State == "DECIDED" && a.Option != nil {
		return a.Option.ID
	}
	return ""
}

// Tool is a function a model may call.
type Tool struct {
	// Name is the function name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage
	// Consequential marks a tool with effects outside the conversation
	// (filing a ticket, deploying, sending mail): it runs without asking
	// only while the run's in-play trust is trusted (see RunTool).
	Consequential bool
	// OutputTrust is how far what the tool returns may be trusted. The
	// model reads it, so it lowers the run's in-play trust (Task.InPlay)
	// like an element of the context. The zero value is UNVERIFIED: a web
	// page, a mailbox or a ticket's text may hold anyone's words. Declare
	// SYSTEM only for an internal source the operator trusts as much as
	// the server's own lines; a level this code does not know counts as
	// UNVERIFIED.
	OutputTrust Trust
	// Call runs the tool with the model's arguments and returns what the
	// model reads back; nil for a tool the backend only declares.
	Call func(ctx context.Context, args json.RawMessage) (string, error)
}

// The options of the approval RunTool asks for.
const (
	OptionApprove = "approve"
	OptionDeny    = "deny"
)

// ErrNotApproved is what RunTool returns, together with the text the
// model reads back, when the person who asked did not approve a
// consequential call (they denied it, or the approval expired or was
// withdrawn): the tool did not run. A backend hands the text to the model
// like any tool answer and logs the call as denied.
var ErrNotApproved = errors.New("agent: the person who asked did not approve the call")

// RunTool runs tool t with args for the model of ctx's run, behind the
// approval gate (the trust design: approvals). The run's in-play trust
// (TaskFrom(ctx).InPlay) decides: a read-only tool runs; a consequential
// one runs at once only when ToolsAllowed(in play) and no other person's
// request (an AUTHORIZED element) is in play, and otherwise only
// after the run's person approved this call (Ask, with a card naming the
// untrusted inputs in play, the tool and its arguments). Whatever the
// tool returns then lowers the in-play trust by t.OutputTrust, because
// the model reads it next.
//
// Outside a run (ctx has no Task) nothing is on record of what the model
// read, so in play is UNVERIFIED: read-only tools run, consequential ones
// need an approval that nobody can give (ErrNoApprover). Code that calls
// RunTool on its own puts a Task on ctx (WithTask, NewTask) to keep the
// rule for its conversation.
//
// Errors: t has no Call; ErrNotApproved (with the model's text) when the
// person did not approve; Ask's errors (no run to ask for, the run was
// cancelled, the server refused the request); the tool's own error.
func RunTool(ctx context.Context, t Tool, args json.RawMessage) (string, error) {
	if t.Call == nil {
		return "", fmt.Errorf("agent: tool %s cannot be called", t.Name)
	}
	task := TaskFrom(ctx)
	if t.Consequential && !task.toolsAllowed() {
		opt, err := Ask(ctx, approvalFor(t, args, task.untrustedInputs()))
		if err != nil {
			return "", err
		}
		if opt != OptionApprove {
			return "The person who asked did not approve " + t.Name + "; it was not run.", ErrNotApproved
		}
	}
	out, err := t.Call(ctx, args)
	// Lowered even when the call failed: a backend may show part of it,
	// and lowering too far only costs a question.
	task.lowerTool(t)
	return out, err
}

// approvalFor is the card RunTool asks with: a short title every reader
// of the thread sees, and for the person a detail naming the untrusted
// inputs in play (inputs; a generic line when none is on record), then the
// tool and its arguments, cut to what the server takes.
func approvalFor(t Tool, args json.RawMessage, inputs []string) ApprovalRequest {
	why := inputUnknown
	if len(inputs) > 0 {
		why = strings.Join(inputs, ", ")
	}
	return ApprovalRequest{
		Title:   cutBytes("Run "+t.Name+"?", 200),
		Detail:  cutBytes("The agent wants to call "+t.Name+" "+why+". Arguments:\n"+string(args), 8000),
		Options: []ApprovalOption{{ID: OptionApprove, Label: "Approve"}, {ID: OptionDeny, Label: "Deny"}},
	}
}
