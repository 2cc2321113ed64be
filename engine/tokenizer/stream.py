"""Streaming detokenization: one token at a time in, text out, never half a character.

A byte-level token can end in the middle of a UTF-8 sequence ("你" is three bytes that
may arrive in two tokens). The bytes of an unfinished sequence are held back until the
next token completes it; ``flush`` at the end turns whatever is left into U+FFFD exactly
as ``Tokenizer.decode`` would, so the deltas always add up to ``decode(all ids)``.
"""

import codecs

from engine.tokenizer.tokenizer import Tokenizer


class StreamDecoder:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """The text completed by this token (may be empty)."""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        """The held-back bytes at the end of the stream (U+FFFD for an unfinished sequence)."""
        return self._utf8.decode(b"", final=True)
