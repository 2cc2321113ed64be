"""A local answer's events as Ollama's response objects: one chunk per token (its text,
and with ``logprobs`` the chosen token and its alternatives as Ollama 0.12.11 sends them),
then a done chunk with the counts and durations in ns.

Each token's chunk is sent once the next event is known, so text the decode loop releases
only at the end (``DoneEvent.tail``) joins the last token's chunk: the client sees exactly
one chunk per token, as from the engine in-process."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from engine.chat.events import DoneEvent, Event, TokenEvent
from engine.chat.tools import ToolCall


def created_at() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class ChunkWriter:
    """Builds the chunks of one answer for /api/chat (``chat=True``) or /api/generate."""

    def __init__(self, model: str, chat: bool, top_logprobs: int | None) -> None:
        self.model, self.chat, self.top_logprobs = model, chat, top_logprobs
        self._pending: tuple[str, str, dict | None] | None = None   # text, thinking, logprob
        self.finished: DoneEvent | None = None

    def chunks(self, events: Iterator[Event]) -> Iterator[dict]:
        """Every chunk but the done one (``done`` builds it once tool calls are known)."""
        for event in events:
            if isinstance(event, TokenEvent):
                if self._pending is not None:
                    yield self._chunk(*self._pending)
                self._pending = (event.text, event.thinking_text, self._logprob(event))
            elif isinstance(event, DoneEvent):
                self.finished = event
                pending = self._pending or ("", "", None)
                text = pending[0] + event.tail
                if self._pending is not None or text:
                    yield self._chunk(text, pending[1], pending[2])
                self._pending = None

    def done(self, done: DoneEvent | None, load_ns: int, total_ns: int,
             calls: tuple[ToolCall, ...] = (), reason: str | None = None) -> dict:
        """The last chunk; ``reason`` overrides the answer's (Ollama's "load", "unload")."""
        chunk = self._chunk("", "", None)
        if calls:
            chunk["message"]["tool_calls"] = [call.api() for call in calls]
        chunk.pop("logprobs", None)
        chunk.update(done=True, done_reason=reason or (done.done_reason if done else "stop"),
                     total_duration=total_ns, load_duration=load_ns)
        if done is not None:
            chunk.update(prompt_eval_count=done.prompt_eval_count,
                         prompt_eval_duration=done.prompt_eval_duration,
                         eval_count=done.eval_count, eval_duration=done.eval_duration)
        return chunk

    def whole(self, chunks: list[dict], last: dict) -> dict:
        """A non-streamed answer: the chunks joined into the done object."""
        key = "message" if self.chat else "response"
        answer = dict(last)
        if self.chat:
            answer["message"] = dict(last["message"])
            answer["message"]["content"] = "".join(c["message"]["content"] for c in chunks)
            thinking = "".join(c["message"].get("thinking", "") for c in chunks)
            if thinking:
                answer["message"]["thinking"] = thinking
        else:
            answer[key] = "".join(c[key] for c in chunks)
        if self.top_logprobs is not None:
            answer["logprobs"] = [entry for c in chunks for entry in c.get("logprobs", ())]
        return answer

    def _chunk(self, text: str, thinking: str, logprob: dict | None) -> dict:
        chunk: dict = {"model": self.model, "created_at": created_at()}
        if self.chat:
            chunk["message"] = {"role": "assistant", "content": text,
                                **({"thinking": thinking} if thinking else {})}
        else:
            chunk["response"] = text
            if thinking:
                chunk["thinking"] = thinking
        chunk["done"] = False
        if self.top_logprobs is not None:
            chunk["logprobs"] = [logprob] if logprob else []
        return chunk

    def _logprob(self, event: TokenEvent) -> dict | None:
        if self.top_logprobs is None:
            return None
        return {"token": event.piece, "logprob": event.logprob,
                "top_logprobs": [{"token": top.piece, "logprob": top.logprob}
                                 for top in event.top[:self.top_logprobs]]}
