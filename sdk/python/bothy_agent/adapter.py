"""The adapter: it follows the agent's stream and answers each run with a
handler, keeping the run contract of docs/adapter.md (context before claim,
holders and lease renewals, fencing, acknowledgements only after handling,
follow-up rounds, answer keys, the outbox, the live box, cancels)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .acks import Ledger
from .answers import answer_key, answered_beyond, answered_up_to, request_stands, requests_of
from .client import Client, is_active, is_temporary, traceparent_var
from .files import FileText, RunFiles, prompt_with, read_file_texts
from .errors import (BothyError, Forbidden, IdempotencyKeyReused, NotFound, RunClaimed, RunNotActive, TriggerRevoked,
                     Unauthorized)
from .inplay import InPlay
from .live import LiveWriter
from .outbox import Outbox, OutboxEntry
from .render import new_boundary, render, with_follow_ups
from .tools import Approver, use_task
from .types import ContextMessage, Prompt, RunContext, parse_time
from .ws import AgentStream, NoWebSocket

log = logging.getLogger("bothy_agent")

#: How often the acknowledger acts unasked, and how often the run of a
#: follow-up that holds the position, in a run this process does not hold,
#: is read to see whether it ended.
ACK_EVERY = 1.0
BLOCKER_CHECK_EVERY = 3.0
MIN_RENEW_INTERVAL = 0.2
MIN_POLL_INTERVAL = 0.2


def new_holder() -> str:
    """A fresh holder id for this process: ``adapter-`` and 16 hex digits."""
    return "adapter-" + secrets.token_hex(8)


@dataclass
class Config:
    """How the adapter runs. ``server`` and ``token`` default to
    ``BOTHY_SERVER`` and ``BOTHY_AGENT_TOKEN`` (:meth:`from_env`).

    transport: ``auto`` (WebSocket, long poll when the server offers none),
    ``ws`` or ``poll``. after: the stream cursor to start from (None: after
    the acknowledged position). holder: this process's holder (fresh when
    empty). once: stop after the first run. max_attempts, retry_backoff:
    repeats of idempotent calls. follow_up_rounds: further rounds for
    follow-ups that arrive while the handler works (negative: none).
    delivery_wait: the longest wait for the follow-ups an answer covers to be
    delivered. outbox: a folder that keeps answers across a crash. live:
    stream into the run's live box, pieces sent every live_interval seconds.
    max_concurrent: runs answered at once (0: no limit).
    """

    server: str = ""
    token: str = ""
    transport: str = "auto"
    poll_wait: int = 25
    after: str | None = None
    holder: str = ""
    once: bool = False
    max_attempts: int = 5
    retry_backoff: float = 0.5
    follow_up_rounds: int = 3
    delivery_wait: float = 120.0
    outbox: str = ""
    live: bool = False
    live_interval: float = 0.1
    max_concurrent: int = 0

    @classmethod
    def from_env(cls, **kw: Any) -> Config:
        """A Config from ``BOTHY_SERVER`` and ``BOTHY_AGENT_TOKEN``, with kw set on it."""
        kw.setdefault("server", os.environ.get("BOTHY_SERVER", ""))
        kw.setdefault("token", os.environ.get("BOTHY_AGENT_TOKEN", ""))
        return cls(**kw)


class FailRun(Exception):
    """Raised by a handler (or :meth:`Task.fail`) to end the run FAILED with a
    reason (no content)."""

    def __init__(self, reason: str = "model_error") -> None:
        super().__init__(reason)
        self.reason = reason or "model_error"


class Task:
    """One round of a run, as the handler sees it: the context, the prompt
    rendered for a model, the follow-ups not shown before, and the run's
    in-play trust. :meth:`answer` gives the reply; the SDK posts it."""

    def __init__(self, prompt: Prompt, play: InPlay, fresh: list[ContextMessage] | None = None,
                 live: LiveWriter | None = None, approver: Approver | None = None, files: RunFiles | None = None) -> None:
        self.prompt = prompt
        self.follow_ups: list[ContextMessage] = fresh or []
        self._play = play
        self._files = files
        self._live = live
        self._approver = approver
        self._answer: str | None = None

    @classmethod
    def standalone(cls, prompt: Prompt) -> Task:
        """A Task for a prompt outside a run the SDK drives (a backend called on
        its own, a test): its in-play trust starts at the prompt's lowest, and
        consequential tools need an approval nobody can give."""
        return cls(prompt, InPlay(prompt.lowest))

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.prompt.context.run_id

    @property
    def holder(self) -> str:
        """The holder this process claimed the run as ("" outside a run): what a
        handler names on its own calls on the run (``holder_headers``)."""
        return self._approver.holder if self._approver is not None else ""

    @property
    def context(self) -> RunContext:
        """The run's context, follow-ups included."""
        return self.prompt.context

    def in_play(self) -> str:
        """The run's in-play trust: the lowest of everything its model read."""
        return self._play.get()

    def lower(self, trust: str) -> None:
        """Lowers the in-play trust for something the handler read itself."""
        self._play.lower_other(trust)

    async def attach_file(self, name: str, content: bytes) -> str:
        """Uploads content as a file named name and attaches it to the run's
        answer: every retry and replay of the answer carries it. A later round
        (follow-ups) attaches anew; the same name and content is not uploaded
        twice. Returns the file's id. Raises NoFilesOut without the capability
        files_out."""
        if self._files is None:
            raise RuntimeError("this Task has no connection to the server; it attaches no files")
        return await self._files.attach(name, content)

    async def file_text(self, file_id: str) -> FileText:
        """Reads the text of a file of the run's context (the text API). It is
        data whoever uploaded it: show it to a model only as FileText.block
        renders it. Reading lowers the run's in-play trust to UNVERIFIED, so a
        consequential tool after it needs the person's approval."""
        if self._files is None or self._files.client is None:
            raise RuntimeError("this Task has no connection to the server; it reads no files")
        self._play.lower_file()
        return FileText.from_json(await self._files.client.file_text(file_id))

    async def prompt_with_files(self) -> Prompt:
        """The prompt with the text of every READY file of the context appended
        as DATA blocks with trust unverified; lowers the in-play trust when it
        appended any."""
        if self._files is None or self._files.client is None:
            return self.prompt
        texts = await read_file_texts(self._files.client, self.prompt)
        if not texts:
            return self.prompt
        self._play.lower_file()
        return prompt_with(self.prompt, texts)

    def stream(self, text: str) -> None:
        """Adds a piece of the answer to the run's live box (with Config.live)."""
        if self._live is not None and text:
            self._live.add(text)

    def status(self, line: str) -> None:
        """Sets the live box's status line ("searching the wiki")."""
        if self._live is not None:
            self._live.add("", line)

    async def answer(self, text: str) -> None:
        """Gives the run's answer; the SDK posts it under the request's key once
        the handler returns."""
        if not text or not text.strip():
            raise ValueError("an answer needs text")
        self._answer = text

    def fail(self, reason: str = "model_error") -> None:
        """Ends the run FAILED with reason (raises FailError out of the handler)."""
        raise FailRun(reason)


