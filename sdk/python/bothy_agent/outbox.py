"""The answer outbox (docs/adapter.md#the-answer-outbox): every answer is on
disk before it is sent, and removed once the server stored or refused it
for good, so a process that dies while sending leaves it to the next. The
files are the Go SDK's (agent.Outbox): one JSON file per key, named by the
key's hash, so adapters of either language may share a folder."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .types import parse_time


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass
class OutboxEntry:
    """An answer on its way: its key, thread, run ("" for none), the holder
    that wrote it, its text, the in-play trust it declares and when it was
    written (RFC 3339, UTC)."""

    key: str
    thread_id: str
    run_id: str
    holder: str
    text: str
    input_trust: str = ""
    written: str = field(default_factory=_now)
    attachment_file_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The entry as the Go SDK writes it (empty optional fields left out)."""
        d: dict[str, Any] = {"key": self.key, "thread_id": self.thread_id, "run_id": self.run_id, "holder": self.holder,
                             "text": self.text, "input_trust": self.input_trust, "attachment_file_ids": self.attachment_file_ids,
                             "written": self.written}
        return {k: v for k, v in d.items() if v or k in ("key", "thread_id", "text", "written")}


def _sort_key(e: OutboxEntry) -> datetime:
    try:
        return parse_time(e.written)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)


class Outbox:
    """A folder of answers not yet confirmed, one file per key."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        os.makedirs(folder, mode=0o700, exist_ok=True)

    def _path(self, key: str) -> str:
        # The Go SDK's name: the first 12 bytes of the key's SHA-256, in hex.
        return os.path.join(self.folder, hashlib.sha256(key.encode()).digest()[:12].hex() + ".json")

    def put(self, e: OutboxEntry) -> None:
        """Writes e atomically (a crash leaves the old file or the new one)."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".entry-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(e.to_json(), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path(e.key))
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def remove(self, key: str) -> None:
        """Removes the entry of key (gone already is fine)."""
        try:
            os.remove(self._path(key))
        except FileNotFoundError:
            pass

    def entries(self) -> list[OutboxEntry]:
        """The entries left by earlier processes, oldest first; unreadable
        files (and entries without key or thread) are skipped."""
        out = []
        for n in os.listdir(self.folder):
            if not n.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.folder, n), encoding="utf-8") as f:
                    d = json.load(f)
                e = OutboxEntry(key=d["key"], thread_id=d["thread_id"], run_id=d.get("run_id", ""), holder=d.get("holder", ""),
                                text=d.get("text", ""), input_trust=d.get("input_trust", ""), written=d.get("written", ""),
                                attachment_file_ids=[str(x) for x in d.get("attachment_file_ids") or []])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if e.key and e.thread_id:
                out.append(e)
        out.sort(key=_sort_key)
        return out
