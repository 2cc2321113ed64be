"""What generation tells its listeners: one TokenEvent per generated token, one DoneEvent.

Small frozen records (no dicts): the CLI turns them into JSONL, the app into its
debug panel. Log-probabilities are Ollama's: log-softmax of the raw logits, before any
sampling transform. A remote server reports log-probabilities only: its events carry
``logit=None``, ``id=-1`` (no token ids) and a NaN entropy, never invented values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.chat.reasons import SamplerReasons

if TYPE_CHECKING:       # numpy is not imported for a server's chat (ARCHITECTURE.md §12)
    import numpy as np


@dataclass(frozen=True)
class TopToken:
    id: int                 # -1: a server's token (servers send no ids)
    piece: str              # the token's text as shown to a person
    logit: float | None     # raw logit from the model; None from a server
    logprob: float    # log-softmax of the raw logits

    @property
    def probability(self) -> float:
        return math.exp(self.logprob)


@dataclass(frozen=True)
class TokenEvent:
    index: int                      # 0-based position in this answer
    id: int
    piece: str                      # the token's own text (may be part of a character)
    text: str                       # UTF-8-safe delta to append to the reply (may be "")
    logit: float | None             # None from a server (it reports log-probabilities only)
    logprob: float                  # NaN when a server sent no log-probabilities
    entropy: float                  # nats, over the full raw distribution; NaN from a server
    top: tuple[TopToken, ...]       # best first, k <= 20
    elapsed_ns: int                 # time of this step (forward + sampling)
    layer_stats: np.ndarray | None = field(default=None, compare=False)  # [n_layers+1, 4]
    reasons: SamplerReasons | None = field(default=None, compare=False)  # why this token
    drafted: bool = False           # a drafter proposed it and the model's own choice kept it
    thinking: bool = False          # generated inside the model's <think> section
    thinking_text: str = ""         # delta for the thinking section (`text` is the answer's)


@dataclass(frozen=True)
class NoticeEvent:
    """Something the user should know that is not an error (e.g. turns dropped for num_ctx)."""

    message: str


@dataclass(frozen=True)
class DoneEvent:
    done_reason: str                # "stop", "length", "cancel"
    text: str                       # the whole reply as shown
    tail: str                       # text released only at the end (held-back bytes or stop prefix)
    prompt_eval_count: int
    prompt_eval_duration: int       # ns
    eval_count: int
    eval_duration: int              # ns
    load_duration: int              # ns
    total_duration: int             # ns
    draft_count: int = 0            # tokens drafters proposed (speculative decoding)
    draft_accepted: int = 0         # of those, kept: each is one forward saved

    @property
    def acceptance(self) -> float | None:
        """Share of drafted tokens kept; None when nothing was drafted."""
        return self.draft_accepted / self.draft_count if self.draft_count else None
    thinking: str = ""              # the whole thinking section (not part of `text`)
    steering: str = ""              # the control vectors that steered it ("" none), one line

    def counters(self) -> dict[str, int | str]:
        return {
            "done_reason": self.done_reason,
            "total_duration": self.total_duration,
            "load_duration": self.load_duration,
            "prompt_eval_count": self.prompt_eval_count,
            "prompt_eval_duration": self.prompt_eval_duration,
            "eval_count": self.eval_count,
            "eval_duration": self.eval_duration,
        }


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool the model called, with what came back (fed to the model's next answer)."""

    name: str
    arguments: dict
    result: str                     # as the model reads it (cut to fit: ends in the cut note)
    failed: bool = False            # the call did not run or failed: `result` says why
    shown_tokens: int = 0           # tokens of the result the model reads
    total_tokens: int = 0           # tokens of the whole result (a server's model: estimated)

    @property
    def cut(self) -> bool:
        """The result did not fit the context: the model read only its first tokens."""
        return self.shown_tokens < self.total_tokens


Event = TokenEvent | NoticeEvent | DoneEvent | ToolCallEvent
