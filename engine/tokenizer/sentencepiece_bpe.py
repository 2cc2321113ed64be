"""SentencePiece BPE as a ``tokenizers`` BPE model: the merges its scores imply, and how its
pieces spell text.

SentencePiece (and llama.cpp, for ``tokenizer.ggml.model = "llama"``) tokenizes by repeatedly
joining the adjacent pair whose joined piece is in the vocabulary with the highest score.
That is BPE whose merge list is every split (left, right) of every piece, ranked by the
piece's score. A space is stored as "▁"; a character outside the vocabulary falls back to
its UTF-8 bytes, the <0xAB> tokens.
"""

import re
from collections.abc import Sequence

SPACE = "▁"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def merges_by_score(pieces: dict[str, int], scores: Sequence[float]) -> list[tuple[str, str]]:
    """Every (left, right) whose join is a piece, best joined score first (ties: the lower
    ids first, so the order is stable)."""
    found: list[tuple[float, int, int, int, str, str]] = []
    for piece, index in pieces.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in pieces and right in pieces:
                found.append((-scores[index], index, pieces[left], pieces[right], left, right))
    found.sort()
    return [(left, right) for *_, left, right in found]


def is_unigram(scores: Sequence[float]) -> bool:
    """SentencePiece's BPE trainer scores its pieces by rank (0, -1, -2...); its unigram
    trainer by log-probability. The GGUF does not say which it was, the scores do."""
    return any(score != int(score) for score in scores)


def piece_bytes(piece: str) -> bytes:
    """A vocabulary entry -> the bytes it stands for: <0xAB> is one byte, "▁" a space."""
    byte = _BYTE_PIECE.fullmatch(piece)
    if byte:
        return bytes([int(byte.group(1), 16)])
    return piece.replace(SPACE, " ").encode("utf-8")
