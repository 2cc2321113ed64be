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
_JSON_MARKS = re.compile(r'"(?:[^"\\]|\\.)*(")?|[{}\[\]]', re.S)  # a string, or a bracket


class CallHolder:
    """One answer's text, released as far as it cannot be a call of the offered tools."""

    def __init__(self, names: Collection[str]) -> None:
        self.names = frozenset(names)
        self.raw = ""               # the answer as the model wrote it
        self.released = 0           # characters of ``raw`` handed out so far
        self._bare: _BareCalls | None = _BareCalls(self.names)  # None: no bare calls
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
        if self._bare is not None:
            if self._bare.possible(self.raw):
                return 0
            self._bare = None
        return len(self.raw) - _partial_tag(self.raw)


def _partial_tag(text: str) -> int:
    """Length of the end of ``text`` that could be the start of a ``<tool_call>`` tag."""
    for size in range(min(len(TOOL_CALL_OPEN) - 1, len(text)), 0, -1):
        if TOOL_CALL_OPEN.startswith(text[-size:]):
            return size
    return 0


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n,":
        at += 1
    return at


class _BareCalls:
    """Follows an answer while it may still be JSON calls only (each object naming an
    offered tool, bare or in one code fence), as parse_tool_calls reads them; each new
    piece of text is read once, so a long JSON answer costs no more than its length."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.started = False        # the answer's first line is known (a fence or not)
        self.at = 0                 # where the current object starts
        self.scan = 0               # read up to here
        self.depth = 0              # brackets open at ``scan``

    def possible(self, text: str) -> bool:
        if not self.started:
            body = text.lstrip()
            if not body or _FENCE_START.fullmatch(body):   # the first line may go on
                return True
            opening = _FENCE_OPEN.match(body)
            self.scan = len(text) - len(body) + (opening.end() if opening else 0)
            self.started = True
        while True:
            if self.depth == 0:                 # between objects
                self.at = self.scan = _skip(text, self.scan)
                rest = text[self.at:]
                if FENCE.startswith(rest):      # nothing yet, or a fence begun
                    return True
                if rest.startswith(FENCE):      # a closing fence ends the answer
                    return not rest[len(FENCE):].strip()
                if rest[0] != "{":
                    return False
            if not self._read_object(text):
                return True                     # the object is not finished yet
            try:
                raw = json.loads(text[self.at:self.scan])
            except json.JSONDecodeError:
                return False
            name = raw.get("name") if isinstance(raw, dict) else None
            if not (isinstance(name, str) and name in self.names):
                return False

    def _read_object(self, text: str) -> bool:
        """Reads on to the object's closing brace (True) or the end of ``text``."""
        for match in _JSON_MARKS.finditer(text, self.scan):    # strings skipped whole
            mark = match[0]
            if mark[0] == '"':
                if match[1] is None:            # the string goes on in the next text
                    self.scan = match.start()
                    return False
            elif mark in "{[":
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    self.scan = match.end()
                    return True
        self.scan = len(text)
        return False
