"""The GraphQL client of an agent: every operation of the run contract, with
the refusals raised as the protocol's exceptions (errors.py)."""

from __future__ import annotations

import contextvars
import json
import re
from typing import Any
from urllib.parse import urlsplit

import httpx

from .errors import BothyError, NetworkError, NotFound, code_for_status, error_for

#: The trace context of the run a call belongs to (docs/adapter.md#one-trace-per-run):
#: the client sends it as the traceparent header, never on stream calls.
traceparent_var: contextvars.ContextVar[str] = contextvars.ContextVar("bothy_traceparent", default="")
_TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")

_RUN = ("fragment RunFields on Run { id threadId state triggeringMessageId cancelRequested endReason attempt holder "
        "leaseExpiresAt traceparent }")
_CTX = ("fragment ContextMessage on RunContextMessage { messageId threadSeq author { id kind handle displayName } origin kind "
        "contentMd truncated attachments { fileId name mimeType size scanStatus textStatus } trust provenance alreadyDelivered }")
Q_VIEWER = "query Viewer { viewer { id kind handle } }"
Q_EVENTS = ("query AgentEvents($after: String, $wait: Int) { agentEvents(after: $after, waitSeconds: $wait) "
            "{ events { seq type payload } nextAfter } }")
Q_CONTEXT = ("query RunContext($id: ID!) { run(id: $id) { context { runId triggerMessage { ...ContextMessage } "
             "threadContext { ...ContextMessage } channelContext { ...ContextMessage } followUps { ...ContextMessage } "
             "trustSummary { lowest } } } } " + _CTX)
Q_RUN = "query Run($id: ID!) { run(id: $id) { ...RunFields answers { messageId clientMsgId } } } " + _RUN
M_START = ("mutation StartRun($id: ID!, $holder: String) { startRun(id: $id, holder: $holder) { ...RunFields "
           "answers { messageId clientMsgId } } } " + _RUN)
M_RENEW = "mutation RenewRun($id: ID!, $holder: String!) { renewRun(id: $id, holder: $holder) { ...RunFields } } " + _RUN
M_ACK = "mutation AckAgentEvents($upTo: String!) { ackAgentEvents(upTo: $upTo) { position } }"
M_FINISH = ("mutation FinishRun($id: ID!, $input: RunFinish!, $holder: String) { finishRun(id: $id, input: $input, "
            "holder: $holder) { ...RunFields } } " + _RUN)
M_MESSAGE = ("mutation CreateMessage($threadId: ID!, $input: MessageCreate!, $holder: String) { createMessage(threadId: "
             "$threadId, input: $input, holder: $holder) { replayed message { id } } }")
M_LIVE = ("mutation UpdateRunLive($id: ID!, $holder: String, $input: RunLiveUpdate!) { updateRunLive(runId: $id, "
          "holder: $holder, input: $input) { version } }")
Q_LIVE = "query RunLive($id: ID!) { run(id: $id) { live { version } } }"
M_APPROVAL = ("mutation RequestApproval($id: ID!, $holder: String, $input: ApprovalRequest!) { requestApproval(runId: $id, "
              "holder: $holder, input: $input) { id state option { id } } }")
M_UPLOAD = ("mutation UploadFile($file: Upload!) { uploadFile(file: $file) { id name mimeType size sha256 scanStatus "
            "createdAt } }")
Q_FILE_TEXT = ("query FileText($id: ID!, $maxBytes: Int) { file(id: $id) { id name mimeType textStatus "
               "text(maxBytes: $maxBytes) } }")
Q_CAPABILITIES = "query Capabilities { viewer { capabilities { filesOut } } }"
Q_APPROVAL = "query Approval($id: ID!) { approval(id: $id) { id state option { id } } }"


def is_active(state: str) -> bool:
    """Whether a run in state is still in progress (not COMPLETED, FAILED or CANCELLED)."""
    return state not in ("COMPLETED", "FAILED", "CANCELLED")


def check_server(server: str) -> str:
    """Returns the server's base URL, refusing one that is not an absolute
    http(s) URL without credentials or query."""
    u = urlsplit(server or "")
    if u.scheme not in ("http", "https") or not u.hostname or u.username or u.password or u.query or u.fragment:
        raise ValueError("bothy: the server URL must be an absolute http or https URL without credentials or query")
    return server.rstrip("/")


def _retry_after(resp: httpx.Response, ext: dict) -> float:
    for s in (resp.headers.get("Retry-After", ""), str(ext.get("retryAfterSeconds") or "")):
        try:
            n = int(s.strip())
        except ValueError:
            continue
        if n > 0:
            return float(n)
    return 0.0


