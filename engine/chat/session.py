"""What a chat session does the same wherever its model runs: the conversation's edits, the
tool loop around each answer, and an answer's events collected into its message. The
local session (engine.runtime.session.LocalSession) and a server's
(engine.remote.session.RemoteSession) each make one answer their own way."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from engine.chat.answer_format import Format
from engine.chat.backend import Capability
from engine.chat.call_holder import CallHolder
from engine.chat.events import DoneEvent, Event, TokenEvent
from engine.chat.messages import Message, drop_answers, replace_last_user
from engine.chat.options import Options
from engine.chat.tool_loop import RunTool, answer_with_tools
from engine.chat.tool_results import ToolResult
from engine.chat.tools import Tool, ToolCall

Answer = Generator[Event, None, DoneEvent | None]


class SessionModel(Protocol):
    name: str

    @property
    def capabilities(self) -> frozenset[Capability]: ...


@dataclass
class Session:
    model: SessionModel
    options: Options
    system: str | None = None       # None: the model's system layer
    messages: list[Message] = field(default_factory=list)
    num_top: int = 5                # alternatives reported per token (<= 20)
    format: Format | None = None    # structured output: "json" or a JSON schema
    tools: list[Tool] = field(default_factory=list)  # offered to the model
    # runs one call and returns its result text; raises ToolFailed with
    # a neutral message when the call cannot run. The front end supplies it (confirmation).
    run_tool: RunTool | None = None
    max_tool_rounds: int = 8        # answers in a row that may call tools before we stop
    cancel_event: threading.Event = field(default_factory=threading.Event)

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.model.capabilities

    # -- conversation edits -------------------------------------------------------------

    def send(self, text: str, images: tuple = ()) -> Iterator[Event]:
        """Add a user message and answer it."""
        self.messages.append(Message("user", text, tuple(images)))
        return self._answer()

    def regenerate(self) -> Iterator[Event]:
        """Answer the last user message again (the previous answer is discarded)."""
        drop_answers(self.messages)
        return self._answer()

    def edit_last_user(self, text: str) -> Iterator[Event]:
        """Replace the last user message and answer it anew."""
        replace_last_user(self.messages, text)
        return self._answer()

    def clear(self) -> None:
        self.messages.clear()

    def cancel(self) -> None:
        """Stop the running answer (safe from another thread)."""
        self.cancel_event.set()

    # -- answers --------------------------------------------------------------------------

    def _answer(self) -> Iterator[Event]:
        """Clears the cancel now, not when the answer's first event is asked for: a cancel
        that comes in between must stop it."""
        self.cancel_event.clear()
        return answer_with_tools(self._one_answer, self.messages, self.tools, self.run_tool,
                                 self.max_tool_rounds, self._fit_tool_result)

    def _one_answer(self) -> Answer:
        """One answer's events, the answer appended to ``messages`` (``_collect``)."""
        raise NotImplementedError

    def _fit_tool_result(self, message: Message) -> ToolResult:
        """A tool's result cut to the room the conversation leaves."""
        raise NotImplementedError

    def _collect(self, events: Iterable[Event], before: Message | None = None,
                 calls: list[ToolCall] | None = None) -> Answer:
        """``events`` passed on with tool calls held out of the text, and the answer kept
        in the conversation once it began or ended, even when cut or cancelled.
        ``before``: the answer so far that this one goes on from; ``calls``: the calls
        a server parsed, filled in as the events arrive."""
        reply, thinking, done, arrived = "", "", None, False
        holder = CallHolder(tool.name for tool in self.tools)
        try:
            for event in events:
                if isinstance(event, TokenEvent):
                    reply += event.text
                    thinking += event.thinking_text
                elif isinstance(event, DoneEvent):
                    reply, thinking, done = event.text, event.thinking, event
                arrived = arrived or isinstance(event, TokenEvent | DoneEvent)
                yield holder.apply(event)
        finally:
            if arrived or before is not None:
                before = before or Message("assistant", "")
                self.messages.append(Message("assistant", before.content + reply,
                                             thinking=before.thinking + thinking,
                                             tool_calls=tuple(calls or ())))
        return done
