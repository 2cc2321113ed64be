"""gpt-oss's reply in the harmony format, split into thinking, answer and tool calls.

The model writes messages ``<|start|>ROLE<|channel|>CHANNEL<|message|>TEXT<|end|>``; the
header may name a recipient (`` to=functions.NAME``, before or after the channel) and a
``<|constrain|>json``, and the last message ends with ``<|return|>`` (the answer is done)
or ``<|call|>`` (a tool call waits for its result). The prompt ends with the first header
opened (``<|start|>assistant``), so a reply starts in a header. By channel:

- ``analysis``: the chain of thought, shown as thinking;
- ``final``: the answer;
- ``commentary`` with a recipient: a call of that tool (``functions.`` dropped from its
  name), its arguments the message's JSON; without one, text the model shows the user
  before its calls, part of the answer.

The end markers are stop tokens, so a reply usually lacks its last one: ``flush`` closes
the open message. Text arrives in deltas that may cut a marker, so a delta's end that could
begin one is held until the next decides it. A call whose arguments are not a JSON object
is no call: its text goes to the answer, so the user sees what the model wrote.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from engine.chat.tools import ToolCall

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
ENDS = ("<|end|>", "<|return|>", "<|call|>")
MARKERS = (START, CHANNEL, MESSAGE, *ENDS)
_MARKER = re.compile("|".join(re.escape(marker) for marker in MARKERS))
_RECIPIENT = re.compile(r"\bto=(\S+?)(?=\s|<\||$)")
_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*(\w+)")
FUNCTIONS = "functions."


def harmony_prompt(prompt_tail: str) -> bool:
    """The prompt ends by opening the assistant's first header, as gpt-oss's templates do."""
    return prompt_tail.rstrip().endswith(START + "assistant")


@dataclass(frozen=True)
class HarmonySplit:
    thinking: str = ""      # delta of the thinking (analysis)
    answer: str = ""        # delta of the answer (final, commentary without a recipient)

    @property
    def in_thinking(self) -> bool:
        return bool(self.thinking)


@dataclass
class HarmonyParser:
    """Feed the reply's deltas with ``push``; ``flush`` at the end; the calls the reply
    made are in ``calls``."""

    calls: list[ToolCall] = field(default_factory=list)
    _state: str = "header"       # "header", "content" or "between" (after an end marker)
    _header: str = ""
    _kind: str = ""              # the open message's part: "thinking", "answer" or "call"
    _recipient: str = ""
    _arguments: str = ""
    _held: str = ""

    def push(self, delta: str) -> HarmonySplit:
        text, self._held = self._held + delta, ""
        out: dict[str, list[str]] = {"thinking": [], "answer": []}
        at = 0
        for match in _MARKER.finditer(text):
            self._text(text[at:match.start()], out)
            self._marker(match[0], out)
            at = match.end()
        rest = text[at:]
        keep = _partial_marker(rest)
        self._text(rest[:len(rest) - keep], out)
        self._held = rest[len(rest) - keep:]
        return HarmonySplit("".join(out["thinking"]), "".join(out["answer"]))

    def flush(self) -> HarmonySplit:
        """Closes the reply: held text is text after all, an open message ends."""
        out: dict[str, list[str]] = {"thinking": [], "answer": []}
        held, self._held = self._held, ""
        self._text(held, out)
        self._end(out)
        return HarmonySplit("".join(out["thinking"]), "".join(out["answer"]))

    def _text(self, text: str, out: dict[str, list[str]]) -> None:
        if not text:
            return
        if self._state == "header":
            self._header += text
        elif self._state == "content":
            if self._kind == "call":
                self._arguments += text
            else:
                out[self._kind].append(text)
        # between messages (after an end marker) stray text is no message's

    def _marker(self, marker: str, out: dict[str, list[str]]) -> None:
        if marker == START:
            self._end(out)
            self._state, self._header = "header", ""
        elif marker == CHANNEL:
            if self._state != "header":  # a header without its <|start|>
                self._end(out)
                self._state, self._header = "header", ""
            self._header += marker
        elif marker == MESSAGE:
            if self._state == "content":  # a second <|message|>: part of the text
                self._text(marker, out)
                return
            self._open()
        else:
            self._end(out)

    def _open(self) -> None:
        """The header is complete: what the message's text is."""
        recipient = _RECIPIENT.search(self._header)
        channel = _CHANNEL_NAME.search(self._header)
        self._recipient = recipient[1] if recipient else ""
        name = channel[1] if channel else "final"
        if self._recipient:
            self._kind = "call"
        elif name == "analysis":
            self._kind = "thinking"
        else:
            self._kind = "answer"
        self._state, self._arguments = "content", ""

    def _end(self, out: dict[str, list[str]]) -> None:
        if self._state == "content" and self._kind == "call":
            call = _call(self._recipient, self._arguments)
            if call is None:
                out["answer"].append(self._arguments)
            else:
                self.calls.append(call)
        self._state, self._kind, self._arguments = "between", "", ""


def _call(recipient: str, arguments: str) -> ToolCall | None:
    try:
        raw = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, dict):
        return None
    return ToolCall(recipient.removeprefix(FUNCTIONS), raw)


def _partial_marker(text: str) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of a marker."""
    for size in range(min(len(text), max(map(len, MARKERS)) - 1), 0, -1):
        if any(marker.startswith(text[-size:]) for marker in MARKERS):
            return size
    return 0
