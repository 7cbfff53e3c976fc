package rest

import (
	"net/http"
	"slices"

	"bothy.example.com/bothy/internal/authz"
)

// Selections shared by the stored operations, in the REST shape of
// docs/api/openapi.yaml (the shim renders camelCase as snake_case).
const (
	principalRefFields = `id kind handle displayName`
	messageFields      = `id threadId channelId threadSeq author { ` + principalRefFields + ` } origin kind contentMd contentTruncated replyToMessageId mentions { ` + principalRefFields + ` } attachments { ` + attachmentFields + ` } triggerState triggerReason systemCode runId deleted createdAt startedThreadId provenance`
	threadFields       = `id channelId kind parentMessageId operatorAgentId title titleSource createdBy state lastSeq createdAt`
	channelFields      = `id spaceId name kind archived operatorMode operatorAgentId effectiveOperatorId mainThreadId switches { freeResponse allowMentionedAgents autoThread historyBackfillLimit }`
	grantFields        = `id subjectId subjectKind targetKind targetId level expiresAt createdAt revokedAt`
	eventFields        = `__typename seq type createdAt channelId payload ... on SpaceEvent { spaceId }`
	spaceFields        = `id name defaultOperatorAgentId archived`
	principalFields    = `id kind handle displayName email status isOwner createdAt`
	tokenFields        = `id principalId kind label createdAt expiresAt lastUsedAt revokedAt`
	groupFields        = `id name createdAt memberIds`
	liveFields         = `runId version text status updatedAt done`
	auditFields        = `id actor { ` + principalRefFields + ` } action decision reason resourceKind resourceId count firstAt lastAt`
	approvalFields     = `id runId messageId state title detail options { id label } restrictedTo { ` + principalRefFields + ` } expiresAt decidedBy { ` + principalRefFields + ` } decidedAt option { id label } createdAt`
	runFields          = `id threadId agent { ` + principalRefFields + ` } state version triggerKind triggeringMessageId triggeredBy { ` + principalRefFields + ` } session { id mode } cancelRequested endReason queuedAt startedAt endedAt attempt holder leaseExpiresAt traceparent answers { messageId clientMsgId } live { ` + liveFields + ` }`
	sessionFields      = `id threadId agentId isCurrent started externalRef createdAt`
	contextMsgFields   = `messageId threadSeq createdAt channelId author { ` + principalRefFields + ` } role origin kind contentMd truncated attachments { ` + attachmentFields + ` } replyToMessageId trust provenance alreadyDelivered`
	attachmentFields   = `fileId name mimeType size scanStatus transcript textStatus`
	fileFields         = `id name mimeType size sha256 scanStatus textStatus createdAt`
	contextFields      = `runId contextFloorSeq triggerMessage { ` + contextMsgFields + ` } threadContext { ` + contextMsgFields + ` } channelContext { ` + contextMsgFields + ` } truncatedBeforeSeq followUps { ` + contextMsgFields + ` } trustSummary { lowest counts { trust count } }`
)

func path(name string) Param { return Param{Name: name, In: InPath, Var: "id"} }

// HolderHeader is the request header that names the adapter process
// acting on a claimed run (the holder argument of the GraphQL mutations;
// docs/design/runs.md#fencing).
const HolderHeader = "Bothy-Run-Holder"

// holderParam maps HolderHeader onto the variable holder.
var holderParam = Param{Name: HolderHeader, In: InHeader, Var: "holder"}

// Table is the route table of the REST shim: one stored GraphQL operation
// per OpenAPI operationId of docs/api/openapi.yaml.
var table = append(append([]Route{}, coreRoutes...), adminRoutes...)

