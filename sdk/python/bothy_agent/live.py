"""The run's live box (docs/adapter.md#the-live-box): what the model streams
reaches every reader of the thread while it writes."""

from __future__ import annotations

import asyncio
import logging

from .errors import BothyError, LiveVersion

STOPPED_STATUS = "stopped"
log = logging.getLogger("bothy_agent")


class LiveWriter:
    """Sends what a run's model streams to its live box, pieces gathered for
    at most ``interval`` seconds. A refusal turns the box off for the run:
    the answer follows as usual."""

    def __init__(self, client, run_id: str, holder: str, interval: float = 0.1) -> None:
        self.client, self.run_id, self.holder = client, run_id, holder
        self.interval = interval if interval > 0 else 0.1
        self.version = 0
        self.text = ""
        self._pending: list[str] = []
        self._status: str | None = None
        self._reset = False
        self.off = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Starts sending in the background."""
        self._task = asyncio.create_task(self._loop())

    def add(self, text: str = "", status: str | None = None) -> None:
        """Adds a piece of the answer, or a new status line."""
        if self.off:
            return
        if text:
            self._pending.append(text)
        if status is not None:
            self._status = status.encode()[:200].decode(errors="ignore")
        self._wake.set()

    def restart(self) -> None:
        """Empties the box with the next update: a new round writes anew."""
        self._pending.clear()
        self._reset = True

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._send()
            await asyncio.sleep(self.interval)

    async def _send(self, final: bool = False, status: str | None = None) -> None:
        if self.off:
            return
        piece = "".join(self._pending)
        self._pending.clear()
        st = status if status is not None else self._status
        self._status = None
        replace = None
        if self._reset:
            replace, self._reset, self.text = "", False, ""
        if not piece and st is None and replace is None and not final:
            return
        base = self.version
        for attempt in range(2):
            try:
                self.version = await self.client.update_run_live(self.run_id, self.holder, base, piece, replace, st, final)
                if replace is not None:
                    self.text = replace
                self.text += piece
                return
            except LiveVersion:
                if attempt:
                    break
                try:
                    base = await self.client.run_live_version(self.run_id)
                except BothyError:
                    break
                replace, piece = self.text + piece, ""
            except BothyError as e:
                log.info("live box not written; the answer follows as usual (%s/%s)", e.code, e.reason)
                break
        self.off = True

    async def close(self) -> None:
        """Stops sending; what is still gathered is dropped (the answer holds the text)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    async def stopped(self) -> None:
        """Marks the box done with status ``stopped`` (a person stopped the run)."""
        await self.close()
        try:
            await self._send(final=True, status=STOPPED_STATUS)
        except Exception:  # noqa: BLE001 - the cancel is confirmed whatever the box says
            pass
