// Package authz owns rights: grants, the effective level of a principal on
// a resource, the rule table (Table, Decide) and its doors: Authorize, which
// decides every request (rate-limit token, decision, audit), Filter for the
// items of lists, and Allowed for the questions the runtime asks itself
// (who may trigger, who may read). No rights logic exists outside this
// package: the analyzer internal/devtools/lint/levelcompare (go vet in make test)
// fails when another package compares levels.
package authz

import (
	"maps"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/ratelimit"
)

// Level is a rights level, ordered None < Read < Write < Trigger.
type Level int

// The levels.
const (
	None Level = iota
	Read
	Write
	Trigger
)

// String renders the level as stored and shown (lowercase).
func (l Level) String() string {
	switch l {
	case Read:
		return "read"
	case Write:
		return "write"
	case Trigger:
		return "trigger"
	default:
		return "none"
	}
}

// ParseLevel reads a stored level; anything unknown is None.
func ParseLevel(s string) Level {
	switch s {
	case "read":
		return Read
	case "write":
		return Write
	case "trigger":
		return Trigger
	default:
		return None
	}
}

// ResourceKind names what a resource is.
type ResourceKind string

// The resource kinds.
const (
	KindSpace   ResourceKind = "space"
	KindChannel ResourceKind = "channel"
	KindThread  ResourceKind = "thread"
	KindMessage ResourceKind = "message"
	KindRun     ResourceKind = "run"
	KindGrant   ResourceKind = "grant"
	KindAgent   ResourceKind = "agent_stream"
	// The instance-level kinds of administration: principals, their
	// tokens, groups, and the instance itself (for creates without a
	// parent).
	KindPrincipal ResourceKind = "principal"
	KindToken     ResourceKind = "token"
	KindGroup     ResourceKind = "group"
	KindInstance  ResourceKind = "instance"
	// KindFile is an uploaded file: before it is attached, its uploader's
	// own (Global, Private, OwnerID the uploader); afterwards it lives
	// where its message does (the message's path).
	KindFile ResourceKind = "file"
)

// Path locates a resource: where it lives and the facts the rules need.
// Sources fill it; Exists is false for an unknown resource.
type Path struct {
	Exists bool
	Kind   ResourceKind
	ID     string
	// SpaceID is always set for an existing resource; ChannelID for
	// channels and everything in them; ThreadID for threads and below.
	SpaceID, ChannelID, ThreadID string
	// ChannelOperator is the effective operator of the channel now;
	// ThreadOperator the fixed operator of the thread (empty for main).
	ChannelOperator, ThreadOperator string
	ChannelArchived, SpaceArchived  bool
	// AuthorID is the author of a message; OwnerID the principal an
	// agent-self action is reserved to (a run's agent), or the principal a
	// self-service action is reserved to (a principal itself, a token's
	// holder).
	AuthorID, OwnerID string
	// Global marks an instance-level resource (the instance, a principal, a
	// group, a token): rights on it come from no grant. Every active
	// principal may see it, owners hold every right on it.
	Global bool
	// Private narrows Global: only OwnerID and owners see the resource (a
	// token is nobody else's business).
	Private bool
}

// Archived reports whether the archive cap applies.
func (p Path) Archived() bool { return p.ChannelArchived || p.SpaceArchived }

// Actor is the principal a decision is about.
type Actor struct {
	ID     string
	Kind   identity.Kind
	Active bool
	Owner  bool
	// Run and RunThread narrow an actor authenticated by a run token to
	// the run-bound actions of that run and the reads of its thread
	// (RunBound); empty for every other token.
	Run, RunThread string
}

// ActorOf returns the Actor view of p.
func ActorOf(p identity.Principal) Actor {
	return Actor{ID: p.ID, Kind: p.Kind, Active: p.Active(), Owner: p.Owner(), Run: p.RunID, RunThread: p.RunThreadID}
}

