"""The one interface the app and the CLI stream from, whatever runs the model.

The local ONNX engine (engine.runtime.session.LocalSession) and the remote servers
(engine.remote.session.RemoteSession) both implement ChatBackend. What a backend can
show beyond the answer and its log-probabilities is a Capability it declares; views ask
for the capability, never for the backend's class.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Protocol, runtime_checkable

from engine.chat.answer_format import Format
from engine.chat.events import Event
from engine.chat.options import Options


class Capability(Enum):
    """What a backend can show besides the streamed answer."""

    LOGPROBS = "log-probabilities of each token and its best alternatives"
    LOGITS = "raw logits"
    PROMPT_TOKENS = "the tokens of the prompt"
    LAYERS = "per-layer statistics"
    REFERENCE = "the check against the numpy reference"
    LENS = "the logit lens"
    ATTENTION = "attention maps"
    IMAGES = "images in the conversation"
    VIDEO = "video (animated GIF, WebP, PNG) in the conversation"
    SPECULATION = "speculative decoding"


LOCAL_WEIGHTS = frozenset({Capability.LOGITS, Capability.PROMPT_TOKENS, Capability.LAYERS,
                           Capability.REFERENCE, Capability.LENS, Capability.ATTENTION,
                           Capability.SPECULATION})


@runtime_checkable
class ChatBackend(Protocol):
    """A conversation with one model: each turn yields TokenEvent / NoticeEvent, then one
    DoneEvent. ``cancel`` is safe from another thread and ends the answer within a token."""

    messages: list
    options: Options
    system: str | None
    num_top: int
    format: Format | None           # structured output: "json" or a JSON schema

    @property
    def capabilities(self) -> frozenset[Capability]: ...

    def send(self, text: str, images: tuple = ()) -> Iterator[Event]: ...

    def regenerate(self) -> Iterator[Event]: ...

    def edit_last_user(self, text: str) -> Iterator[Event]: ...

    def continue_answer(self) -> Iterator[Event]: ...

    def raw(self, text: str) -> Iterator[Event]: ...

    def clear(self) -> None: ...

    def cancel(self) -> None: ...


def unavailable_reason(capability: Capability, model_name: str, where: str) -> str:
    """One line a view shows in place of what a remote backend cannot give."""
    return (f"Not available for {model_name}: showing {capability.value} takes the model's "
            f"weights on this computer, and it runs on {where}, which reports only its answer "
            "and log-probabilities.")
