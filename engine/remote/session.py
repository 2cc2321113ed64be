"""A conversation with a model on a server, behind the same ChatBackend protocol as the
local engine: the same events, the server's log-probabilities in them, and Stop closing
the request.

The server renders the template and keeps no state between requests: every turn sends
the whole conversation.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

from engine.chat.backend import Capability
from engine.chat.documents import template_overhead
from engine.chat.events import DoneEvent, Event, NoticeEvent, TokenEvent, TopToken
from engine.chat.messages import Message
from engine.chat.session import Answer, Session
from engine.chat.tool_results import (
    ToolResult,
    current_turn,
    cut_to_fit,
    estimated_tokens,
    result_room,
)
from engine.chat.tools import ToolCall
from engine.errors import GenerationError, Remedy, RemoteError, StreamCut
from engine.remote import ollama_api, openai_api
from engine.remote.connection import Connection
from engine.remote.http import Stream, detect_kind, open_request
from engine.remote.images import RemoteImage, read_image
from engine.remote.records import Delta, Finish, RemoteModelInfo, ServerToken

APIS: dict[str, ModuleType] = {"openai": openai_api, "ollama": ollama_api}


def list_remote_models(connection: Connection) -> tuple[Connection, list[RemoteModelInfo]]:
    """The connection with its kind settled, and the models its server offers."""
    connection = detect_kind(connection)
    return connection, APIS[connection.kind].list_models(connection)


@dataclass(frozen=True)
class RemoteModel:
    """A model on a server, ready to chat with (nothing is loaded here)."""

    connection: Connection
    info: RemoteModelInfo
    params: dict = field(default_factory=dict)      # the server applies its own defaults
    system: str | None = None
    load_duration: int = 0

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def label(self) -> str:
        return f"{self.info.name} · {self.connection.host}"

    @property
    def has_vision(self) -> bool:
        """Ollama says; an OpenAI-compatible server does not, so images are sent and the
        server answers whether its model can see them."""
        return self.info.vision is not False

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The answer's log-probabilities (and images unless the server says its model
        has no vision); nothing that needs the weights."""
        return frozenset({Capability.LOGPROBS}
                         | ({Capability.IMAGES} if self.has_vision else set()))


def _open_chat(connection: Connection, api: ModuleType, body: dict) -> Stream:
    """The answer's stream; a schema an OpenAI-compatible server refused in
    ``json_schema`` form is sent once more in the older form it may take."""
    try:
        return open_request(connection, "POST", api.CHAT_PATH, body)
    except RemoteError as error:
        again = (openai_api.schema_beside_json_object(body, str(error))
                 if api is openai_api else None)
        if again is None:
            raise
        return open_request(connection, "POST", api.CHAT_PATH, again)


def open_remote_model(connection: Connection, name: str) -> RemoteModel:
    """Find ``name`` on the server; a missing model is an error listing what is there."""
    connection = detect_kind(connection)
    if connection.kind == "ollama":     # /api/show knows it (and resolves ":latest")
        return RemoteModel(connection, ollama_api.describe(connection, name))
    models = openai_api.list_models(connection)
    for info in models:
        if info.name == name:
            return RemoteModel(connection, info)
    offered = ", ".join(m.name for m in models[:12]) or "none"
    raise RemoteError(f"{connection.host} has no model {name!r}; it offers: {offered}")


