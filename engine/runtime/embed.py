"""A text's embedding from a loaded generative model, as Ollama serves it.

Ollama's runner asks llama.cpp for the sequence's pooled embedding; a GGUF without a
``{arch}.pooling_type`` key gets llama.cpp's default, no pooling, and the runner then takes
the embedding of the prompt's last token instead. In llama.cpp that embedding is the
hidden state after the final norm (``result_norm``, the lm_head's input). So: the final
state of the last token, unless the GGUF names mean or first-token (CLS) pooling. /api/embed
then scales it to unit length; /api/embeddings sends it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.errors import GenerationError
from engine.runtime.loaded_model import LoadedModel

# llama.cpp's enum llama_pooling_type, as GGUF files store it
POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST = 0, 1, 2, 3
POOLINGS = {POOLING_NONE: "last", POOLING_MEAN: "mean", POOLING_CLS: "cls",
            POOLING_LAST: "last"}   # none: Ollama's runner falls back to the last token


class InputTooLong(GenerationError):
    """A text longer than the context, with truncation turned off."""


@dataclass(frozen=True)
class Embedding:
    vector: np.ndarray      # float32 [H]
    token_count: int        # the tokens read (after truncation)


def pooling_of(model: LoadedModel) -> str:
    """"last", "mean" or "cls": what the GGUF's ``{arch}.pooling_type`` asks for."""
    key = f"{model.gguf.config.architecture}.pooling_type"
    value = int(model.gguf.metadata.get(key, POOLING_NONE))
    if value not in POOLINGS:
        raise GenerationError(f"{model.name}: {key} = {value} is a pooling Lantern does not "
                              f"know (known: {', '.join(map(str, POOLINGS))})")
    return POOLINGS[value]


def embed_text(model: LoadedModel, text: str, num_ctx: int, truncate: bool = True) -> Embedding:
    """``text`` tokenized as Ollama's runner does (BOS where the model wants one, control
    tokens parsed), cut to ``num_ctx`` tokens when ``truncate``, run through the decoder,
    pooled. The decoder's KV cache keeps what it shares with an earlier request."""
    tokenizer, decoder = model.tokenizer, model.decoder
    ids = tokenizer.encode_prompt([(text, True)])
    limit = min(num_ctx, decoder.max_cache_len)
    if len(ids) > limit:
        if not truncate:
            raise InputTooLong(f"the input is {len(ids)} tokens, more than the context of "
                               f"{limit}; shorten it or allow truncation")
        ids = ids[:limit]
    if not ids:
        raise GenerationError("the input has no tokens to embed")
    pooling = pooling_of(model)
    decoder.steer(None)     # the model's own states, whatever a chat steered before
    if pooling == "last":   # only the last row is needed: a cached prefix can stay
        kept = decoder.keep_prefix(ids[:-1])
        final = decoder.forward(ids[kept:]).final                       # [H]
    else:                   # every row's state: run them all
        decoder.reset()
        states = decoder.forward(ids, rows=len(ids)).final              # [S, H]
        final = states.mean(axis=0) if pooling == "mean" else states[0]
    return Embedding(np.asarray(final, np.float32), len(ids))


def unit_length(vector: np.ndarray, dimensions: int | None = None) -> np.ndarray:
    """``vector`` (its first ``dimensions`` values) scaled to length 1, as Ollama's
    /api/embed does (a zero vector stays zero)."""
    if not np.isfinite(vector).all():
        raise GenerationError("the embedding contains NaN or Inf values")
    if dimensions:
        vector = vector[:dimensions]
    return vector / max(float(np.linalg.norm(vector)), 1e-12)