// RunBound are the actions a run token may take, on its run (the run
// actions) or its thread (reads, and the run's answer: the service
// refuses any other message, messaging.ErrRunTokenScope): what a runner's
// child needs to read the context and answer, and nothing that reaches
// beyond the run (no claim, no stream, no token, no other thread).
var runBound = map[Action]bool{
	RunRead: true, RunContextRead: true, RunRenew: true, RunLiveUpdate: true, RunApprovalRequest: true,
	RunAwaitInput: true, RunFinish: true, ThreadRead: true, MessageRead: true, MessageCreate: true, ViewerRead: true,
	FileRead: true,
}

// runTokenScope decides the narrowing of a run token (a.Run set) before
// the rules: a resource of the chat outside its run and thread is
// refused like a missing one (not_found), so a run token learns nothing
// of other runs; an action outside RunBound is forbidden. ok is true
// when the rules decide on.
func runTokenScope(action Action, a Actor, p Path) (Decision, bool) {
	switch {
	case inRunScope(action, a, p):
	case chatKind(p.Kind):
		return deny(problem.NotFound, ReasonNoGrant, None), false
	default:
		return deny(problem.Forbidden, ReasonRunToken, None), false
	}
	if !runBound[action] {
		return deny(problem.Forbidden, ReasonRunToken, None), false
	}
	return Decision{}, true
}

// inRunScope reports whether p lies within the reach of a run token: its
// run, the thread of its run and what lives in that thread, and, for
// ViewerRead, the token's own principal.
func inRunScope(action Action, a Actor, p Path) bool {
	inThread := p.Kind == KindThread || p.Kind == KindMessage || p.Kind == KindFile
	return p.Kind == KindRun && p.ID == a.Run ||
		inThread && p.ThreadID == a.RunThread ||
		p.Kind == KindPrincipal && p.ID == a.ID && action == ViewerRead
}

// chatKind reports whether k is a kind of resource of the chat (one that
// lives in a space); a run token is told such a resource outside its run
// is missing rather than forbidden.
func chatKind(k ResourceKind) bool {
	switch k {
	case KindSpace, KindChannel, KindThread, KindMessage, KindRun, KindGrant, KindFile:
		return true
	default:
		return false
	}
}

// EffectiveLevel is the level of actor on the resource at p before the
// archive cap, given grant, the highest level of the actor's live grants
// (direct or through a group) on the channel or space of p
// (docs/design/rights.md#effective-level, steps 1 to 6).
func EffectiveLevel(a Actor, grant Level, p Path) Level {
	if !a.Active {
		return None
	}
	if p.Global {
		return globalLevel(a, p)
	}
	l := grant
	if a.Owner {
		l = Trigger
	}
	if a.Kind == identity.KindAgent {
		l = operatorLevel(a, l, p)
	}
	if a.Kind != identity.KindUser && l > Write {
		l = Write // only humans trigger (docs/design/rights.md#levels)
	}
	return l
}

// globalLevel is the level of an active actor on an instance-level
// resource, which no grant reaches: owners hold every right, a private
// resource is its owner's alone, every other one is readable.
func globalLevel(a Actor, p Path) Level {
	switch {
	case a.Owner:
		return Trigger
	case p.Private && a.ID != p.OwnerID:
		return None
	default:
		return Read
	}
}

// operatorLevel raises l, the level of the agent a at p, to write where
// the operator rule gives it: the rule follows the operator, so only the
// channel's operator of now and the fixed operator of the thread get
// write.
func operatorLevel(a Actor, l Level, p Path) Level {
	if p.ChannelID != "" && p.ChannelOperator == a.ID && l < Write {
		l = Write
	}
	if p.ThreadID != "" && p.ThreadOperator == a.ID && l < Write {
		l = Write
	}
	return l
}

// Capped applies the archive cap: in an archived channel or space nobody
// exceeds read.
func Capped(l Level, p Path) Level {
	if p.Archived() && l > Read {
		return Read
	}
	return l
}

// Action is an action of the action table
// (docs/design/rights.md#action-table).
type Action string

