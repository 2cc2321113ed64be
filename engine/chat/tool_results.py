"""A tool's result cut to the room the context has left, so a large one (a fetched page, a
whole file) does not end the answer: the model reads the result's first tokens and a note
saying how much it was shown; the event keeps both sizes for the front ends to show."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.chat.documents import message_room
from engine.chat.messages import Message

CUT_NOTE = "\n[cut: {shown} of {total} tokens shown]"


@dataclass(frozen=True)
class ToolResult:
    text: str       # what the model reads: the result, cut and ending in CUT_NOTE if too long
    shown: int      # tokens of the result the model reads
    total: int      # tokens of the whole result

    @property
    def cut(self) -> bool:
        return self.shown < self.total


FitResult = Callable[[Message], ToolResult]   # a "tool" message -> its result as it fits


def result_room(num_ctx: int, num_predict: int, used: int,
                turn_used: Callable[[], int]) -> int:
    """Tokens a tool result may take: what the conversation so far (``used``, with the
    result's message, empty) leaves beside the room kept for the answer. Under a quarter
    of the context, older turns give way for up to a quarter (the session's fit drops
    them), never the current turn: ``turn_used`` is what the system prompt and the
    messages from the last user message on take. Several results of one answer share
    the room first come, first served."""
    room = message_room(num_ctx, num_predict, used)
    if room >= num_ctx // 4:
        return room
    turn_room = message_room(num_ctx, num_predict, turn_used())
    return max(room, min(turn_room, num_ctx // 4), 0)


def current_turn(messages: list[Message]) -> list[Message]:
    """The system messages and those from the last user message on."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    start = users[-1] if users else 0
    return [m for m in messages[:start] if m.role == "system"] + messages[start:]


def cut_note(shown: int, total: int) -> str:
    """The note a cut result ends with, on its own (for a front end's short line)."""
    return CUT_NOTE.format(shown=shown, total=total).strip()


def cut_to_fit(text: str, room: int, encode: Callable[[str], Sequence],
               decode: Callable[[Sequence], str]) -> ToolResult:
    """``text`` whole if its ``encode`` tokens fit in ``room``, else cut at a token boundary
    to its first tokens, the note included in ``room``."""
    tokens = encode(text)
    total = len(tokens)
    if total <= room:
        return ToolResult(text, total, total)
    shown = max(0, room - len(encode(CUT_NOTE.format(shown=total, total=total))))
    kept = decode(tokens[:shown])
    if kept.endswith("\ufffd") and not text.startswith(kept):   # a character cut in two
        kept = kept.rstrip("\ufffd")
    note = CUT_NOTE.format(shown=shown, total=total)
    return ToolResult(kept + note if kept else note.strip(), shown, total)


def estimated_tokens(text: str) -> list[str]:
    """A server's model has no tokenizer here: about three characters a token, as
    engine.chat.documents.token_counter estimates (the pieces join back into the text)."""
    return [text[at:at + 3] for at in range(0, len(text), 3)]
