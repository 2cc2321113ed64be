"""Text <-> token ids for one model, with control tokens under the caller's control.

Control tokens (``<|im_start|>``, ``<|im_end|>``...) steer the model; text a user typed must
never turn into them. ``encode`` therefore treats control-token strings as plain text unless
asked, and ``encode_segments`` lets a prompt renderer say which parts are its own markup.
Decoding works on bytes, so it agrees exactly with ``StreamDecoder``.
"""

import re
from collections.abc import Iterable, Sequence

from engine.tokenizer import byte_level, sentencepiece_bpe
from engine.tokenizer.byte_level import shown_bytes, spell
from engine.tokenizer.encoder_process import EncoderProcess
from engine.tokenizer.info import TokenizerInfo


class Tokenizer:
    """One model's tokenizer. Lookups use the tables here; an ``EncoderProcess`` runs the
    ``tokenizers`` pipeline in a child process, which never parses control tokens itself:
    this class does. ``close`` ends the child (dropping the tokenizer does too)."""

    def __init__(self, info: TokenizerInfo, pieces: list[str | None], ids: dict[str, int],
                 encoder: EncoderProcess) -> None:
        self.info = info
        self._pieces = pieces  # stored spelling by id ("Ġhello", "<|im_end|>")
        self._ids = ids
        self._encoder = encoder
        self._control_ids = {pieces[i]: i for i in info.control_ids}
        # Longest first, so that at one position the longest control token wins.
        by_length = sorted(self._control_ids, key=len, reverse=True)
        self._control_pattern = (
            re.compile("|".join(map(re.escape, by_length))) if by_length else None
        )
        self._bytes: dict[int, bytes] = {}
        self._sentencepiece = info.model == "llama"
        self._piece_bytes = (sentencepiece_bpe.piece_bytes if self._sentencepiece
                             else byte_level.piece_bytes)

    def close(self) -> None:
        """Ends the encoder's process now rather than when the tokenizer is dropped."""
        self._encoder.close()

    def pipeline(self) -> str:
        """The serialized ``tokenizers`` pipeline (llguidance reads its vocabulary)."""
        return self._encoder.pipeline()

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
        """A whole prompt, rendered or raw, with the special tokens the model asks for, as
        llama.cpp adds them: BOS in front (tokenizer.ggml.add_bos_token), EOS at the end
        (tokenizer.ggml.add_eos_token). Every prompt a model reads is encoded here; one that
        already starts with the BOS (a template or a user wrote it) or ends with the EOS does
        not get a second (llama.cpp would add it and warn)."""
        ids = self.encode_segments(segments)
        if self.add_bos and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids.insert(0, self.bos_id)
        if self.info.add_eos and self.eos_id is not None and ids[-1:] != [self.eos_id]:
            ids.append(self.eos_id)
        return ids

    def _encode_plain(self, text: str) -> list[int]:
        """One piece of text between control tokens (or the ends). SentencePiece vocabularies
        that ask for it get a space in front of every piece, as llama.cpp and sentencepiece
        (which sees each piece as its own text) do."""
        if not text:
            return []
        if self.info.add_space_prefix:
            text = " " + text
        return self._encoder.encode(text)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (control tokens: their text)."""
        found = self._bytes.get(token_id)
        if found is None:
            piece = self._pieces[token_id] if 0 <= token_id < self.vocab_size else None
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
        found = self._ids.get(text)
        if found is None:
            stored = (text.replace(" ", sentencepiece_bpe.SPACE) if self._sentencepiece
                      else spell(text))
            found = self._ids.get(stored)
        return found