// coreRoutes are the routes of chat, messages, files, runs and agents.
var coreRoutes = []Route{
	{
		OperationID: "uploadFile", Action: authz.FileUpload, Method: http.MethodPost, Path: "/api/v1/files", Result: "uploadFile",
		Created: true, Upload: "file",
		Document: `mutation uploadFile($file: Upload!) { uploadFile(file: $file) { ` + fileFields + ` } }`,
	},
	{
		OperationID: "getFileText", Action: authz.FileRead, Method: http.MethodGet, Path: "/api/v1/files/{file_id}/text", Result: "fileText",
		Params:   []Param{path("file_id"), {Name: "max_bytes", In: InQuery, Var: "maxBytes", Int: true}},
		Document: `query getFileText($id: ID!, $maxBytes: Int) { fileText(id: $id, maxBytes: $maxBytes) { fileId textStatus text truncated } }`,
	},
	{
		OperationID: "getViewer", Action: authz.ViewerRead, Method: http.MethodGet, Path: "/api/v1/me", Result: "viewer",
		Document: `query getViewer { viewer { id kind handle displayName email status isOwner createdAt } }`,
	},
	{
		OperationID: "listEvents", Action: authz.EventsList, Method: http.MethodGet, Path: "/api/v1/events", Result: "events",
		Params:   []Param{{Name: "after", In: InQuery, Var: "after"}, {Name: "limit", In: InQuery, Var: "limit", Int: true}},
		Document: `query listEvents($after: String, $limit: Int) { events(after: $after, limit: $limit) { events { ` + eventFields + ` } nextAfter } }`,
	},
	{
		OperationID: "listChannels", Action: authz.ChannelsList, Method: http.MethodGet, Path: "/api/v1/channels", Result: "channels",
		Params:   []Param{{Name: "first", In: InQuery, Var: "first", Int: true}, {Name: "after", In: InQuery, Var: "after"}},
		Document: `query listChannels($first: Int, $after: String) { channels(first: $first, after: $after) { nodes { ` + channelFields + ` } pageInfo { endCursor hasNextPage } } }`,
	},
	{
		OperationID: "listTriggeredRuns", Action: authz.RunsList, Method: http.MethodGet, Path: "/api/v1/me/runs", Result: "triggeredRuns",
		Params:   []Param{{Name: "first", In: InQuery, Var: "first", Int: true}, {Name: "after", In: InQuery, Var: "after"}},
		Document: `query listTriggeredRuns($first: Int, $after: String) { triggeredRuns(first: $first, after: $after) { nodes { ` + runFields + ` } pageInfo { endCursor hasNextPage } } }`,
	},
	{
		OperationID: "getChannel", Action: authz.ChannelRead, Method: http.MethodGet, Path: "/api/v1/channels/{channel_id}", Result: "channel",
		Params:   []Param{path("channel_id")},
		Document: `query getChannel($id: ID!) { channel(id: $id) { ` + channelFields + ` } }`,
	},
	{
		OperationID: "getThread", Action: authz.ThreadRead, Method: http.MethodGet, Path: "/api/v1/threads/{thread_id}", Result: "thread",
		Params:   []Param{path("thread_id")},
		Document: `query getThread($id: ID!) { thread(id: $id) { ` + threadFields + ` } }`,
	},
	{
		OperationID: "listThreadMessages", Action: authz.ThreadRead, Method: http.MethodGet, Path: "/api/v1/threads/{thread_id}/messages", Result: "thread", Unwrap: "messages",
		Params:   []Param{path("thread_id"), {Name: "after", In: InQuery, Var: "after", Int: true}, {Name: "limit", In: InQuery, Var: "limit", Int: true}},
		Document: `query listThreadMessages($id: ID!, $after: Int, $limit: Int) { thread(id: $id) { messages(after: $after, limit: $limit) { messages { ` + messageFields + ` } nextAfter } } }`,
	},
	{
		OperationID: "getMessage", Action: authz.MessageRead, Method: http.MethodGet, Path: "/api/v1/messages/{message_id}", Result: "message",
		Params:   []Param{path("message_id")},
		Document: `query getMessage($id: ID!) { message(id: $id) { ` + messageFields + ` } }`,
	},
	{
		OperationID: "createMessage", Action: authz.MessageCreate, Method: http.MethodPost, Path: "/api/v1/threads/{thread_id}/messages", Result: "createMessage",
		Params: []Param{path("thread_id"), holderParam}, BodyVar: "input", Created: true, ReplayFlag: "replayed", Unwrap: "message",
		Document: `mutation createMessage($id: ID!, $input: MessageCreate!, $holder: String) { createMessage(threadId: $id, input: $input, holder: $holder) { replayed message { ` + messageFields + ` } } }`,
	},
	{
		OperationID: "deleteMessage", Action: authz.MessageDelete, Method: http.MethodDelete, Path: "/api/v1/messages/{message_id}", Result: "deleteMessage",
		Params:   []Param{path("message_id")},
		Document: `mutation deleteMessage($id: ID!) { deleteMessage(id: $id) { ` + messageFields + ` } }`,
	},
	{
		OperationID: "createThread", Action: authz.ThreadCreate, Method: http.MethodPost, Path: "/api/v1/channels/{channel_id}/threads", Result: "createThread",
		Params: []Param{path("channel_id")}, BodyVar: "input", Created: true, ReplayFlag: "replayed", Omit: []string{"replayed"},
		Document: `mutation createThread($id: ID!, $input: ThreadCreate!) { createThread(channelId: $id, input: $input) { replayed thread { ` + threadFields + ` } firstMessage { ` + messageFields + ` } } }`,
	},
	{
		OperationID: "closeThread", Action: authz.ThreadClose, Method: http.MethodPost, Path: "/api/v1/threads/{thread_id}/close", Result: "closeThread",
		Params:   []Param{path("thread_id")},
		Document: `mutation closeThread($id: ID!) { closeThread(id: $id) { ` + threadFields + ` } }`,
	},
	{
		OperationID: "moveThread", Action: authz.ThreadMove, Method: http.MethodPost, Path: "/api/v1/threads/{thread_id}/move", Result: "moveThread",
		Params: []Param{path("thread_id")}, BodyFields: map[string]string{"channel_id": "channelId"},
		Document: `mutation moveThread($id: ID!, $channelId: ID!) { moveThread(id: $id, channelId: $channelId) { ` + threadFields + ` } }`,
	},
	{
		OperationID: "setChannelOperator", Action: authz.ChannelOperatorSet, Method: http.MethodPut, Path: "/api/v1/channels/{channel_id}/operator", Result: "setChannelOperator",
		Params: []Param{path("channel_id")}, BodyVar: "input",
		Document: `mutation setChannelOperator($id: ID!, $input: OperatorSet!) { setChannelOperator(channelId: $id, input: $input) { ` + channelFields + ` } }`,
	},
	{
		OperationID: "updateChannelSwitches", Action: authz.ChannelSwitchesPatch, Method: http.MethodPatch, Path: "/api/v1/channels/{channel_id}/switches", Result: "updateChannelSwitches",
		Params: []Param{path("channel_id")}, BodyVar: "input",
		Document: `mutation updateChannelSwitches($id: ID!, $input: ChannelSwitchesPatch!) { updateChannelSwitches(channelId: $id, input: $input) { ` + channelFields + ` } }`,
	},
	{
		OperationID: "archiveChannel", Action: authz.ChannelArchive, Method: http.MethodPost, Path: "/api/v1/channels/{channel_id}/archive", Result: "archiveChannel",
		Params:   []Param{path("channel_id")},
		Document: `mutation archiveChannel($id: ID!) { archiveChannel(id: $id) { ` + channelFields + ` } }`,
	},
	{
		OperationID: "archiveSpace", Action: authz.SpaceArchive, Method: http.MethodPost, Path: "/api/v1/spaces/{space_id}/archive", Result: "archiveSpace",
		Params:   []Param{path("space_id")},
		Document: `mutation archiveSpace($id: ID!) { archiveSpace(id: $id) { ` + spaceFields + ` } }`,
	},
	{
		OperationID: "createGrant", Action: authz.GrantCreate, Method: http.MethodPost, Path: "/api/v1/grants", Result: "createGrant",
		BodyVar: "input", Created: true,
		Document: `mutation createGrant($input: GrantCreate!) { createGrant(input: $input) { ` + grantFields + ` } }`,
	},
	{
		OperationID: "revokeGrant", Action: authz.GrantRevoke, Method: http.MethodDelete, Path: "/api/v1/grants/{grant_id}", Result: "revokeGrant",
		Params:   []Param{path("grant_id")},
		Document: `mutation revokeGrant($id: ID!) { revokeGrant(id: $id) { ` + grantFields + ` } }`,
	},
	{
		OperationID: "getRun", Action: authz.RunRead, Method: http.MethodGet, Path: "/api/v1/runs/{run_id}", Result: "run",
		Params:   []Param{path("run_id")},
		Document: `query getRun($id: ID!) { run(id: $id) { ` + runFields + ` } }`,
	},
	{
		OperationID: "startRun", Action: authz.RunStart, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/start", Result: "startRun",
		Params: []Param{path("run_id")}, BodyFields: map[string]string{"holder": "holder"}, OptionalBody: true,
		Document: `mutation startRun($id: ID!, $holder: String) { startRun(id: $id, holder: $holder) { ` + runFields + ` } }`,
	},
	{
		OperationID: "renewRun", Action: authz.RunRenew, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/renew", Result: "renewRun",
		Params: []Param{path("run_id")}, BodyFields: map[string]string{"holder": "holder"},
		Document: `mutation renewRun($id: ID!, $holder: String!) { renewRun(id: $id, holder: $holder) { ` + runFields + ` } }`,
	},
	{
		OperationID: "createRunToken", Action: authz.RunTokenCreate, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/tokens", Result: "createRunToken",
		Params: []Param{path("run_id")}, BodyFields: map[string]string{"holder": "holder"}, Created: true,
		Document: `mutation createRunToken($id: ID!, $holder: String!) { createRunToken(runId: $id, holder: $holder) { token runId holder } }`,
	},
	{
		OperationID: "awaitRunInput", Action: authz.RunAwaitInput, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/await-input", Result: "awaitRunInput",
		Params:   []Param{path("run_id"), holderParam},
		Document: `mutation awaitRunInput($id: ID!, $holder: String) { awaitRunInput(id: $id, holder: $holder) { ` + runFields + ` } }`,
	},
	{
		OperationID: "finishRun", Action: authz.RunFinish, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/finish", Result: "finishRun",
		Params: []Param{path("run_id"), holderParam}, BodyVar: "input",
		Document: `mutation finishRun($id: ID!, $input: RunFinish!, $holder: String) { finishRun(id: $id, input: $input, holder: $holder) { ` + runFields + ` } }`,
	},
	{
		OperationID: "updateRunLive", Action: authz.RunLiveUpdate, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/live", Result: "updateRunLive",
		Params: []Param{path("run_id"), holderParam}, BodyVar: "input",
		Document: `mutation updateRunLive($id: ID!, $input: RunLiveUpdate!, $holder: String) { updateRunLive(runId: $id, input: $input, holder: $holder) { ` + liveFields + ` } }`,
	},
	{
		OperationID: "requestApproval", Action: authz.RunApprovalRequest, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/approvals", Result: "requestApproval",
		Params: []Param{path("run_id"), holderParam}, BodyVar: "input", Created: true,
		Document: `mutation requestApproval($id: ID!, $input: ApprovalRequest!, $holder: String) { requestApproval(runId: $id, input: $input, holder: $holder) { ` + approvalFields + ` } }`,
	},
	{
		OperationID: "getApproval", Action: authz.RunRead, Method: http.MethodGet, Path: "/api/v1/approvals/{approval_id}", Result: "approval",
		Params:   []Param{path("approval_id")},
		Document: `query getApproval($id: ID!) { approval(id: $id) { ` + approvalFields + ` } }`,
	},
	{
		OperationID: "respondToApproval", Action: authz.ApprovalRespond, Method: http.MethodPost, Path: "/api/v1/approvals/{approval_id}/response", Result: "respondToApproval",
		Params: []Param{path("approval_id")}, BodyFields: map[string]string{"option_id": "optionId"},
		Document: `mutation respondToApproval($id: ID!, $optionId: String!) { respondToApproval(id: $id, optionId: $optionId) { ` + approvalFields + ` } }`,
	},
	{
		OperationID: "cancelRun", Action: authz.RunCancel, Method: http.MethodPost, Path: "/api/v1/runs/{run_id}/cancel", Result: "cancelRun",
		Params:   []Param{path("run_id"), holderParam},
		Document: `mutation cancelRun($id: ID!, $holder: String) { cancelRun(id: $id, holder: $holder) { ` + runFields + ` } }`,
	},
	{
		OperationID: "pollAgentEvents", Action: authz.AgentEventsPoll, Method: http.MethodGet, Path: "/api/v1/agent/events", Result: "agentEvents",
		Params:   []Param{{Name: "after", In: InQuery, Var: "after"}, {Name: "wait", In: InQuery, Var: "wait", Int: true}},
		Document: `query pollAgentEvents($after: String, $wait: Int) { agentEvents(after: $after, waitSeconds: $wait) { events { seq type createdAt payload } nextAfter } }`,
	},
	{
		OperationID: "ackAgentEvents", Action: authz.AgentEventsAck, Method: http.MethodPost, Path: "/api/v1/agent/events/ack", Result: "ackAgentEvents",
		BodyFields: map[string]string{"up_to": "upTo"},
		Document:   `mutation ackAgentEvents($upTo: String!) { ackAgentEvents(upTo: $upTo) { position } }`,
	},
	{
		OperationID: "resetAgentSession", Action: authz.AgentSessionReset, Method: http.MethodPost, Path: "/api/v1/threads/{thread_id}/agent-session/reset", Result: "resetAgentSession",
		Params:   []Param{path("thread_id")},
		Document: `mutation resetAgentSession($id: ID!) { resetAgentSession(threadId: $id) { ` + sessionFields + ` } }`,
	},
	{
		OperationID: "bindAgentSession", Action: authz.AgentSessionBind, Method: http.MethodPost, Path: "/api/v1/threads/{thread_id}/agent-session/bind", Result: "bindAgentSession",
		Params: []Param{path("thread_id")}, BodyFields: map[string]string{"external_ref": "externalRef"},
		Document: `mutation bindAgentSession($id: ID!, $externalRef: String!) { bindAgentSession(threadId: $id, externalRef: $externalRef) { ` + sessionFields + ` } }`,
	},
	{
		OperationID: "getRunContext", Action: authz.RunContextRead, Method: http.MethodGet, Path: "/api/v1/runs/{run_id}/context", Result: "run", Unwrap: "context",
		Params:   []Param{path("run_id")},
		Document: `query getRunContext($id: ID!) { run(id: $id) { context { ` + contextFields + ` } } }`,
	},
}

