"""A conversation's messages and the edits every backend applies to them alike."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.errors import GenerationError


@dataclass(frozen=True)
class Message:
    role: str                       # "system", "user", "assistant", "tool"
    content: str
    images: tuple = ()              # engine.vision ImageInput records
    thinking: str = ""              # an answer's thinking section (kept apart from content)
    tool_calls: tuple = ()          # an answer's engine.chat.tools ToolCall records
    tool_name: str = ""             # a tool result's tool


def drop_answers(messages: list[Message]) -> None:
    """Remove the answers after the last user message (to answer it again)."""
    while messages and messages[-1].role in ("assistant", "tool"):
        messages.pop()
    if not messages:
        raise GenerationError("there is no message to answer again: send one first")


def replace_last_user(messages: list[Message], text: str) -> None:
    """Replace the last user message's text and drop everything after it."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            del messages[index + 1:]
            messages[index] = replace(messages[index], content=text)
            return
    raise GenerationError("there is no user message to edit: send one first")