class Client:
    """A Bothy GraphQL client authenticated with an agent token.

    ``http`` may be given (tests pass one with ``httpx.MockTransport``); it
    is closed by :meth:`aclose` only when the client made it.
    """

    def __init__(self, server: str, token: str, *, http: httpx.AsyncClient | None = None, timeout: float = 30.0,
                 user_agent: str = "bothy-agent-python") -> None:
        if not token:
            raise ValueError("bothy: a token is needed")
        self.server = check_server(server)
        self.endpoint = self.server + "/graphql"
        self.token = token
        self.timeout = timeout
        self._own = http is None
        self.http = http or httpx.AsyncClient(timeout=timeout)
        self.user_agent = user_agent

    async def aclose(self) -> None:
        """Closes the HTTP client the Client made."""
        if self._own:
            await self.http.aclose()

    async def do(self, op: str, query: str, variables: dict[str, Any] | None = None, extra: float = 0.0) -> dict[str, Any]:
        """Posts operation op and returns its data.

        Raises the exception of the server's refusal (errors.py), or
        NetworkError when no answer came.
        """
        return await self._send(op, extra, json={"query": query, "operationName": op, "variables": variables or {}})

    async def _send(self, op: str, extra: float = 0.0, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
        """Posts body (json=, or data= and files= for a multipart upload) as op
        and returns the data, raising as :meth:`do` says."""
        headers = dict(headers or {})
        headers.update({"Authorization": "Bearer " + self.token, "User-Agent": self.user_agent,
                        "Accept": "application/graphql-response+json, application/json;q=0.9"})
        tp = traceparent_var.get()
        if tp and _TRACEPARENT.match(tp):
            headers["traceparent"] = tp
        try:
            resp = await self.http.post(self.endpoint, headers=headers, timeout=self.timeout + extra, **body)
        except httpx.HTTPError as e:
            raise NetworkError(op, type(e).__name__) from e
        mt = resp.headers.get("Content-Type", "").split(";")[0].strip()
        try:
            body = resp.json() if mt in ("application/json", "application/graphql-response+json") else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            # A proxy or load balancer answered, not the GraphQL endpoint.
            raise error_for(op, "the answer is no GraphQL document", code_for_status(resp.status_code), status=resp.status_code,
                            retry_after=_retry_after(resp, {}))
        errs = body.get("errors")
        if errs:
            first = errs[0] if isinstance(errs, list) and isinstance(errs[0], dict) else {}
            ext = first.get("extensions") or {}
            raise error_for(op, str(first.get("message") or "refused"), str(ext.get("code") or code_for_status(resp.status_code)),
                            str(ext.get("reason") or ""), resp.status_code, _retry_after(resp, ext), ext)
        if resp.status_code != 200 or not isinstance(body.get("data"), dict):
            raise error_for(op, "unexpected answer", code_for_status(resp.status_code) if resp.status_code != 200 else "invalid_response",
                            status=resp.status_code, retry_after=_retry_after(resp, {}))
        return body["data"]

    async def viewer(self) -> dict[str, Any]:
        """The authenticated principal ({id, kind, handle})."""
        return (await self.do("Viewer", Q_VIEWER))["viewer"]

    async def agent_events(self, after: str | None, wait: int = 25) -> dict[str, Any]:
        """Long-polls the agent's stream after cursor ``after`` (None: after the
        acknowledged position): {events: [{seq, type, payload}], nextAfter}."""
        token = traceparent_var.set("")
        try:
            return (await self.do("AgentEvents", Q_EVENTS, {"after": after, "wait": wait}, extra=wait))["agentEvents"]
        finally:
            traceparent_var.reset(token)

    async def run_context(self, run_id: str) -> dict[str, Any]:
        """The run's context (run_context.v1). Raises NotFound once the run is no
        longer active or its person lost trigger."""
        run = (await self.do("RunContext", Q_CONTEXT, {"id": run_id})).get("run")
        if not run or not run.get("context"):
            raise NotFound("RunContext", "Not found", code="not_found", status=404)
        return run["context"]

    async def run(self, run_id: str) -> dict[str, Any]:
        """The run with its answers ({state, endReason, answers: [{clientMsgId}], ...})."""
        run = (await self.do("Run", Q_RUN, {"id": run_id})).get("run")
        if not run:
            raise NotFound("Run", "Not found", code="not_found", status=404)
        return run

    async def start_run(self, run_id: str, holder: str) -> dict[str, Any]:
        """Claims the run for holder; returns the run with its answers."""
        return (await self.do("StartRun", M_START, {"id": run_id, "holder": holder or None}))["startRun"]

    async def renew_run(self, run_id: str, holder: str) -> dict[str, Any]:
        """Renews holder's lease on the run."""
        return (await self.do("RenewRun", M_RENEW, {"id": run_id, "holder": holder}))["renewRun"]

    async def ack_agent_events(self, up_to: str) -> str:
        """Acknowledges the stream up to seq up_to; returns the stored position."""
        token = traceparent_var.set("")
        try:
            return str((await self.do("AckAgentEvents", M_ACK, {"upTo": up_to}))["ackAgentEvents"]["position"])
        finally:
            traceparent_var.reset(token)

    async def finish_run(self, run_id: str, holder: str, outcome: str, reason: str = "") -> dict[str, Any]:
        """Ends the run with outcome COMPLETED, FAILED (with a reason) or CANCELLED."""
        inp: dict[str, Any] = {"outcome": outcome}
        if reason:
            inp["reason"] = reason
        return (await self.do("FinishRun", M_FINISH, {"id": run_id, "input": inp, "holder": holder or None}))["finishRun"]

    async def create_message(self, thread_id: str, holder: str, key: str, text: str, run_id: str = "",
                             input_trust: str = "", attachment_file_ids: list[str] | None = None) -> dict[str, Any]:
        """Posts text under clientMsgId key, naming run run_id ("" names none),
        declaring input_trust and attaching the files of attachment_file_ids
        (part of the key's request); a repeat of a stored message answers
        replayed."""
        inp: dict[str, Any] = {"clientMsgId": key, "contentMd": text}
        if run_id:
            inp["runId"] = run_id
        if input_trust:
            inp["inputTrust"] = input_trust
        if attachment_file_ids:
            inp["attachmentFileIds"] = list(attachment_file_ids)
        return (await self.do("CreateMessage", M_MESSAGE, {"threadId": thread_id, "input": inp,
                                                           "holder": (holder or None) if run_id else None}))["createMessage"]

    async def upload_file(self, name: str, content: bytes) -> dict[str, Any]:
        """Uploads content as a file named name (the GraphQL multipart request
        convention) and returns File; the server sniffs the media type. Never
        repeated by the client: a repeat makes a second file."""
        ops = json.dumps({"query": M_UPLOAD, "operationName": "UploadFile", "variables": {"file": None}})
        safe = "".join(c for c in name if c >= " " and c not in '"\\\x7f')
        data = await self._send("UploadFile", headers={"GraphQL-Require-Preflight": "1"},
                                data={"operations": ops, "map": '{"0":["variables.file"]}'},
                                files={"0": (safe, content, "application/octet-stream")})
        if not data.get("uploadFile"):
            raise error_for("UploadFile", "Not found", "not_found", status=404)
        return data["uploadFile"]

    async def file_text(self, file_id: str, max_bytes: int = 0) -> dict[str, Any]:
        """Reads File {id name mimeType textStatus text} of file_id, at most
        max_bytes of its text (0: the server's files.text_max_bytes). Raises
        NotFound for a missing file and for one the caller may not read."""
        variables: dict[str, Any] = {"id": file_id}
        if max_bytes > 0:
            variables["maxBytes"] = max_bytes
        f = (await self.do("FileText", Q_FILE_TEXT, variables)).get("file")
        if not f:
            raise error_for("FileText", "Not found", "not_found", status=404)
        return f

    async def files_out(self) -> bool:
        """Whether the client's principal holds the capability files_out."""
        v = (await self.do("Capabilities", Q_CAPABILITIES))["viewer"]
        return bool((v.get("capabilities") or {}).get("filesOut"))

    async def update_run_live(self, run_id: str, holder: str, base_version: int, append: str = "",
                              replace: str | None = None, status: str | None = None, done: bool = False) -> int:
        """Changes the run's live box; returns its new version. Raises LiveVersion
        when base_version is not the box's version."""
        inp: dict[str, Any] = {"baseVersion": base_version}
        if append:
            inp["append"] = append
        if replace is not None:
            inp["replace"] = replace
        if status is not None:
            inp["status"] = status
        if done:
            inp["done"] = True
        data = await self.do("UpdateRunLive", M_LIVE, {"id": run_id, "holder": holder or None, "input": inp})
        return int(data["updateRunLive"]["version"])

    async def run_live_version(self, run_id: str) -> int:
        """The version of the run's live box."""
        run = (await self.do("RunLive", Q_LIVE, {"id": run_id})).get("run")
        if not run:
            raise NotFound("RunLive", "Not found", code="not_found", status=404)
        return int(run["live"]["version"])

    async def request_approval(self, run_id: str, holder: str, title: str, detail: str,
                               options: list[dict[str, str]], expires_in: int = 0) -> dict[str, Any]:
        """Asks the person who triggered the run (an approval card); returns {id, state, option}."""
        inp: dict[str, Any] = {"title": title, "options": options}
        if detail:
            inp["detail"] = detail
        if expires_in > 0:
            inp["expiresIn"] = expires_in
        return (await self.do("RequestApproval", M_APPROVAL, {"id": run_id, "holder": holder or None, "input": inp}))["requestApproval"]

    async def approval(self, approval_id: str) -> dict[str, Any]:
        """Reads an approval ({id, state, option})."""
        ap = (await self.do("Approval", Q_APPROVAL, {"id": approval_id})).get("approval")
        if not ap:
            raise NotFound("Approval", "Not found", code="not_found", status=404)
        return ap


#: The REST header that names the holder on calls on a claimed run.
HOLDER_HEADER = "Bothy-Run-Holder"


def holder_headers(holder: str) -> dict[str, str]:
    """The headers that name holder on a REST call on a claimed run
    (``POST /api/v1/threads/{id}/messages``, ``/runs/{id}/finish``, ...), for
    handlers that call the REST API themselves; GraphQL takes the holder as
    the ``holder`` argument, which the SDK's client sends."""
    return {HOLDER_HEADER: holder} if holder else {}


def is_temporary(err: BaseException) -> bool:
    """Whether an idempotent call that raised err may be repeated."""
    return isinstance(err, BothyError) and err.temporary
