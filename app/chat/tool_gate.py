"""The tools a chat offers, from Settings → Tools, and the user's yes for a call.

The Toolbox is built on the worker thread (listing an MCP server's tools starts it) and
kept until the settings change; each MCP call opens its own connection, so nothing stays
running between answers and there is nothing to close at quit. A call that touches the
outside world is put to the GUI thread by a queued signal while the worker waits on an
event; Stop or leaving the conversation answers "refused".
"""

from __future__ import annotations

import json
import shlex
import threading
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal

from app.settings.store import Settings
from engine.chat.events import ToolCallEvent
from engine.chat.tool_results import cut_note
from engine.chat.tools import ToolCall, ToolFailed
from engine.tools.mcp_client import McpServer
from engine.tools.toolbox import Toolbox

RESULT_LENGTH = 120      # characters of a result shown in the chat (the tooltip has it all)


@dataclass
class Answer:
    """The user's answer to one confirmation, handed from the GUI thread to the worker."""

    allowed: bool = False
    always: bool = False            # and every later call of the same tool
    given: threading.Event = field(default_factory=threading.Event)

    def give(self, allowed: bool, always: bool = False) -> None:
        self.allowed, self.always = allowed, allowed and always
        self.given.set()


def server_of(record: dict) -> McpServer:
    """A Settings → Tools entry as an MCP server: a URL, or a command line to start."""
    target = str(record.get("target", "")).strip()
    ask = bool(record.get("ask", True))
    name = str(record.get("name", "")) or target
    if target.startswith(("http://", "https://")):
        return McpServer(name, url=target, ask=ask)
    try:
        words = shlex.split(target)
    except ValueError as error:
        raise ToolFailed(f"MCP server {name}: its command line cannot be read ({error})") from None
    if not words:
        raise ToolFailed(f"MCP server {name} has no command line or URL")
    return McpServer(name, command=words[0], args=tuple(words[1:]), ask=ask)


def build_toolbox(settings: Settings) -> tuple[Toolbox, list[str]]:
    """The tools the settings turn on; a server that cannot list its tools is left out,
    with a note saying so (the chat goes on with the others)."""
    box, notes = Toolbox(), []
    if settings.builtin_tools:
        box.add_builtins()
    for record in settings.mcp_servers:
        try:
            box.add_server(server_of(record))
        except ToolFailed as error:
            notes.append(f"{error}; its tools are left out (check it in Settings → Tools)")
    return box, notes


def describe_call(event: ToolCallEvent) -> tuple[str, str]:
    """The line the chat shows for a call, and its full text for the tooltip."""
    arguments = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False).strip(chr(34))}"
                          for k, v in event.arguments.items())
    arrow = "failed:" if event.failed else "→"
    full = f"Tool call: {event.name}({arguments}) {arrow} {event.result}"
    short = " ".join(full.split())
    note = f" {cut_note(event.shown_tokens, event.total_tokens)}" if event.cut else ""
    if len(short) > RESULT_LENGTH:
        short = short[: RESULT_LENGTH - 1 - len(note)] + "…" + note
    return short, full


class ToolGate(QObject):
    """Builds the chat's Toolbox lazily and asks the GUI for confirmations."""

    confirmRequested = Signal(object, str, object)   # ToolCall, where it runs, Answer
    alwaysAllowed = Signal(str)                      # a tool the user always allows now

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lock = threading.Lock()
        self._built: tuple[Toolbox, list[str]] | None = None
        self.always: set[str] = set()       # tools allowed without asking (Settings' list)

    def reset(self) -> None:
        """The settings changed: the next answer builds the tools again."""
        with self._lock:
            self._built = None

    def prepare(self, settings: Settings) -> tuple[Toolbox | None, list[str]]:
        """Worker thread: the tools to offer (None when none are on) and notes on
        servers left out, the first time only."""
        self.always = set(settings.allowed_tools)
        if not settings.builtin_tools and not settings.mcp_servers:
            return None, []
        with self._lock:
            if self._built is not None:
                return self._built[0], []
            self._built = build_toolbox(settings)
            return self._built

    def confirm(self, call: ToolCall, where: str, cancel: threading.Event) -> bool:
        """Worker thread: wait for the user's answer (none for a tool they always allow);
        a cancelled answer is a refusal."""
        if call.name in self.always:
            return True
        answer = Answer()
        self.confirmRequested.emit(call, where, answer)
        while not answer.given.wait(0.1):
            if cancel.is_set():
                return False
        if answer.always:
            self.always.add(call.name)
            self.alwaysAllowed.emit(call.name)
        return answer.allowed
