"""Keeps a tool call's text out of the streamed answer, as Ollama's parser does.

With tools offered, text that may still turn out to be a call is held back until it is
known not to be one, then released, so a call never flickers into the answer: from a
``<tool_call>`` tag on (and a trailing piece of text that could begin one), and an answer
that so far could be nothing but JSON calls (bare or in a code fence), which is how small
models often call. At the end the calls are read as ``engine.chat.tools.parse_tool_calls``
reads them; held text that is no call is released then. The answer's message keeps the
raw text: the tool loop reads its calls from there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import replace

from engine.chat.events import DoneEvent, Event, TokenEvent
from engine.chat.tools import TOOL_CALL_OPEN, parse_tool_calls

FENCE = "```"
_FENCE_OPEN = re.compile(r"```[a-z]*")              # a code fence and its language
_FENCE_START = re.compile(r"`{1,2}|```[a-z]*")      # what may still become one


class CallHolder:
    """One answer's text, released as far as it cannot be a call of the offered tools."""

    def __init__(self, names: Collection[str]) -> None:
        self.names = frozenset(names)
        self.raw = ""               # the answer as the model wrote it
        self.released = 0           # characters of ``raw`` handed out so far
        self._bare = True           # the answer may still be JSON calls only
        self._tag = -1              # where the first <tool_call> tag starts (-1: none yet)

    def apply(self, event: Event) -> Event:
        """The event as listeners get it: a token carries the text released with it, the
        DoneEvent the rest (``tail``) and the whole answer as shown (``text``). With no
        tools offered every event passes unchanged."""
        if not self.names:
            return event
        if isinstance(event, TokenEvent):
            return replace(event, text=self.push(event.text))
        if isinstance(event, DoneEvent):
            tail = self.push(event.tail) + self.finish()
            return replace(event, text=self.shown(), tail=tail)
        return event

    def push(self, text: str) -> str:
        """Adds the model's next text; returns what is now known to be answer text."""
        if self._tag < 0 and text:      # a tag may start in the text held before
            self._tag = (self.raw[-len(TOOL_CALL_OPEN):] + text).find(TOOL_CALL_OPEN)
            if self._tag >= 0:
                self._tag += max(0, len(self.raw) - len(TOOL_CALL_OPEN))
        self.raw += text
        end = self._releasable()
        out = self.raw[self.released:end]
        self.released = max(self.released, end)
        return out

    def finish(self) -> str:
        """The rest of the answer's text, its calls taken out."""
        shown = self.shown()
        out = shown[self.released:]
        self.released = len(shown)
        return out

    def shown(self) -> str:
        """The whole answer as its listeners see it: the text before the first call."""
        _, calls = parse_tool_calls(self.raw, self.names)
        if not calls:
            return self.raw
        return self.raw[:self.raw.index(TOOL_CALL_OPEN)] if TOOL_CALL_OPEN in self.raw else ""

    def _releasable(self) -> int:
        if self._tag >= 0:
            return self._tag
        if self._bare:
            self._bare = _may_be_bare_calls(self.raw, self.names)
            if self._bare:
                return 0
        return len(self.raw) - _partial_tag(self.raw)


def _partial_tag(text: str) -> int:
    """Length of the end of ``text`` that could be the start of a ``<tool_call>`` tag."""
    for size in range(min(len(TOOL_CALL_OPEN) - 1, len(text)), 0, -1):
        if TOOL_CALL_OPEN.startswith(text[-size:]):
            return size
    return 0


def _may_be_bare_calls(text: str, names: Collection[str]) -> bool:
    """Whether ``text`` may still grow into an answer of JSON calls only (each object
    naming an offered tool, optionally in one code fence), as parse_tool_calls reads them."""
    body = text.lstrip()
    if _FENCE_START.fullmatch(body):    # the fence's first line may still go on
        return True
    if opening := _FENCE_OPEN.match(body):
        body = body[opening.end():]
    at = 0
    while (at := _skip(body, at)) < len(body):
        rest = body[at:]
        if rest.startswith(FENCE):      # a closing fence ends the answer
            return not rest[len(FENCE):].strip()
        if FENCE.startswith(rest):
            return True
        if body[at] != "{":
            return False
        end = _object_end(body, at)
        if end is None:         # the object is not finished yet
            return True
        try:
            raw = json.loads(body[at:end])
        except json.JSONDecodeError:
            return False
        name = raw.get("name") if isinstance(raw, dict) else None
        if not (isinstance(name, str) and name in names):
            return False
        at = end
    return True


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n,":
        at += 1
    return at


def _object_end(text: str, start: int) -> int | None:
    """Index after the ``}`` that closes the object opened at ``start``; None while open."""
    depth, in_string, escaped = 0, False, False
    for at in range(start, len(text)):
        char = text[at]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return at + 1
    return None