// The actions.
const (
	ThreadRead     Action = "thread.read"
	MessageRead    Action = "message.read"
	RunRead        Action = "run.read"
	ChannelRead    Action = "channel.read"
	SpaceRead      Action = "space.read"
	MessageCreate  Action = "message.create"
	MessageDelete  Action = "message.delete"
	ThreadCreate   Action = "thread.create"
	ThreadClose    Action = "thread.close"
	ThreadMove     Action = "thread.move"
	RunContextRead Action = "run.context.read"
	RunStart       Action = "run.start"
	RunRenew       Action = "run.renew"
	// RunTokenCreate mints a run token for the run's holder (the agent
	// itself; audited).
	RunTokenCreate     Action = "run.token.create"
	RunLiveUpdate      Action = "run.live.update"
	RunApprovalRequest Action = "run.approval.request"
	// ApprovalRespond is a person's answer to an approval: trigger on the
	// run's channel (the service also requires the approval's person).
	ApprovalRespond      Action = "approval.respond"
	RunAwaitInput        Action = "run.await_input"
	RunFinish            Action = "run.finish"
	RunCancel            Action = "run.cancel"
	AgentEventsPoll      Action = "agent.events.poll"
	AgentEventsAck       Action = "agent.events.ack"
	AgentSessionReset    Action = "agent.session.reset"
	AgentSessionBind     Action = "agent.session.bind"
	GrantCreate          Action = "grant.create"
	GrantRevoke          Action = "grant.revoke"
	ChannelOperatorSet   Action = "channel.operator.set"
	ChannelSwitchesPatch Action = "channel.switches.update"
	ChannelArchive       Action = "channel.archive"
	SpaceArchive         Action = "space.archive"
	EventsList           Action = "events.list"
	// ChannelsList lists the channels the caller may read (across the
	// instance, with a Scope); RunsList the runs the caller started (each
	// kept when its thread is readable, decided in a batch).
	ChannelsList Action = "channel.list"
	RunsList     Action = "run.list"
	// Administration (owners only, audited): people, agents, apps, tokens,
	// groups, spaces and channels.
	PrincipalCreate   Action = "principal.create"
	PrincipalUpdate   Action = "principal.update"
	PrincipalList     Action = "principal.list"
	TokenCreate       Action = "token.create"
	TokenList         Action = "token.list"
	TokenRevoke       Action = "token.revoke"
	GroupCreate       Action = "group.create"
	GroupRead         Action = "group.read"
	GroupUpdate       Action = "group.update"
	GroupDelete       Action = "group.delete"
	GroupMemberAdd    Action = "group.member.add"
	GroupMemberRemove Action = "group.member.remove"
	SpaceCreate       Action = "space.create"
	SpaceUpdate       Action = "space.update"
	SpaceUnarchive    Action = "space.unarchive"
	ChannelCreate     Action = "channel.create"
	ChannelUpdate     Action = "channel.update"
	ChannelUnarchive  Action = "channel.unarchive"
	// AuditList reads the audit log (owners only; audited itself).
	AuditList Action = "audit.list"
	// ViewerRead reads the caller itself (target Own(KindPrincipal, id)).
	ViewerRead Action = "viewer.read"
	// MessageTrigger is a person's message triggering an agent run: trigger
	// on the thread. The runtime asks it (Allowed) of a message's writer,
	// and of the authors of a run context's elements for their trust; no
	// request names it.
	MessageTrigger Action = "message.trigger"
	// FileUpload stores a file of the caller's (rate class rl.file;
	// audited). FileRead reads a file's metadata and bytes: its uploader
	// before it is attached, whoever may read its message afterwards.
	FileUpload Action = "file.upload"
	FileRead   Action = "file.read"
	// FileReadByOwner is what an owner's allowed file.read is audited as
	// (no request names it; its row is file.read's with allows audited).
	FileReadByOwner Action = "file.read.owner"
	// FileDelete is the files sweep's deletion of a file whose time is up
	// (files.orphan_ttl, files.deleted_ttl): no request and no principal
	// do it, so no door decides it; the server records it
	// (Service.AuditSystem) under the operator, whose retention settings
	// it applies.
	FileDelete Action = "file.delete"
	// PrincipalCapabilities sets an agent's owner-granted capabilities
	// (files_out; owners only, audited).
	PrincipalCapabilities Action = "principal.capabilities"
)

