"""Text <-> token ids for one model, with control tokens under the caller's control.

Control tokens (``<|im_start|>``, ``<|im_end|>``...) steer the model; text a user typed must
never turn into them. ``encode`` therefore treats control-token strings as plain text unless
asked, and ``encode_segments`` lets a prompt renderer say which parts are its own markup.
Decoding works on bytes, so it agrees exactly with ``StreamDecoder``.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer as Backend

from engine.tokenizer import byte_level, sentencepiece_bpe
from engine.tokenizer.byte_level import shown_bytes, spell


@dataclass(frozen=True)
class TokenizerInfo:
    """What a Tokenizer knows beyond its ``tokenizers`` pipeline (cached beside it)."""

    vocab_size: int  # entries in the GGUF vocabulary (= logits width)
    bos_id: int | None
    eos_id: int | None
    add_bos: bool  # tokenizer.ggml.add_bos_token (False for Qwen)
    stop_ids: frozenset[int]  # generation ends at any of these
    control_ids: frozenset[int]  # token type CONTROL
    pre: str  # pre-tokenizer name (byte-level BPE)
    model: str = "gpt2"  # tokenizer.ggml.model: gpt2 (byte-level BPE) or llama (SentencePiece)
    add_space_prefix: bool = False  # SentencePiece: " " before each piece of text

    def to_dict(self) -> dict[str, object]:
        return {
            "vocab_size": self.vocab_size,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "add_bos": self.add_bos,
            "stop_ids": sorted(self.stop_ids),
            "control_ids": sorted(self.control_ids),
            "pre": self.pre,
            "model": self.model,
            "add_space_prefix": self.add_space_prefix,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "TokenizerInfo":
        return cls(
            vocab_size=int(data["vocab_size"]),
            bos_id=data["bos_id"],
            eos_id=data["eos_id"],
            add_bos=bool(data["add_bos"]),
            stop_ids=frozenset(data["stop_ids"]),
            control_ids=frozenset(data["control_ids"]),
            pre=str(data["pre"]),
            model=str(data["model"]),
            add_space_prefix=bool(data["add_space_prefix"]),
        )


class Tokenizer:
    """One model's tokenizer. ``backend`` is the ``tokenizers`` pipeline; it never parses
    control tokens itself (``encode_special_tokens``), this class does."""

    def __init__(self, backend: Backend, info: TokenizerInfo) -> None:
        self.backend = backend
        self.backend.encode_special_tokens = True
        self.info = info
        self._control_ids = {backend.id_to_token(i): i for i in info.control_ids}
        # Longest first, so that at one position the longest control token wins.
        by_length = sorted(self._control_ids, key=len, reverse=True)
        self._control_pattern = (
            re.compile("|".join(map(re.escape, by_length))) if by_length else None
        )
        self._bytes: dict[int, bytes] = {}
        self._sentencepiece = info.model == "llama"
        self._piece_bytes = (sentencepiece_bpe.piece_bytes if self._sentencepiece
                             else byte_level.piece_bytes)

    @property
    def vocab_size(self) -> int:
        return self.info.vocab_size

    @property
    def stop_ids(self) -> frozenset[int]:
        return self.info.stop_ids

    @property
    def bos_id(self) -> int | None:
        return self.info.bos_id

    @property
    def eos_id(self) -> int | None:
        return self.info.eos_id

    @property
    def add_bos(self) -> bool:
        return self.info.add_bos

    def encode(self, text: str, parse_special: bool = False) -> list[int]:
        """Token ids of ``text`` (no BOS). With ``parse_special`` control-token strings
        become control tokens; without, they are ordinary text."""
        return self.encode_segments([(text, parse_special)])

    def encode_segments(self, segments: Iterable[tuple[str, bool]]) -> list[int]:
        """Token ids of the concatenated segments, where only segments flagged True (the
        template's markup) may produce control tokens.

        Text between two control tokens is encoded as one piece even when it spans segments,
        so the result equals encoding the whole string with control tokens parsed, as long
        as the unflagged segments contain no control-token strings.
        """
        ids: list[int] = []
        pending: list[str] = []
        for text, parse_special in segments:
            if not parse_special or self._control_pattern is None:
                pending.append(text)
                continue
            start = 0
            for match in self._control_pattern.finditer(text):
                pending.append(text[start : match.start()])
                ids += self._encode_plain("".join(pending))
                pending.clear()
                ids.append(self._control_ids[match.group()])
                start = match.end()
            pending.append(text[start:])
        ids += self._encode_plain("".join(pending))
        return ids

    def encode_prompt(self, segments: Iterable[tuple[str, bool]]) -> list[int]:
        """A whole rendered prompt: ``encode_segments`` with BOS in front when the model asks
        for one (tokenizer.ggml.add_bos_token) and the template did not already write it."""
        ids = self.encode_segments(segments)
        if self.add_bos and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids.insert(0, self.bos_id)
        return ids

    def _encode_plain(self, text: str) -> list[int]:
        """One piece of text between control tokens (or the ends). SentencePiece vocabularies
        that ask for it get a space in front of every piece, as llama.cpp and sentencepiece
        (which sees each piece as its own text) do."""
        if not text:
            return []
        if self.info.add_space_prefix:
            text = " " + text
        return self.backend.encode(text, add_special_tokens=False).ids

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (control tokens: their text)."""
        found = self._bytes.get(token_id)
        if found is None:
            piece = self.backend.id_to_token(token_id) if 0 <= token_id < self.vocab_size else None
            if piece is None:
                raise ValueError(
                    f"token id {token_id} is outside the vocabulary (0..{self.vocab_size - 1})"
                )
            found = self._bytes[token_id] = self._piece_bytes(piece)
        return found

    def decode(self, ids: Sequence[int]) -> str:
        """Text of the ids; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def id_to_piece(self, token_id: int) -> str:
        """A token's display text: "Ġhello" or "▁hello" -> " hello"; bytes that are not UTF-8
        on their own (half a Chinese character) are shown as <0xE4>."""
        return shown_bytes(self.token_bytes(token_id))

    def token_to_id(self, text: str) -> int | None:
        """Id of a vocabulary entry, given as stored ("Ġhello", "<|im_end|>") or as the
        text it stands for (" hello"); None when there is none."""
        found = self.backend.token_to_id(text)
        if found is None:
            stored = (text.replace(" ", sentencepiece_bpe.SPACE) if self._sentencepiece
                      else spell(text))
            found = self.backend.token_to_id(stored)
        return found

