/**
 * `@bothy/agent`: a Bothy agent in forty lines. {@link run} follows the
 * agent's event stream and calls a handler with each run; the SDK keeps
 * the run contract (docs/adapter.md): claims and lease renewals, fencing,
 * acknowledgements only after handling, follow-ups, answer keys, the
 * outbox, the live box, cancel, approvals and the tool gate.
 * @packageDocumentation
 */
export { Adapter, run, type Config, type Handler, type RunReport } from "./adapter.js";
export { Acks, followupRef } from "./acks.js";
export { answerKey, answeredBeyond, answeredUpTo, requestStands, requestsOf } from "./answers.js";
export {
  Client,
  HOLDER_HEADER,
  SUBSCRIPTION_AGENT_EVENTS,
  holderHeaders,
  newHolder,
  traceHeaders,
  validHolder,
  type ApprovalRequest,
  type CallOptions,
  type ClientOptions,
  type LiveUpdate,
  type MessageCreate,
  type UploadedFile,
} from "./client.js";
export { configFromEnv, modelFromEnv, shutdownSignal, type EnvConfig, type ModelOptions } from "./config.js";
export * from "./errors.js";
export { loadTools, parseTools, type ToolOptions } from "./httptools.js";
export { LiveWriter, STOPPED_STATUS } from "./live.js";
export { silentLogger, stderrLogger, withFields, type Logger } from "./log.js";
export { Outbox, type OutboxEntry } from "./outbox.js";
export { fileTextBlock, looksLikeMarker, neutralise, newBoundary, render, withFileTexts, withFollowUps, type FileText, type Prompt } from "./render.js";
export { AgentStream, NoWebSocketError } from "./stream.js";
export { ATTACH_FILE_TOOL, Approver, OPTION_APPROVE, OPTION_DENY, Task, attachFileTool, currentTask, withTask, type Tool } from "./task.js";
export { MAX_ATTACHMENTS, NoFilesOutError, RunFiles } from "./files.js";
export { InPlay, knownTrust, lowerTrust, standing, toolsAllowed, trustRank } from "./trust.js";
export * from "./types.js";
export { LENGTH_NOTE, type Model } from "./model/common.js";
export { OpenAIModel, type OpenAIConfig } from "./model/openai.js";
export { AnthropicModel, type AnthropicConfig } from "./model/anthropic.js";
