"""What a tokenizer knows besides its pipeline: sizes, special ids, the vocabulary's kind.
Its own module, as both the cache entry (read in the encoder's process too) and the
Tokenizer use it."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenizerInfo:
    """What a Tokenizer knows beyond its ``tokenizers`` pipeline (cached beside it)."""

    vocab_size: int  # entries in the GGUF vocabulary (= logits width)
    bos_id: int | None
    eos_id: int | None
    add_bos: bool  # tokenizer.ggml.add_bos_token (False for Qwen)
    add_eos: bool  # tokenizer.ggml.add_eos_token (llama.cpp's default: False)
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
            "add_eos": self.add_eos,
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
            add_eos=bool(data["add_eos"]),
            stop_ids=frozenset(data["stop_ids"]),
            control_ids=frozenset(data["control_ids"]),
            pre=str(data["pre"]),
            model=str(data["model"]),
            add_space_prefix=bool(data["add_space_prefix"]),
        )