type requirement int

const (
	needRead requirement = iota
	needWrite
	needTrigger
	needOwner
	needAgentSelf
	needAuthorOrOwner
	needTriggerOrAgentSelf
	needAgent
	// needSelfOrOwner: a person acting on what is theirs (OwnerID), or an
	// owner acting on anybody's.
	needSelfOrOwner
	// needFileRead: read where the file lives; an unattached file is its
	// uploader's alone (not even an owner's), and anyone else is answered
	// as for a missing file.
	needFileRead
)

// Spec is one row of the action table: what an action requires, its
// rate-limit class and whether an allow is audited.
type Spec struct {
	need       requirement
	Class      ratelimit.Class
	AuditAllow bool
}

// Table is the action table of docs/design/rights.md#action-table (plus the
// reads of spaces, channels and the event list, which are read actions).
var table = map[Action]Spec{
	ThreadRead:            {needRead, ratelimit.Read, false},
	MessageRead:           {needRead, ratelimit.Read, false},
	RunRead:               {needRead, ratelimit.Read, false},
	ChannelRead:           {needRead, ratelimit.Read, false},
	SpaceRead:             {needRead, ratelimit.Read, false},
	EventsList:            {needRead, ratelimit.Read, false},
	ChannelsList:          {needRead, ratelimit.Read, false},
	RunsList:              {needRead, ratelimit.Read, false},
	ViewerRead:            {needRead, ratelimit.Read, false},
	MessageTrigger:        {needTrigger, ratelimit.Message, false},
	MessageCreate:         {needWrite, ratelimit.Message, false},
	MessageDelete:         {needAuthorOrOwner, ratelimit.Message, false},
	ThreadCreate:          {needWrite, ratelimit.Message, false},
	ThreadClose:           {needWrite, ratelimit.Message, false},
	ThreadMove:            {needTrigger, ratelimit.Message, true},
	RunContextRead:        {needAgentSelf, ratelimit.AgentRuntime, false},
	RunStart:              {needAgentSelf, ratelimit.AgentRuntime, false},
	RunRenew:              {needAgentSelf, ratelimit.AgentRuntime, false},
	RunTokenCreate:        {needAgentSelf, ratelimit.AgentRuntime, true},
	RunLiveUpdate:         {needAgentSelf, ratelimit.AgentRuntime, false},
	RunApprovalRequest:    {needAgentSelf, ratelimit.AgentRuntime, false},
	ApprovalRespond:       {needTrigger, ratelimit.Message, true},
	RunAwaitInput:         {needAgentSelf, ratelimit.AgentRuntime, false},
	RunFinish:             {needAgentSelf, ratelimit.AgentRuntime, false},
	RunCancel:             {needTriggerOrAgentSelf, ratelimit.AgentRuntime, false},
	AgentEventsPoll:       {needAgent, ratelimit.AgentRuntime, false},
	AgentEventsAck:        {needAgent, ratelimit.AgentRuntime, false},
	AgentSessionReset:     {needTrigger, ratelimit.Message, false},
	AgentSessionBind:      {needTrigger, ratelimit.Message, false},
	GrantCreate:           {needOwner, ratelimit.Admin, true},
	GrantRevoke:           {needOwner, ratelimit.Admin, true},
	ChannelOperatorSet:    {needOwner, ratelimit.Admin, true},
	ChannelSwitchesPatch:  {needOwner, ratelimit.Admin, true},
	ChannelArchive:        {needOwner, ratelimit.Admin, true},
	SpaceArchive:          {needOwner, ratelimit.Admin, true},
	PrincipalCreate:       {needOwner, ratelimit.Admin, true},
	PrincipalUpdate:       {needOwner, ratelimit.Admin, true},
	PrincipalList:         {needOwner, ratelimit.Admin, true},
	TokenCreate:           {needSelfOrOwner, ratelimit.Admin, true},
	TokenList:             {needSelfOrOwner, ratelimit.Admin, true},
	TokenRevoke:           {needSelfOrOwner, ratelimit.Admin, true},
	GroupCreate:           {needOwner, ratelimit.Admin, true},
	GroupRead:             {needOwner, ratelimit.Admin, true},
	GroupUpdate:           {needOwner, ratelimit.Admin, true},
	GroupDelete:           {needOwner, ratelimit.Admin, true},
	GroupMemberAdd:        {needOwner, ratelimit.Admin, true},
	GroupMemberRemove:     {needOwner, ratelimit.Admin, true},
	SpaceCreate:           {needOwner, ratelimit.Admin, true},
	SpaceUpdate:           {needOwner, ratelimit.Admin, true},
	SpaceUnarchive:        {needOwner, ratelimit.Admin, true},
	ChannelCreate:         {needOwner, ratelimit.Admin, true},
	ChannelUpdate:         {needOwner, ratelimit.Admin, true},
	ChannelUnarchive:      {needOwner, ratelimit.Admin, true},
	AuditList:             {needOwner, ratelimit.Admin, true},
	FileUpload:            {needRead, ratelimit.File, true},
	FileRead:              {needFileRead, ratelimit.Read, false},
	FileReadByOwner:       {needFileRead, ratelimit.Read, true},
	FileDelete:            {needOwner, ratelimit.Admin, true},
	PrincipalCapabilities: {needOwner, ratelimit.Admin, true},
}

