"""Tools a model may call: their records, the calls it makes and how Qwen writes them.

Qwen2.5/Qwen3 templates ask for each call as ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>``; we read them as Ollama does: the text before the first tag is the answer's
content, each tag's JSON one call (a missing closing tag at the end of the answer is
tolerated), and ``arguments`` given as a JSON string are decoded. Small models often
drop the tags and answer with the bare JSON, fenced or not; as Ollama's parser reads JSON
objects wherever they stand, an answer that is nothing but such objects naming offered
tools is read as calls too (naming an offered tool keeps ordinary JSON answers text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from engine.errors import LanternError

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(rf"{TOOL_CALL_OPEN}\s*(.*?)\s*(?:{TOOL_CALL_CLOSE}|$)", re.S)
_FENCE = re.compile(r"^```[a-z]*\s*|\s*```$")


class ToolFailed(LanternError):
    """A tool call that did not run or failed; its message becomes the tool's result."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})

    def api(self) -> dict[str, Any]:
        """Ollama's and OpenAI's tool definition (what templates and servers take)."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict

    def api(self) -> dict[str, Any]:
        return {"function": {"name": self.name, "arguments": self.arguments}}


def parse_tool_calls(text: str, names: Collection[str] = ()) -> tuple[str, list[ToolCall]]:
    """The answer's content (before the first call) and its calls; a tag whose JSON is not
    a call stays text, so a model that only talks about ``<tool_call>`` calls nothing.
    ``names``: the offered tools, which an untagged answer's JSON must name."""
    if TOOL_CALL_OPEN not in text:
        calls = _bare_calls(text, names)
        return ("" if calls else text), calls
    calls = []
    for match in _CALL.finditer(text):
        call = _call(match[1])
        if call is None:
            return text, []
        calls.append(call)
    if not calls:
        return text, []
    return text[:text.index(TOOL_CALL_OPEN)].strip(), calls


def _bare_calls(text: str, names: Collection[str]) -> list[ToolCall]:
    """Calls from an answer made only of JSON objects (in a code fence or not)."""
    body, decoder, calls, at = _FENCE.sub("", text.strip()), json.JSONDecoder(), [], 0
    while names and (at := _skip_space(body, at)) < len(body):
        try:
            raw, at = decoder.raw_decode(body, at)
        except json.JSONDecodeError:
            return []
        call = _call_of(raw)
        if call is None or call.name not in names:
            return []
        calls.append(call)
    return calls


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n,":
        at += 1
    return at


def _call(body: str) -> ToolCall | None:
    try:
        raw = json.loads(body)
    except json.JSONDecodeError:
        return None
    return _call_of(raw)


def _call_of(raw: Any) -> ToolCall | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    arguments = raw.get("arguments", raw.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    return ToolCall(raw["name"], arguments if isinstance(arguments, dict) else {})


def tool_from_api(raw: dict) -> Tool:
    """An Ollama/OpenAI tool definition as a Tool."""
    function = raw.get("function", raw)
    return Tool(function["name"], function.get("description", ""),
                function.get("parameters") or {"type": "object", "properties": {}})


def call_from_api(raw: dict) -> ToolCall:
    """A server's tool call (Ollama: arguments an object; OpenAI: a JSON string)."""
    function = raw.get("function", raw)
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            arguments = {}
    return ToolCall(function.get("name", ""), arguments if isinstance(arguments, dict) else {})