@dataclass
class RemoteSession(Session):
    """The server is sent ``num_top`` (servers allow <= 20), ``format`` as its API spells
    it and ``tools``, whose calls it parses."""

    model: RemoteModel

    def __post_init__(self) -> None:
        self.last_prompt = None     # the server tokenizes: Lantern never sees the prompt ids
        self._stream: Stream | None = None
        self._lock = threading.Lock()

    def prepare_image(self, path: str, max_pixels: int) -> RemoteImage:
        return read_image(path, max_pixels)

    def continue_answer(self) -> Iterator[Event]:
        raise GenerationError("continuing an answer needs a model on this computer: a "
                              "server is sent whole turns and starts its answer anew. "
                              "Regenerate the answer, or run the model locally")

    def raw(self, text: str) -> Iterator[Event]:
        raise GenerationError("raw prompts need a local model: a server applies its own "
                              "template. Send it through the template, or run the model "
                              "locally", remedy=Remedy.TEMPLATE)

    def cancel(self) -> None:
        """Stop the answer: the request is closed, which ends a read blocked on it."""
        super().cancel()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.abort()

    # -- one answer ---------------------------------------------------------------------------

    def request_messages(self) -> list[dict]:
        """The conversation as both APIs take it (images as RemoteImage records)."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        for m in self.messages:
            images = [i for i in m.images if isinstance(i, RemoteImage)]
            out.append({"role": m.role, "content": m.content, "images": images,
                        "tool_calls": m.tool_calls, "tool_name": m.tool_name})
        return out

    def _fit_tool_result(self, message: Message) -> ToolResult:
        """As the local session's, with sizes estimated (the server tokenizes)."""
        def used(messages: list[Message]) -> int:
            texts = [self.system or ""] + [m.content for m in messages]
            return template_overhead(self.model, self.system, None) + sum(
                len(estimated_tokens(text)) for text in texts)
        room = result_room(self.options.num_ctx, self.options.num_predict,
                           used(self.messages), lambda: used(current_turn(self.messages)))
        return cut_to_fit(message.content, room, estimated_tokens, "".join)

    def _one_answer(self) -> Answer:
        calls: list[ToolCall] = []   # the server's; a server may also leave them in the text
        return (yield from self._collect(self._events(calls), calls=calls))

    def _events(self, calls: list[ToolCall]) -> Iterator[Event]:
        """The answer's events; the tool calls the server parsed are added to ``calls``."""
        connection = self.model.connection
        api = APIS[connection.kind]
        body = api.chat_body(self.model.name, self.request_messages(), self.options,
                             self.num_top, answer_format=self.format,
                             tools=[tool.api() for tool in self.tools] or None)
        start = time.perf_counter_ns()
        stream = _open_chat(connection, api, body)
        with self._lock:
            self._stream = stream
        if self.cancel_event.is_set():
            stream.abort()
        count, first_at, last_at, reply, thinking = 0, 0, start, "", ""
        finish = Finish("cancel")
        warned = self.num_top <= 0
        try:
            for item in api.parse_stream(stream.lines(), connection.host):
                if isinstance(item, Finish):
                    finish = item
                    break
                calls.extend(item.tool_calls)
                if not item.tokens and (item.text or item.thinking) and not warned:
                    warned = True
                    yield NoticeEvent(f"{connection.host} sent no log-probabilities for "
                                      f"{self.model.name}: the panel has no candidates to show "
                                      "(the server does not support logprobs)")
                for event in _token_events(item, count, self.num_top):
                    now = time.perf_counter_ns()
                    yield TokenEvent(**{**event, "index": count, "elapsed_ns": now - last_at})
                    first_at, last_at = first_at or now, now
                    count += 1
                    reply += event["text"]
                    thinking += event["thinking_text"]
        except StreamCut:
            if not self.cancel_event.is_set():
                raise StreamCut(
                    f"the answer from {connection.host} was cut off after {count} token(s): "
                    "the partial answer is kept, marked incomplete") from None
        except RemoteError:
            if not self.cancel_event.is_set():
                raise
        finally:
            with self._lock:
                self._stream = None
            stream.close()
        end = time.perf_counter_ns()
        first_at = first_at or end
        yield DoneEvent(
            done_reason="cancel" if self.cancel_event.is_set() else finish.reason,
            text=reply, tail="",
            prompt_eval_count=finish.prompt_eval_count,
            prompt_eval_duration=finish.prompt_eval_duration or first_at - start,
            eval_count=finish.eval_count or count,
            eval_duration=finish.eval_duration or end - first_at,
            load_duration=finish.load_duration,
            total_duration=end - start,
            thinking=thinking,
        )


def _token_events(delta: Delta, index: int, num_top: int) -> Iterator[dict]:
    """TokenEvent fields for a delta: one per reported token, the delta's text on the last;
    one token-less event carrying the text when the server sent no log-probabilities."""
    tokens: tuple[ServerToken, ...] = delta.tokens or (
        ServerToken(delta.text or delta.thinking, math.nan, ()),)
    for i, token in enumerate(tokens):
        yield {
            "id": -1, "piece": token.piece, "logit": None,
            "text": delta.text if i == len(tokens) - 1 else "",
            "thinking_text": delta.thinking if i == len(tokens) - 1 else "",
            "thinking": bool(delta.thinking) and not delta.text,
            "logprob": token.logprob, "entropy": math.nan,
            "top": tuple(TopToken(-1, piece, None, logprob)
                         for piece, logprob in token.top[:num_top]),
        }
