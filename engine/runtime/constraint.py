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
one token of its own.

Speculative decoding needs nothing more: the sampler judges a verify step's rows one by
one and advances the constraint with each token it keeps, so row i is masked after
exactly the tokens before it, as plain decoding would mask it.
"""

from __future__ import annotations

import weakref

import numpy as np

from engine.chat.answer_format import Format, json_grammar
from engine.errors import GenerationError
from engine.tokenizer import Tokenizer

_GRAMMAR_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Constraint:
    """One answer's grammar state: which tokens may come next, advanced token by token."""

    def __init__(self, tokenizer: Tokenizer, value: Format, after: str | None = None) -> None:
        import llguidance

        self.vocab_size = tokenizer.vocab_size
        self._tokenizer = tokenizer
        self._waiting = after.encode() if after else None   # the tag that starts the answer
        self._seen = b""
        self._matcher = llguidance.LLMatcher(_grammar_tokenizer(tokenizer), json_grammar(value))
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
        if not allowed.any():
            raise GenerationError("structured output failed: the schema allows no token here")
        masked = np.where(allowed, logits, np.float32(-np.inf))
        return masked.astype(np.float32, copy=False), allowed

    def advance(self, token: int) -> None:
        """The sampler picked ``token`` (always one the mask allowed)."""
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

        found = llguidance.LLTokenizer(tokenizer.backend.to_str(), n_vocab=tokenizer.vocab_size,
                                       eos_token=sorted(tokenizer.stop_ids))
        _GRAMMAR_TOKENIZERS[tokenizer] = found
    return found
