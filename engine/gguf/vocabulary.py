"""Whether two GGUF files share a vocabulary: the same token list, token types and special
ids, so that one text is the same ids under both (a draft model and its target, two models
compared on one text)."""

from __future__ import annotations

from pathlib import Path

from engine.gguf.reader import read_gguf


def vocabulary_signature(path: Path) -> tuple:
    """Token list, token types and special ids of a GGUF: two models share a vocabulary
    only when these are identical (names and sizes say nothing)."""
    metadata = read_gguf(path).metadata
    keys = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.eos_token_ids", "tokenizer.ggml.padding_token_id")
    return tuple(_plain(metadata.get(k)) for k in keys)


def _plain(value: object) -> object:
    if value is None or isinstance(value, str | int | float):
        return value
    return tuple(_plain(v) for v in value)  # type: ignore[union-attr]