Handler = Callable[[Task], Awaitable[None]]


@dataclass
class _Active:
    run_id: str
    approver: Approver
    model: asyncio.Task | None = None
    cancel_requested: bool = False
    lost: bool = False
    ended: bool = False
    stop_reason: str = ""
    shown: set[str] = field(default_factory=set)

    def stop_model(self) -> None:
        """Ends the model call (the handler's coroutine) of the run at once."""
        if self.model is not None and not self.model.done():
            self.model.cancel()


class _Stop(Exception):
    """The run is done with (lost, cancelled or the adapter stops)."""


class Adapter:
    """Answers the runs of an agent with a handler. Use :func:`run`, or create
    one and await :meth:`run`."""

    def __init__(self, config: Config, handler: Handler, client: Client | None = None) -> None:
        self.cfg = config
        self.handler = handler
        self.client = client or Client(config.server, config.token)
        if not self.cfg.holder:
            self.cfg.holder = new_holder()
        self.ledger = Ledger()
        self.active: dict[str, _Active] = {}
        self.cursor = config.after
        self.box = Outbox(config.outbox) if config.outbox else None
        self._runs: set[asyncio.Task] = set()
        self._sem = asyncio.Semaphore(config.max_concurrent) if config.max_concurrent > 0 else None
        self._done = asyncio.Event()

    async def _retry(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Repeats an idempotent call on temporary errors, after Retry-After or
        an exponential backoff, at most max_attempts times."""
        delay = self.cfg.retry_backoff
        for attempt in range(1, self.cfg.max_attempts + 1):
            try:
                return await fn()
            except BothyError as e:
                if not is_temporary(e) or attempt >= self.cfg.max_attempts:
                    raise
                pause = max(delay, e.retry_after)
                log.warning("call failed (%s), retrying in %.1fs", e.code, pause)
                await asyncio.sleep(pause)
                delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")

    async def run(self) -> None:
        """Proves the token, then follows the stream until cancelled (or, with
        once, until the first run ended)."""
        me = await self._retry(self.client.viewer)
        if me.get("kind") != "AGENT":
            raise Forbidden("Viewer", f"the token belongs to a principal of kind {str(me.get('kind')).lower()}, not to an agent",
                            code="forbidden")
        log.info("adapter started holder=%s once=%s", self.cfg.holder, self.cfg.once)
        if self.box is not None:
            await self._replay_outbox()
        stream = AgentStream(self.client.server, self.client.token) if self.cfg.transport in ("ws", "auto") else None
        acks_stop = asyncio.Event()
        acker = asyncio.create_task(self._ack_loop(acks_stop))
        claimed = False
        backoff = self.cfg.retry_backoff
        try:
            while not self._done.is_set():
                began = asyncio.get_running_loop().time()
                try:
                    page = await self._next_or_done(stream)
                    if page is None:
                        break
                except NoWebSocket:
                    log.warning("no WebSocket at the server: reading the stream by long poll from now on")
                    await stream.close()  # type: ignore[union-attr]
                    stream = None
                    continue
                except (Unauthorized, Forbidden):
                    raise
                except BothyError as e:
                    if e.code == "validation_failed":
                        raise
                    pause = max(backoff, e.retry_after)
                    log.warning("poll failed (%s), retrying in %.1fs", e.code, pause)
                    await asyncio.sleep(pause)
                    backoff = min(backoff * 2, 30.0)
                    continue
                backoff = self.cfg.retry_backoff
                for ev in page.get("events") or []:
                    if self._done.is_set():
                        break
                    dealt, claimed = await self._handle(ev, claimed)
                    p = ev.get("payload") or {}
                    self.ledger.add(ev["seq"], ev.get("type", ""), dealt, p.get("run_id", ""), p.get("message_id", ""))
                    self.cursor = ev["seq"]
                else:
                    if page.get("nextAfter"):
                        self.cursor = page["nextAfter"]
                self.ledger.kick.set()
                if not page.get("events"):
                    await asyncio.sleep(max(0.0, MIN_POLL_INTERVAL - (asyncio.get_running_loop().time() - began)))
            if self._runs:
                await asyncio.gather(*self._runs, return_exceptions=True)
        finally:
            for t in list(self._runs):
                t.cancel()
            if self._runs:
                await asyncio.gather(*self._runs, return_exceptions=True)
            # The flag, not the cancel alone, ends the loop: Python 3.11's
            # asyncio.wait_for swallows a cancel that arrives just as the
            # kick it waits for is set (fixed in 3.12), and the loop would
            # then run on and this wait would never end.
            acks_stop.set()
            self.ledger.kick.set()
            acker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acker
            if stream is not None:
                await stream.close()
            with contextlib.suppress(Exception):
                # Runs that ended released their follow-ups: acknowledge what
                # is dealt with, so that the next process does not read it again.
                await asyncio.wait_for(self._ack_once(False), 5)
            await self.client.aclose()

    async def _next_or_done(self, stream: AgentStream | None) -> dict[str, Any] | None:
        """The next page of the stream, or None once the adapter is done (with
        once, the run ended): a long poll in flight then ends at once."""
        poll = asyncio.ensure_future(self._next(stream))
        done = asyncio.ensure_future(self._done.wait())
        try:
            await asyncio.wait({poll, done}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()
        if not poll.done():
            poll.cancel()
            with contextlib.suppress(asyncio.CancelledError, BothyError, NoWebSocket):
                await poll
            return None
        return poll.result()

    async def _next(self, stream: AgentStream | None) -> dict[str, Any]:
        wait = self.cfg.poll_wait
        if stream is not None:
            return await stream.next(self.cursor, wait)
        return await self.client.agent_events(self.cursor, wait)

    async def _ack_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.ledger.kick.wait(), ACK_EVERY)
            self.ledger.kick.clear()
            try:
                await self._ack_once(True)
            except BothyError as e:
                log.warning("ack failed (%s)", e.code)

    async def _ack_once(self, check: bool) -> None:
        learn = False
        head, due = self.ledger.head(BLOCKER_CHECK_EVERY)
        if check and due and head is not None:
            try:
                r = await self.client.run(head.run_id)
                if not is_active(r.get("state", "")):
                    self.ledger.run_ended(head.run_id)
                else:
                    learn = True
            except NotFound:
                self.ledger.run_ended(head.run_id)
            except BothyError:
                pass
        up_to, last = self.ledger.target(), self.ledger.last_acked
        if not up_to or up_to == last:
            if not learn:
                return
            # The answer of an unmoved acknowledgement says whether another
            # process's acknowledgement has passed the follow-up meanwhile.
            up_to = last or "0"
        pos = await self.client.ack_agent_events(up_to)
        self.ledger.acked(up_to, pos)

    async def _handle(self, ev: dict[str, Any], claimed: bool) -> tuple[bool, bool]:
        """Acts on one event; returns whether it is dealt with and whether a run
        was claimed (for once)."""
        typ, p = ev.get("type"), ev.get("payload") or {}
        if typ == "agent.invocation":
            run_id, thread_id = p.get("run_id", ""), p.get("thread_id", "")
            if not run_id or not thread_id:
                log.error("invocation payload without run or thread id seq=%s", ev.get("seq"))
                return True, claimed
            if self.cfg.once and claimed:
                log.info("invocation not handled: once has a run already run_id=%s", run_id)
                return False, claimed
            if run_id in self.active:
                return True, claimed
            # The context read and the claim continue the run's trace.
            token = traceparent_var.set(p.get("traceparent") or "")
            try:
                prepared = await self._prepare(run_id)
            finally:
                traceparent_var.reset(token)
            if prepared is None:
                return True, claimed
            rc, started = prepared
            tp = started.get("traceparent") or p.get("traceparent") or ""
            run = _Active(run_id, Approver(self.client, run_id, self.cfg.holder))
            self.active[run_id] = run
            # Tracked before the next event: the run's follow-ups wait for its model.
            self.ledger.track(run_id)
            task = asyncio.create_task(self._serve(run, p, rc, started, tp))
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
            return True, True
        if typ == "agent.approval_decided":
            run = self.active.get(p.get("run_id", ""))
            if run is not None:
                run.approver.decided(p.get("approval_id", ""), p.get("state", ""), p.get("option_id", ""))
        elif typ == "run.cancel_requested":
            run_id = p.get("run_id", "")
            run = self.active.get(run_id)
            if run is not None:
                log.info("cancel requested for a run in progress run_id=%s", run_id)
                run.cancel_requested = True
                run.stop_model()
            elif run_id:
                await self._confirm_untracked_cancel(run_id)
        return True, claimed

    async def _prepare(self, run_id: str) -> tuple[RunContext, dict[str, Any]] | None:
        """Reads the run's context, then claims it: the adapter commits to a run
        only once it holds what it needs to answer."""
        try:
            raw = await self._retry(lambda: self.client.run_context(run_id))
        except NotFound:
            log.info("invocation skipped: the run is no longer active run_id=%s", run_id)
            return None
        except BothyError as e:
            log.error("run context unreadable (%s) run_id=%s", e.code, run_id)
            await self._finish(None, run_id, "FAILED", "context_unavailable")
            return None
        try:
            started = await self._retry(lambda: self.client.start_run(run_id, self.cfg.holder))
        except (RunNotActive, RunClaimed, TriggerRevoked) as e:
            log.info("invocation skipped (%s) run_id=%s", e.reason, run_id)
            return None
        except BothyError as e:
            log.error("run start refused (%s) run_id=%s", e.code, run_id)
            await self._finish(None, run_id, "FAILED", "start_failed")
            return None
        return RunContext.from_json(run_id, raw), started

    async def _serve(self, run: _Active, inv: dict[str, Any], rc: RunContext, started: dict[str, Any], tp: str) -> None:
        traceparent_var.set(tp)
        try:
            await self._answer(run, inv, rc, started)
        except _Stop:
            pass
        except asyncio.CancelledError:
            # The adapter stops: the run is failed so that it is not left waiting for its lease.
            if not run.ended and not run.lost:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self._finish(run, run.run_id, "FAILED", "adapter_stopped")), 5)
            raise
        except Exception:  # noqa: BLE001 - one run's failure must not end the adapter
            log.exception("run failed run_id=%s", run.run_id)
            if not run.ended and not run.lost:
                await self._finish(run, run.run_id, "FAILED", "adapter_error")
        finally:
            self.active.pop(run.run_id, None)
            self.ledger.release(run.run_id, run.ended)
            if self.cfg.once:
                self._done.set()

    async def _keep_lease(self, run: _Active, until: str | None) -> None:
        every = MIN_RENEW_INTERVAL
        if until:
            with contextlib.suppress(ValueError):
                every = max(MIN_RENEW_INTERVAL, (parse_time(until) - datetime.now(timezone.utc)).total_seconds() / 3)
        while True:
            await asyncio.sleep(every)
            try:
                await self.client.renew_run(run.run_id, self.cfg.holder)
            except TriggerRevoked:
                log.info("the run's person lost trigger while the model worked run_id=%s", run.run_id)
                run.cancel_requested = True
                run.stop_model()
                return
            except RunNotActive:
                try:
                    r = await self.client.run(run.run_id)
                    if request_stands(r.get("state", ""), r.get("endReason") or ""):
                        # The answer goes out without the run after a timeout.
                        return
                except BothyError:
                    pass
                run.ended = run.lost = True
                run.stop_model()
                return
            except RunClaimed:
                log.warning("claim lost while the model worked run_id=%s", run.run_id)
                run.lost = True
                run.stop_model()
                return
            except BothyError as e:
                log.warning("lease renewal failed (%s)", e.code)

    def _interrupted(self, run: _Active) -> str:
        if run.lost:
            return "lost"
        if run.cancel_requested:
            return "cancelled"
        return ""

    async def _check(self, run: _Active) -> None:
        """Ends the run's work when it is no longer this process's to answer."""
        why = self._interrupted(run)
        if why == "cancelled":
            log.info("run cancelled before its answer; nothing is posted run_id=%s", run.run_id)
            await self._finish(run, run.run_id, "CANCELLED")
        if why:
            raise _Stop(why)

    async def _round(self, run: _Active, rc: RunContext, boundary: str, play: InPlay | None,
                     live: LiveWriter | None, files: RunFiles) -> tuple[str | None, BaseException | None, InPlay]:
        p = with_follow_ups(render(rc, boundary), rc.follow_ups)
        if play is None:
            play = InPlay(p.lowest)
        else:
            play.lower_context(p.lowest)
        play.note_elements(p.context.elements())
        fresh = [f for f in rc.follow_ups if f.message_id not in run.shown]
        files.new_round()
        task = Task(p, play, fresh, live, run.approver, files)

        async def call() -> str | None:
            use_task(task)
            if self._sem is None:
                await self.handler(task)
            else:
                # Only the handler waits for a slot: the lease is kept meanwhile.
                async with self._sem:
                    await self.handler(task)
            return task._answer

        run.model = asyncio.create_task(call())
        try:
            await asyncio.wait({run.model})
        except asyncio.CancelledError:
            run.model.cancel()
            raise
        run.shown.update(f.message_id for f in fresh)
        if run.model.cancelled():
            return None, asyncio.CancelledError(), play
        err = run.model.exception()
        if err is not None:
            return None, err, play
        text = run.model.result()
        if not text or not text.strip():
            return None, FailRun("model_error"), play
        return text, None, play

    async def _answer(self, run: _Active, inv: dict[str, Any], rc: RunContext, started: dict[str, Any]) -> None:
        lease = asyncio.create_task(self._keep_lease(run, started.get("leaseExpiresAt")))
        try:
            await self._answer_leased(run, inv, rc, started)
        finally:
            lease.cancel()

    async def _answer_leased(self, run: _Active, inv: dict[str, Any], rc: RunContext, started: dict[str, Any]) -> None:
        run_id = run.run_id
        trigger = started.get("triggeringMessageId") or inv.get("message_id") or rc.trigger_message.message_id
        keys = [a.get("clientMsgId", "") for a in started.get("answers") or []]
        fids = [f.message_id for f in rc.follow_ups]
        reqs = requests_of(trigger, fids)
        if answered_up_to(run_id, reqs, keys) == len(reqs):
            # A takeover of a run an earlier holder answered: nothing twice.
            log.info("every request of the run has an answer already; finishing it run_id=%s", run_id)
            self.ledger.cover(run_id, fids)
            await self._deliver(run, rc.follow_ups, rc)
            await self._finish(run, run_id, "COMPLETED")
            return
        live = None
        if self.cfg.live:
            live = LiveWriter(self.client, run_id, self.cfg.holder, self.cfg.live_interval)
            live.start()
        try:
            await self._rounds(run, inv, rc, trigger, live)
        finally:
            if live is not None:
                await live.close()

    async def _rounds(self, run: _Active, inv: dict[str, Any], rc: RunContext, trigger: str, live: LiveWriter | None) -> None:
        run_id, thread_id = run.run_id, inv["thread_id"]
        boundary = new_boundary()
        play: InPlay | None = None
        files = RunFiles(self.client)
        shown: list[ContextMessage] = []
        latest, gone, rounds, text = rc, False, 0, ""
        while True:
            rounds += 1
            if live is not None and rounds > 1:
                live.restart()
            t, err, play = await self._round(run, rc, boundary, play, live, files)
            if live is not None and run.cancel_requested and not run.lost:
                # Stopped by a person: the box says so before the cancel is confirmed.
                await live.stopped()
            await self._check(run)
            if err is not None:
                reason = err.reason if isinstance(err, FailRun) else "model_error"
                log.warning("model failed (%s: %s) run_id=%s", type(err).__name__, reason, run_id)
                await self._finish(run, run_id, "FAILED", reason)
                return
            text, shown = t or "", rc.follow_ups
            # The model has seen these follow-ups: their events may be acknowledged.
            self.ledger.cover(run_id, [f.message_id for f in shown])
            try:
                raw = await self._retry(lambda: self.client.run_context(run_id))
            except NotFound:
                gone = True
                break
            except BothyError as e:
                log.warning("run context unreadable after the answer (%s); posting without looking for follow-ups", e.code)
                break
            finally:
                await self._check(run)
            latest = RunContext.from_json(run_id, raw)
            seen = {f.message_id for f in shown}
            fresh = [f.message_id for f in latest.follow_ups if f.message_id not in seen]
            if not fresh:
                break
            if rounds > self.cfg.follow_up_rounds:
                log.info("follow-ups left to the next run: the rounds are used up run_id=%s", run_id)
                break
            rc = latest
        if live is not None:
            await live.close()
        reqs = requests_of(trigger, [f.message_id for f in shown])
        key = answer_key(run_id, reqs[-1])
        assert play is not None
        attached = list(files.attached)
        if gone:
            await self._after_end(run, thread_id, key, reqs, text, play.get(), attached)
            return
        await self._deliver(run, shown, latest)
        declared = play.get()
        try:
            res = await self._post(thread_id, key, text, run_id, declared, attached)
        except IdempotencyKeyReused:
            log.info("the request has an answer under its key already; finishing the run run_id=%s", run_id)
            await self._finish(run, run_id, "COMPLETED")
            return
        except RunNotActive:
            await self._after_end(run, thread_id, key, reqs, text, declared, attached)
            return
        except TriggerRevoked:
            log.info("reply dropped: the run's person lost trigger run_id=%s", run_id)
            await self._finish(run, run_id, "CANCELLED")
            return
        except RunClaimed:
            log.warning("answer refused: another adapter process holds the run now run_id=%s", run_id)
            run.lost = True
            return
        except BothyError as e:
            log.error("answer refused (%s/%s) run_id=%s", e.code, e.reason, run_id)
            await self._finish(run, run_id, "CANCELLED" if run.cancel_requested else "FAILED",
                               "" if run.cancel_requested else "answer_rejected")
            return
        # A cancel that arrived while the answer was posted is answered by completing.
        await self._finish(run, run_id, "COMPLETED")
        log.info("run answered run_id=%s message_id=%s replayed=%s rounds=%d input_trust=%s", run_id,
                 res["message"]["id"], res.get("replayed"), rounds, declared.lower())

    async def _deliver(self, run: _Active, covered: list[ContextMessage], latest: RunContext) -> None:
        """Waits until the follow-ups an answer covers are delivered, so that the
        run's end absorbs them instead of promoting them to a next run."""
        state = {f.message_id: f.already_delivered for f in latest.follow_ups}
        wait = [f.message_id for f in covered if f.message_id in state and not state[f.message_id]]
        if wait:
            waiter = asyncio.create_task(self.ledger.await_delivered(run.run_id, wait))
            stopper = asyncio.create_task(self._until_interrupted(run))
            done, _ = await asyncio.wait({waiter, stopper}, timeout=self.cfg.delivery_wait, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            stopper.cancel()
            if not done:
                log.warning("follow-ups not delivered in time; answering anyway run_id=%s", run.run_id)
        await self._check(run)

    async def _until_interrupted(self, run: _Active) -> None:
        while not self._interrupted(run):
            await asyncio.sleep(0.1)

    async def _after_end(self, run: _Active, thread_id: str, key: str, reqs: list[str], text: str, declared: str,
                         attached: list[str]) -> None:
        """Decides about a reply whose run ended (or whose context is gone) before
        it was posted (docs/adapter.md#when-the-run-ended-first)."""
        try:
            r = await self._retry(lambda: self.client.run(run.run_id))
        except BothyError as e:
            log.warning("reply dropped: the run is unreadable (%s) run_id=%s", e.code, run.run_id)
            return
        if is_active(r.get("state", "")):
            log.info("reply dropped: the run's person lost trigger run_id=%s", run.run_id)
            await self._finish(run, run.run_id, "CANCELLED")
            return
        run.ended = True
        state, reason = r.get("state", ""), r.get("endReason") or ""
        if not request_stands(state, reason):
            log.info("reply dropped: the run ended %s (%s) run_id=%s", state.lower(), reason, run.run_id)
            return
        keys = [a.get("clientMsgId", "") for a in r.get("answers") or []]
        if answered_up_to(run.run_id, reqs, keys) == len(reqs) or answered_beyond(run.run_id, reqs, keys):
            log.info("reply dropped: the run ended and its requests have answers run_id=%s", run.run_id)
            return
        try:
            await self._post(thread_id, key, text, "", declared, attached)
            log.info("answer posted after the run ended run_id=%s", run.run_id)
        except BothyError as e:
            log.error("answer without run id refused (%s)", e.code)

    async def _post(self, thread_id: str, key: str, text: str, run_id: str, declared: str,
                    attached: list[str] | None = None) -> dict[str, Any]:
        """Posts under key with the files attached; every retry sends the
        identical request, so the server stores it once. With an outbox it is
        on disk first."""
        files = list(attached or [])
        if self.box is not None:
            self.box.put(OutboxEntry(key, thread_id, run_id, self.cfg.holder, text, declared, attachment_file_ids=files))
        try:
            res = await self._retry(lambda: self.client.create_message(thread_id, self.cfg.holder, key, text, run_id, declared,
                                                                       files))
        except BothyError as e:
            if self.box is not None and not e.temporary:
                self.box.remove(key)
            raise
        if self.box is not None:
            self.box.remove(key)
        return res

    async def _replay_outbox(self) -> None:
        """Sends the answers an earlier process wrote and did not see confirmed,
        under their keys and as the holder that wrote them."""
        assert self.box is not None
        for e in self.box.entries():
            try:
                await self._retry(lambda: self.client.create_message(e.thread_id, e.holder, e.key, e.text, e.run_id,
                                                                      e.input_trust or "UNVERIFIED", e.attachment_file_ids))
                self.box.remove(e.key)
                log.info("outbox: answer sent after a restart key=%s", e.key)
            except RunNotActive:
                with contextlib.suppress(BothyError):
                    r = await self._retry(lambda: self.client.run(e.run_id))
                    keys = {a.get("clientMsgId") for a in r.get("answers") or []}
                    if not is_active(r.get("state", "")) and request_stands(r.get("state", ""), r.get("endReason") or "") \
                            and e.key not in keys:
                        await self.client.create_message(e.thread_id, "", e.key, e.text, "", e.input_trust or "UNVERIFIED",
                                                         e.attachment_file_ids)
                self.box.remove(e.key)
            except BothyError as err:
                if err.temporary:
                    log.warning("outbox: answer not sent; it stays for the next start (%s)", err.code)
                else:
                    log.info("outbox: answer dropped: the server refused it (%s/%s)", err.code, err.reason)
                    self.box.remove(e.key)

    async def _finish(self, run: _Active | None, run_id: str, outcome: str, reason: str = "") -> str:
        """Ends the run; returns the end state the server set ("" when the run had
        ended already or the call failed)."""
        try:
            r = await self._retry(lambda: self.client.finish_run(run_id, self.cfg.holder, outcome, reason))
        except RunNotActive:
            if run is not None:
                run.ended = True
            return ""
        except BothyError as e:
            log.error("finish refused (%s/%s) run_id=%s", e.code, e.reason, run_id)
            return ""
        if run is not None:
            run.ended = True
        log.info("run finished run_id=%s outcome=%s", run_id, r.get("state"))
        return r.get("state", "")

    async def _confirm_untracked_cancel(self, run_id: str) -> None:
        """Confirms the cancel of a run an earlier process started: nobody works on it."""
        try:
            r = await self._retry(lambda: self.client.run(run_id))
        except BothyError:
            return
        if is_active(r.get("state", "")) and r.get("cancelRequested"):
            await self._finish(None, run_id, "CANCELLED")


async def arun(config: Config, handler: Handler) -> None:
    """Runs the adapter on the current event loop until cancelled (or, with
    ``config.once``, until its first run ended)."""
    if not config.token:
        raise ValueError("bothy: Config needs a token (BOTHY_AGENT_TOKEN)")
    await Adapter(config, handler).run()


def run(config: Config, handler: Handler) -> None:
    """Runs the adapter until SIGINT or SIGTERM (or, with ``config.once``,
    until its first run ended): the entry point of an agent program. An
    adapter that cannot run (no token, a token that does not authenticate,
    a server that stays away) ends the program with its reason and exit
    status 1; use :func:`arun` to handle these yourself."""

    async def main() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, task.cancel)  # type: ignore[union-attr]
        with contextlib.suppress(asyncio.CancelledError):
            await arun(config, handler)

    try:
        asyncio.run(main())
    except (BothyError, ValueError) as e:
        raise SystemExit(str(e)) from None