// scoped are the list actions across the instance: an allow carries the
// reader's Scope, the predicate the list selects by.
var scoped = map[Action]bool{EventsList: true, ChannelsList: true}

// Reasons of denials (audit and body).
const (
	ReasonNoGrant = "no_grant"
	// ReasonRunToken refuses a run token an action outside its run's
	// operations (RunBound).
	ReasonRunToken        = "run_token_scope"
	ReasonNotSelf         = "not_self"
	ReasonSubjectKind     = "subject_kind_not_allowed"
	ReasonChannelArchived = "channel_archived"
	ReasonLevel           = "level_insufficient"
	ReasonNotFound        = "not_found"
)

// Decision is the answer of Authorize.
type Decision struct {
	Allow bool
	// Code and Reason describe a denial. A missing resource has reason
	// not_found for the audit, but its error carries no reason, exactly like
	// a resource without read (no_grant), so the two are indistinguishable.
	Code   problem.Code
	Reason string
	// Level is the capped effective level that was decided on.
	Level Level
	// Grant is the grant level the decision read (for decisions of further
	// actions on the same path in the same request: Known).
	Grant Level
	// Scope is where the reader may read, set on the allow of a list action
	// across the instance (events.list) by Authorize.
	Scope *Scope
}

// Err returns the error to answer for a denial (nil when allowed). Both
// 404 cases give the same bare not_found.
func (d Decision) Err() error {
	if d.Allow {
		return nil
	}
	if d.Code == problem.NotFound {
		return problem.New(problem.NotFound, "")
	}
	return problem.New(d.Code, d.Reason)
}

func deny(code problem.Code, reason string, l Level) Decision {
	return Decision{Code: code, Reason: reason, Level: l}
}

// Decide applies the decision order of docs/design/rights.md#decision-order
// (first match wins) to action by a on the resource at p, where grant is
// the actor's highest live grant level on the resource's channel or space.
func Decide(action Action, a Actor, grant Level, p Path) Decision {
	d := decide(action, a, grant, p)
	d.Grant = grant
	return d
}

