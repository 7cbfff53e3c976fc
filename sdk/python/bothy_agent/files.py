"""Files (docs/design/trust.md#files): a handler reads the text of the files
attached to its run's context as data, never as an instruction, and attaches
files of its own to its answer when an owner granted the agent the capability
files_out. The Go SDK's Task.FileText and Task.AttachFile."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .render import file_text_block, with_file_texts
from .tools import Tool, current_task
from .types import SYSTEM, Prompt

if TYPE_CHECKING:
    from .client import Client

READY = "READY"
MAX_ATTACHMENTS = 10
ATTACH_FILE_TOOL = "attach_file"


class NoFilesOut(Exception):
    """Raised by Task.attach_file for an agent without the capability files_out."""

    def __init__(self) -> None:
        super().__init__("attaching files needs the capability files_out, which an owner grants the agent "
                         "(PUT /api/v1/principals/{principal_id}/capabilities {\"files_out\": true})")


@dataclass
class FileText:
    """A file's extracted text (File.text): ``text`` is None unless ``text_status``
    is READY. It is data whoever uploaded the file: :meth:`block` renders it."""

    file_id: str
    name: str = ""
    mime_type: str = ""
    text_status: str = ""
    text: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FileText:
        """Reads File as FileText selects it."""
        status = d.get("textStatus") or ""
        return cls(file_id=d.get("id") or "", name=d.get("name") or "", mime_type=d.get("mimeType") or "",
                   text_status=status, text=d.get("text") if status == READY else None)

    def block(self, boundary: str) -> str:
        """The text as a DATA block with trust unverified, for a prompt of boundary."""
        return file_text_block(self.file_id, self.name, self.mime_type, self.text_status, self.text, boundary)


@dataclass
class RunFiles:
    """What a run's Tasks share about files: the files uploaded in the run (by
    name and digest, so that a later round attaching the same file reuses its
    upload) and the files the current round attaches to the answer."""

    client: Client | None
    files_out: bool = False
    uploaded: dict[str, str] = field(default_factory=dict)
    attached: list[str] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def new_round(self) -> None:
        """The answer of the last round is the one posted, with its files."""
        self.attached = []

    async def attach(self, name: str, content: bytes) -> str:
        """Uploads (once per name and content) and attaches a file; returns its id."""
        if self.client is None:
            raise RuntimeError("this Task has no connection to the server; it attaches no files")
        async with self.lock:
            if not self.files_out:
                if not await self.client.files_out():
                    raise NoFilesOut()
                self.files_out = True
            key = name + "\0" + hashlib.sha256(content).hexdigest()
            fid = self.uploaded.get(key)
            if fid is None:
                if len(self.attached) >= MAX_ATTACHMENTS:
                    raise ValueError(f"an answer attaches at most {MAX_ATTACHMENTS} files")
                fid = (await self.client.upload_file(name, content))["id"]
                self.uploaded[key] = fid
            if fid not in self.attached:
                if len(self.attached) >= MAX_ATTACHMENTS:
                    raise ValueError(f"an answer attaches at most {MAX_ATTACHMENTS} files")
                self.attached.append(fid)
            return fid


async def read_file_texts(client: Client, prompt: Prompt) -> list[FileText]:
    """The texts of the READY files of prompt's context, in its order; a text
    that cannot be read is left out."""
    out = []
    for m in prompt.context.elements():
        for a in m.attachments:
            if a.text_status != READY:
                continue
            try:
                out.append(FileText.from_json(await client.file_text(a.file_id)))
            except Exception:  # noqa: BLE001 - a file the run cannot read is left out
                continue
    return out


def prompt_with(prompt: Prompt, texts: list[FileText]) -> Prompt:
    """prompt with the texts appended as DATA blocks."""
    return with_file_texts(prompt, [t.block(prompt.boundary) for t in texts])


def attach_file_tool() -> Tool:
    """A tool a model calls to attach a text file to its answer (Task.attach_file,
    which needs files_out): arguments content and name (default answer.txt). Not
    consequential: the file goes where the answer goes."""

    async def call(args: dict[str, Any]) -> str:
        task = current_task()
        if task is None:
            raise RuntimeError("attach_file runs only in a run")
        name = str(args.get("name") or "").strip() or "answer.txt"
        await task.attach_file(name, str(args.get("content") or "").encode())
        return f"Attached {name} to your answer."

    return Tool(name=ATTACH_FILE_TOOL,
                description="Attach a text file to your answer in the chat (a report, a table as CSV, code). "
                            "Everyone who reads your answer can download it.",
                parameters={"type": "object", "properties": {"content": {"type": "string", "description": "the file's text"},
                                                             "name": {"type": "string", "description": "the file's name, e.g. report.md"}},
                            "required": ["content"]},
                output_trust=SYSTEM, call=call)
