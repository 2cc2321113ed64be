"""Structured output: a JSON schema (or any JSON object) enforced while sampling.

Ollama's ``format`` option: ``"json"`` or a JSON schema. llguidance (BENCHMARKS.md,
"Structured output") turns it into a grammar over this model's own vocabulary and, at
each step, into a mask of the tokens that keep the answer valid. The sampler sets every
other logit to -inf before any of its transforms, so the pick, its probability and the
reasons are those of the constrained distribution; the stop tokens are allowed exactly
when the grammar accepts, so an answer that stops has parsed.

A thinking model whose prompt opens ``<think>`` thinks freely first: the constraint
waits for ``after`` (``</think>``) in the reply's bytes and masks from the next token on
(only the stop tokens are refused while it waits, so the answer cannot end without its
JSON). Text in the same token after ``</think>`` is not checked; Qwen3 spells the tag as
one token of its own. Qwen3's templates leave ``<think>`` to the model: with
``may_think`` the first token may also be that tag, and then the constraint waits the
same way (as Ollama lets a thinking model think before it applies the format).

With tools offered, the answer may instead be Qwen's tool calls
(``grammar_with_tool_calls``): each call names an offered tool and its arguments follow
the tool's parameters, so a constrained answer still calls tools, and the final answer,
after the tool results, is the schema's JSON.

Speculative decoding needs nothing more: the sampler judges a verify step's rows one by
one and advances the constraint with each token it keeps, so row i is masked after
exactly the tokens before it, as plain decoding would mask it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from engine.chat.answer_format import Format, grammar_with_tool_calls, json_grammar
from engine.chat.tools import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, Tool
from engine.errors import GenerationError
from engine.runtime.thinking import CLOSE_TAG, OPEN_TAG
from engine.tokenizer import Tokenizer

_GRAMMAR_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Constraint:
    """One answer's grammar state: which tokens may come next, advanced token by token."""

    def __init__(self, tokenizer: Tokenizer, value: Format, after: str | None = None,
                 tools: Sequence[Tool] = (), may_think: bool = False) -> None:
        import llguidance

        self.vocab_size = tokenizer.vocab_size
        self._tokenizer = tokenizer
        self._waiting = after.encode() if after else None   # the tag that starts the answer
        self._seen = b""
        # the one token that opens thinking, allowed as the answer's first (None: not now)
        self._think = _single_token(tokenizer, OPEN_TAG) if may_think and not after else None
        grammar_tokenizer = _grammar_tokenizer(tokenizer)
        grammar = json_grammar(value) if not tools else grammar_with_tool_calls(
            value, tools, [tag for tag in (TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
                           if _special(grammar_tokenizer, tokenizer, tag)])
        self._matcher = llguidance.LLMatcher(grammar_tokenizer, grammar)
        if self._matcher.is_error():
            raise GenerationError(f"the schema cannot be enforced: {self._matcher.get_error()}")
        self._bits = np.zeros((self.vocab_size + 31) // 32, dtype=np.int32)

    def allowed(self) -> np.ndarray:
        """bool [V]: the tokens that keep the answer valid (stop tokens when it is complete)."""
        self._matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        if self._matcher.is_error():
            raise GenerationError(f"structured output failed: {self._matcher.get_error()}")
        bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little")
        return bits[: self.vocab_size].view(bool)

    def mask(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The logits with every disallowed token at -inf (a copy), and the allowed mask;
        while waiting for ``after``: every token but the stop tokens, and no mask."""
        if self._waiting is not None:
            out = logits.copy()
            out[sorted(self._tokenizer.stop_ids)] = -np.inf
            return out, None
        allowed = self.allowed()
        if self._think is not None:
            allowed[self._think] = True
        if not allowed.any():
            raise GenerationError("structured output failed: the schema allows no token here")
        masked = np.where(allowed, logits, np.float32(-np.inf))
        return masked.astype(np.float32, copy=False), allowed

    def advance(self, token: int) -> None:
        """The sampler picked ``token`` (always one the mask allowed)."""
        opens, self._think = token == self._think, None
        if opens:
            self._waiting = CLOSE_TAG.encode()
            return
        if self._waiting is not None:
            self._seen = (self._seen + self._tokenizer.token_bytes(token))[-64:]
            if self._waiting in self._seen:
                self._waiting = None
            return
        if not self._matcher.consume_token(token):
            raise GenerationError(f"structured output failed: {self._matcher.get_error()}")

    @property
    def done(self) -> bool:
        """The answer so far is complete JSON that the schema accepts."""
        return self._waiting is None and self._matcher.is_accepting()


def _grammar_tokenizer(tokenizer: Tokenizer):
    """llguidance's view of the vocabulary (built once per tokenizer: about a second)."""
    found = _GRAMMAR_TOKENIZERS.get(tokenizer)
    if found is None:
        import llguidance

        found = llguidance.LLTokenizer(tokenizer.pipeline(), n_vocab=tokenizer.vocab_size,
                                       eos_token=sorted(tokenizer.stop_ids))
        _GRAMMAR_TOKENIZERS[tokenizer] = found
    return found


def _single_token(tokenizer: Tokenizer, text: str) -> int | None:
    """The id of the token that spells ``text`` alone (None: it takes several)."""
    ids = tokenizer.encode(text)
    return ids[0] if len(ids) == 1 else None


def _special(grammar_tokenizer, tokenizer: Tokenizer, text: str) -> bool:
    """``text`` is one token that llguidance keeps apart from text (an added token), so a
    grammar names it as ``<text>``."""
    token = _single_token(tokenizer, text)
    return token is not None and grammar_tokenizer.is_special_token(token)