// adminRoutes are the routes of administration (owners; a person on their
// own tokens).
var adminRoutes = []Route{
	{
		OperationID: "listAuditEntries", Action: authz.AuditList, Method: http.MethodGet, Path: "/api/v1/audit", Result: "auditEntries",
		Params: []Param{{Name: "actor", In: InQuery, Var: "actor"}, {Name: "action", In: InQuery, Var: "action"}, {Name: "decision", In: InQuery, Var: "decision", Enum: []string{"allow", "deny"}},
			{Name: "since", In: InQuery, Var: "since"}, {Name: "until", In: InQuery, Var: "until"}, {Name: "after", In: InQuery, Var: "after"},
			{Name: "limit", In: InQuery, Var: "limit", Int: true}},
		Document: `query listAuditEntries($actor: ID, $action: String, $decision: AuditDecision, $since: Time, $until: Time, $after: String, $limit: Int) {
			auditEntries(filter: {actor: $actor, action: $action, decision: $decision, since: $since, until: $until}, after: $after, limit: $limit) {
			nodes { ` + auditFields + ` } pageInfo { endCursor hasNextPage } } }`,
	},
	{
		OperationID: "listPrincipals", Action: authz.PrincipalList, Method: http.MethodGet, Path: "/api/v1/principals", Result: "principals",
		Params:   []Param{{Name: "after", In: InQuery, Var: "after"}, {Name: "limit", In: InQuery, Var: "limit", Int: true}},
		Document: `query listPrincipals($after: String, $limit: Int) { principals(after: $after, limit: $limit) { principals { ` + principalFields + ` } nextAfter } }`,
	},
	{
		OperationID: "createPrincipal", Action: authz.PrincipalCreate, Method: http.MethodPost, Path: "/api/v1/principals", Result: "createPrincipal",
		BodyVar: "input", Created: true,
		Document: `mutation createPrincipal($input: PrincipalCreate!) { createPrincipal(input: $input) { principal { ` + principalFields + ` } token } }`,
	},
	{
		OperationID: "updatePrincipal", Action: authz.PrincipalUpdate, Method: http.MethodPatch, Path: "/api/v1/principals/{principal_id}", Result: "updatePrincipal",
		Params: []Param{path("principal_id")}, BodyVar: "input",
		Document: `mutation updatePrincipal($id: ID!, $input: PrincipalPatch!) { updatePrincipal(id: $id, input: $input) { ` + principalFields + ` } }`,
	},
	{
		OperationID: "setCapabilities", Action: authz.PrincipalCapabilities, Method: http.MethodPut, Path: "/api/v1/principals/{principal_id}/capabilities",
		Result: "setCapabilities", Unwrap: "capabilities", Params: []Param{{Name: "principal_id", In: InPath, Var: "principalId"}}, BodyVar: "input",
		Document: `mutation setCapabilities($principalId: ID!, $input: CapabilitiesInput!) { setCapabilities(principalId: $principalId, input: $input) { capabilities { filesOut } } }`,
	},
	{
		OperationID: "listTokens", Action: authz.TokenList, Method: http.MethodGet, Path: "/api/v1/principals/{principal_id}/tokens", Result: "tokens",
		Params:   []Param{path("principal_id")},
		Document: `query listTokens($id: ID!) { tokens(principalId: $id) { tokens { ` + tokenFields + ` } } }`,
	},
	{
		OperationID: "createToken", Action: authz.TokenCreate, Method: http.MethodPost, Path: "/api/v1/principals/{principal_id}/tokens", Result: "createToken",
		Params: []Param{path("principal_id")}, BodyVar: "input", Created: true,
		Document: `mutation createToken($id: ID!, $input: TokenCreate!) { createToken(principalId: $id, input: $input) { id token principalId kind label createdAt expiresAt } }`,
	},
	{
		OperationID: "revokeToken", Action: authz.TokenRevoke, Method: http.MethodDelete, Path: "/api/v1/tokens/{token_id}", Result: "revokeToken",
		Params:   []Param{path("token_id")},
		Document: `mutation revokeToken($id: ID!) { revokeToken(id: $id) { ` + tokenFields + ` } }`,
	},
	{
		OperationID: "createGroup", Action: authz.GroupCreate, Method: http.MethodPost, Path: "/api/v1/groups", Result: "createGroup",
		BodyFields: map[string]string{"name": "name"}, Created: true,
		Document: `mutation createGroup($name: String!) { createGroup(name: $name) { ` + groupFields + ` } }`,
	},
	{
		OperationID: "getGroup", Action: authz.GroupRead, Method: http.MethodGet, Path: "/api/v1/groups/{group_id}", Result: "group",
		Params:   []Param{path("group_id")},
		Document: `query getGroup($id: ID!) { group(id: $id) { ` + groupFields + ` } }`,
	},
	{
		OperationID: "updateGroup", Action: authz.GroupUpdate, Method: http.MethodPatch, Path: "/api/v1/groups/{group_id}", Result: "updateGroup",
		Params: []Param{path("group_id")}, BodyFields: map[string]string{"name": "name"},
		Document: `mutation updateGroup($id: ID!, $name: String!) { updateGroup(id: $id, name: $name) { ` + groupFields + ` } }`,
	},
	{
		OperationID: "deleteGroup", Action: authz.GroupDelete, Method: http.MethodDelete, Path: "/api/v1/groups/{group_id}", Result: "deleteGroup",
		Params:   []Param{path("group_id")},
		Document: `mutation deleteGroup($id: ID!) { deleteGroup(id: $id) { ` + groupFields + ` } }`,
	},
	{
		OperationID: "addGroupMember", Action: authz.GroupMemberAdd, Method: http.MethodPost, Path: "/api/v1/groups/{group_id}/members", Result: "addGroupMember",
		Params: []Param{path("group_id")}, BodyFields: map[string]string{"principal_id": "principalId"},
		Document: `mutation addGroupMember($id: ID!, $principalId: ID!) { addGroupMember(groupId: $id, principalId: $principalId) { ` + groupFields + ` } }`,
	},
	{
		OperationID: "removeGroupMember", Action: authz.GroupMemberRemove, Method: http.MethodDelete, Path: "/api/v1/groups/{group_id}/members/{principal_id}", Result: "removeGroupMember",
		Params:   []Param{path("group_id"), {Name: "principal_id", In: InPath, Var: "principalId"}},
		Document: `mutation removeGroupMember($id: ID!, $principalId: ID!) { removeGroupMember(groupId: $id, principalId: $principalId) { ` + groupFields + ` } }`,
	},
	{
		OperationID: "createSpace", Action: authz.SpaceCreate, Method: http.MethodPost, Path: "/api/v1/spaces", Result: "createSpace",
		BodyVar: "input", Created: true,
		Document: `mutation createSpace($input: SpaceCreate!) { createSpace(input: $input) { ` + spaceFields + ` } }`,
	},
	{
		OperationID: "getSpace", Action: authz.SpaceRead, Method: http.MethodGet, Path: "/api/v1/spaces/{space_id}", Result: "space",
		Params:   []Param{path("space_id")},
		Document: `query getSpace($id: ID!) { space(id: $id) { ` + spaceFields + ` } }`,
	},
	{
		OperationID: "updateSpace", Action: authz.SpaceUpdate, Method: http.MethodPatch, Path: "/api/v1/spaces/{space_id}", Result: "updateSpace",
		Params: []Param{path("space_id")}, BodyVar: "input",
		Document: `mutation updateSpace($id: ID!, $input: SpacePatch!) { updateSpace(id: $id, input: $input) { ` + spaceFields + ` } }`,
	},
	{
		OperationID: "unarchiveSpace", Action: authz.SpaceUnarchive, Method: http.MethodPost, Path: "/api/v1/spaces/{space_id}/unarchive", Result: "unarchiveSpace",
		Params:   []Param{path("space_id")},
		Document: `mutation unarchiveSpace($id: ID!) { unarchiveSpace(id: $id) { ` + spaceFields + ` } }`,
	},
	{
		OperationID: "createChannel", Action: authz.ChannelCreate, Method: http.MethodPost, Path: "/api/v1/spaces/{space_id}/channels", Result: "createChannel",
		Params: []Param{path("space_id")}, BodyVar: "input", Created: true,
		Document: `mutation createChannel($id: ID!, $input: ChannelCreate!) { createChannel(spaceId: $id, input: $input) { ` + channelFields + ` } }`,
	},
	{
		OperationID: "updateChannel", Action: authz.ChannelUpdate, Method: http.MethodPatch, Path: "/api/v1/channels/{channel_id}", Result: "updateChannel",
		Params: []Param{path("channel_id")}, BodyVar: "input",
		Document: `mutation updateChannel($id: ID!, $input: ChannelPatch!) { updateChannel(id: $id, input: $input) { ` + channelFields + ` } }`,
	},
	{
		OperationID: "unarchiveChannel", Action: authz.ChannelUnarchive, Method: http.MethodPost, Path: "/api/v1/channels/{channel_id}/unarchive", Result: "unarchiveChannel",
		Params:   []Param{path("channel_id")},
		Document: `mutation unarchiveChannel($id: ID!) { unarchiveChannel(id: $id) { ` + channelFields + ` } }`,
	},
}

// Documents returns the stored GraphQL operation of every route of Table:
// the operations the shim runs, which an instance that runs trusted
// documents only (graphql.trusted_documents) trusts without a listing.
func Documents() []string {
	out := make([]string, len(table))
	for i, rt := range table {
		out[i] = rt.Document
	}
	return out
}

// Table returns a copy of table: an importer cannot change it
// (house rule: no exported mutable package variable).
func Table() []Route { return slices.Clone(table) }