func decide(action Action, a Actor, grant Level, p Path) Decision {
	spec, ok := table[action]
	if !ok {
		// An action without a row is refused: a forgotten row must not open
		// a door.
		return deny(problem.Forbidden, ReasonLevel, None)
	}
	if !p.Exists {
		return deny(problem.NotFound, ReasonNotFound, None)
	}
	if a.Run != "" {
		if d, ok := runTokenScope(action, a, p); !ok {
			return d
		}
	}
	raw := EffectiveLevel(a, grant, p)
	level := Capped(raw, p)
	if level < Read {
		return deny(problem.NotFound, ReasonNoGrant, level)
	}
	return meetNeed(spec.need, a, p, raw, level)
}

// meetNeed decides the requirement of an action's row for actor a at path
// p, once the path exists and a reads it: raw is a's level before the
// archive's cap, level after. The requirements of people (owner, self,
// author) are personNeed's.
func meetNeed(need requirement, a Actor, p Path, raw, level Level) Decision {
	switch need {
	case needFileRead:
		if p.Global && a.ID != p.OwnerID {
			return deny(problem.NotFound, ReasonNoGrant, None)
		}
		return Decision{Allow: true, Level: level}
	case needRead:
		return Decision{Allow: true, Level: level}
	case needWrite:
		return leveled(Write, p, raw, level)
	case needTrigger:
		return leveled(Trigger, p, raw, level)
	case needAgentSelf:
		return agentSelf(a, p, level)
	case needTriggerOrAgentSelf:
		if a.Kind == identity.KindAgent {
			return agentSelf(a, p, level)
		}
		return leveled(Trigger, p, raw, level)
	case needAgent:
		if a.Kind != identity.KindAgent {
			return deny(problem.Forbidden, ReasonSubjectKind, level)
		}
		return Decision{Allow: true, Level: level}
	default:
		return personNeed(need, a, p, raw, level)
	}
}

// personNeed decides the requirements that name a person: the instance's
// owner, the owner or the resource's own principal, its author or an
// owner. A requirement without a rule is refused, like a missing row.
func personNeed(need requirement, a Actor, p Path, raw, level Level) Decision {
	switch need {
	case needOwner:
		// Only people own the instance: an agent or app is refused for
		// what it is, a person for the level it lacks.
		if a.Kind != identity.KindUser {
			return deny(problem.Forbidden, ReasonSubjectKind, level)
		}
		if a.Owner && a.Active {
			return Decision{Allow: true, Level: level}
		}
	case needSelfOrOwner:
		if a.Kind != identity.KindUser {
			return deny(problem.Forbidden, ReasonSubjectKind, level)
		}
		if a.Owner || a.ID == p.OwnerID {
			return Decision{Allow: true, Level: level}
		}
	case needAuthorOrOwner:
		if a.ID == p.AuthorID || a.Owner {
			return leveled(Write, p, raw, level)
		}
	default:
		// A requirement without a rule opens nothing.
	}
	return deny(problem.Forbidden, ReasonLevel, level)
}

// agentSelf allows an agent acting on itself (its own runs, its own
// stream) and refuses anyone else for what or who they are.
func agentSelf(a Actor, p Path, level Level) Decision {
	if a.Kind != identity.KindAgent {
		return deny(problem.Forbidden, ReasonSubjectKind, level)
	}
	if a.ID != p.OwnerID {
		return deny(problem.Forbidden, ReasonNotSelf, level)
	}
	return Decision{Allow: true, Level: level}
}

// leveled allows at level need or above. An actor whose level reaches it
// only before the archive's cap is told the channel is read-only, not
// that it lacks the level.
func leveled(need Level, p Path, raw, level Level) Decision {
	if level >= need {
		return Decision{Allow: true, Level: level}
	}
	if raw >= need && p.Archived() {
		return deny(problem.ChannelReadOnly, ReasonChannelArchived, level)
	}
	return deny(problem.Forbidden, ReasonLevel, level)
}

// Table returns a copy of table: an importer cannot change it
// (house rule: no exported mutable package variable).
func Table() map[Action]Spec { return maps.Clone(table) }

// RunBound returns a copy of runBound: an importer cannot change it
// (house rule: no exported mutable package variable).
func RunBound() map[Action]bool { return maps.Clone(runBound) }
