"""The answer outbox (docs/adapter.md#the-answer-outbox): every answer is on
disk before it is sent, and removed once the server stored or refused it
for good, so a process that dies while sending leaves it to the next."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass


@dataclass
class OutboxEntry:
    """An answer on its way: its key, thread, run ("" for none), the holder
    that wrote it, its text and the in-play trust it declares."""

    key: str
    thread_id: str
    run_id: str
    holder: str
    text: str
    input_trust: str = ""


class Outbox:
    """A folder of answers not yet confirmed, one file per key."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        os.makedirs(folder, mode=0o700, exist_ok=True)

    def _path(self, key: str) -> str:
        # Keys are the server's ids joined; a hash keeps any key a safe name.
        return os.path.join(self.folder, hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")

    def put(self, e: OutboxEntry) -> None:
        """Writes e atomically (a crash leaves the old file or the new one)."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(e), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path(e.key))

    def remove(self, key: str) -> None:
        """Removes the entry of key (gone already is fine)."""
        try:
            os.remove(self._path(key))
        except FileNotFoundError:
            pass

    def entries(self) -> list[OutboxEntry]:
        """The entries left by earlier processes, oldest file first; unreadable
        files are skipped."""
        names = [n for n in os.listdir(self.folder) if n.endswith(".json")]
        names.sort(key=lambda n: os.path.getmtime(os.path.join(self.folder, n)))
        out = []
        for n in names:
            try:
                with open(os.path.join(self.folder, n), encoding="utf-8") as f:
                    out.append(OutboxEntry(**json.load(f)))
            except (OSError, ValueError, TypeError):
                continue
        return out
