"""The tokenizer as a GGUF file states it (``tokenizer.ggml.*`` keys), read once and checked.

Two kinds are supported: byte-level BPE (``tokenizer.ggml.model = "gpt2"``: Qwen, Llama 3)
and SentencePiece (``"llama"``: Gemma, Mistral, Llama 2, Phi-3; scores, "▁" for a space,
<0xAB> byte-fallback tokens). Running one kind over the other's vocabulary produces
fluent-looking garbage, so a file whose tokens are spelled the other way is refused, as is
anything else.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from engine.errors import CorruptModel, UnsupportedModel
from engine.tokenizer.pretokenizers import PRE_TOKENIZERS, PreTokenizer, pre_tokenizer

SUPPORTED = "llama (SentencePiece), gpt2 (byte-level BPE) with pre-tokenizers " + ", ".join(
    p for p in PRE_TOKENIZERS if p != "default"
)
BYTE_LEVEL, SENTENCEPIECE = "gpt2", "llama"  # tokenizer.ggml.model
_SPACE = {BYTE_LEVEL: "Ġ", SENTENCEPIECE: "▁"}  # how each spells a leading space

# Tokens that end generation when the file does not list them itself (looked up by text).
STOP_TOKEN_TEXTS = (
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>", "<|end|>",
    "<|return|>", "<|call|>",
)
# gpt-oss's harmony: a turn ends with <|return|> (answered) or <|call|> (a tool call waits);
# <|end|> only closes one message of the turn, so with both present it ends nothing
HARMONY_TURN_ENDS, HARMONY_MESSAGE_END = ("<|return|>", "<|call|>"), "<|end|>"


class TokenType(IntEnum):
    """llama.cpp's token types (``tokenizer.ggml.token_type``)."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3  # special: <|im_start|>; only the chat template may produce it
    USER_DEFINED = 4  # matched whole wherever it appears: <tool_call>
    UNUSED = 5
    BYTE = 6


@dataclass(frozen=True)
class Vocabulary:
    """Everything the tokenizer is built from, as read from the file."""

    source: str  # the file, for messages
    pre: PreTokenizer | None  # byte-level only
    tokens: Sequence[str]  # id -> text (byte alphabet for normal byte-level tokens)
    token_types: Sequence[int]  # id -> TokenType value
    merges: Sequence[tuple[str, str]]  # byte-level only
    bos_id: int | None
    eos_id: int | None
    add_bos: bool
    add_eos: bool
    stop_ids: frozenset[int]
    model: str = BYTE_LEVEL  # tokenizer.ggml.model
    scores: Sequence[float] = ()  # SentencePiece: id -> score (higher merges first)
    add_space_prefix: bool = False  # SentencePiece: a space before text that starts a piece
    unk_id: int | None = None


def read_vocabulary(metadata: Mapping[str, object], source: Path | str) -> Vocabulary:
    """Check and collect the ``tokenizer.ggml.*`` keys of one GGUF file."""
    model = metadata.get("tokenizer.ggml.model")
    if model is None:
        raise UnsupportedModel(
            f"{source} has no tokenizer (no tokenizer.ggml.model key); "
            "use the model's main GGUF file, not a projector or adapter"
        )
    if model not in (BYTE_LEVEL, SENTENCEPIECE):
        raise UnsupportedModel(
            f"{source}: unsupported tokenizer '{model}'; Lantern supports: {SUPPORTED}"
        )
    tokens = _strings(metadata, "tokenizer.ggml.tokens", source)
    _check_spelling(str(model), tokens, source)
    types = metadata.get("tokenizer.ggml.token_type")
    token_types = [int(t) for t in types] if types is not None else [TokenType.NORMAL] * len(tokens)
    if len(token_types) != len(tokens):
        raise CorruptModel(
            f"{source}: tokenizer.ggml.token_type has {len(token_types)} entries "
            f"for {len(tokens)} tokens"
        )
    bos_id = _token_id(metadata, "tokenizer.ggml.bos_token_id", len(tokens), source)
    eos_id = _token_id(metadata, "tokenizer.ggml.eos_token_id", len(tokens), source)
    if model == SENTENCEPIECE:
        return _sentencepiece(metadata, source, tokens, token_types, bos_id, eos_id)
    pre_name = metadata.get("tokenizer.ggml.pre")
    pre = pre_tokenizer(pre_name if isinstance(pre_name, str) else None, source)
    merges = [
        _merge(m, i, source)
        for i, m in enumerate(_strings(metadata, "tokenizer.ggml.merges", source))
    ]
    return Vocabulary(
        source=str(source),
        pre=pre,
        tokens=tokens,
        token_types=token_types,
        merges=merges,
        bos_id=bos_id,
        eos_id=eos_id,
        add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", pre.add_bos)),
        add_eos=bool(metadata.get("tokenizer.ggml.add_eos_token", False)),
        stop_ids=_stop_ids(metadata, tokens, eos_id, source),
    )


def _sentencepiece(metadata: Mapping[str, object], source: Path | str, tokens: Sequence[str],
                   token_types: Sequence[int], bos_id: int | None,
                   eos_id: int | None) -> Vocabulary:
    """A SentencePiece vocabulary: llama.cpp's defaults where a key is absent (BOS and the
    space prefix on)."""
    scores = metadata.get("tokenizer.ggml.scores")
    if not isinstance(scores, list | tuple) or len(scores) != len(tokens):
        raise CorruptModel(
            f"{source}: tokenizer.ggml.scores must hold one score for each of the "
            f"{len(tokens)} tokens of a SentencePiece vocabulary"
        )
    unk_id = _token_id(metadata, "tokenizer.ggml.unknown_token_id", len(tokens), source)
    if unk_id is None:
        unk_id = next((i for i, k in enumerate(token_types) if k == TokenType.UNKNOWN), None)
    return Vocabulary(
        source=str(source),
        pre=None,
        tokens=tokens,
        token_types=token_types,
        merges=(),
        bos_id=bos_id,
        eos_id=eos_id,
        add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", True)),
        add_eos=bool(metadata.get("tokenizer.ggml.add_eos_token", False)),
        stop_ids=_stop_ids(metadata, tokens, eos_id, source),
        model=SENTENCEPIECE,
        scores=[float(x) for x in scores],
        add_space_prefix=bool(metadata.get("tokenizer.ggml.add_space_prefix", True)),
        unk_id=unk_id,
    )


def _check_spelling(model: str, tokens: Sequence[str], source: object) -> None:
    """Refuse a vocabulary whose tokens are spelled for the other kind of tokenizer: more
    tokens start with the other kind's space ("Ġ" vs "▁") than with its own."""
    other = BYTE_LEVEL if model == SENTENCEPIECE else SENTENCEPIECE
    own = sum(t.startswith(_SPACE[model]) for t in tokens)
    foreign = sum(t.startswith(_SPACE[other]) for t in tokens)
    if foreign > own:
        kinds = {BYTE_LEVEL: "byte-level BPE", SENTENCEPIECE: "SentencePiece"}
        raise CorruptModel(
            f"{source}: tokenizer.ggml.model says {model} ({kinds[model]}), but its tokens "
            f"are spelled for {kinds[other]} ({foreign} start with '{_SPACE[other]}', {own} "
            f"with '{_SPACE[model]}'); the file's tokenizer is mislabelled: convert the model "
            "again with llama.cpp's convert_hf_to_gguf.py"
        )


def _strings(metadata: Mapping[str, object], key: str, source: object) -> Sequence[str]:
    value = metadata.get(key)
    if not isinstance(value, list | tuple) or not value:
        raise CorruptModel(f"{source}: {key} is missing or empty; the vocabulary cannot be built")
    return value


def _merge(text: str, index: int, source: object) -> tuple[str, str]:
    parts = text.split(" ")
    if len(parts) != 2:
        raise CorruptModel(
            f"{source}: tokenizer.ggml.merges[{index}] is {text!r}, not 'left right'"
        )
    return parts[0], parts[1]


def _token_id(
    metadata: Mapping[str, object], key: str, n_tokens: int, source: object
) -> int | None:
    value = metadata.get(key)
    return None if value is None else _checked_id(value, key, n_tokens, source)


def _checked_id(value: object, key: str, n_tokens: int, source: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n_tokens:
        raise CorruptModel(f"{source}: {key} holds {value!r}, not a token id below {n_tokens}")
    return value


def _stop_ids(
    metadata: Mapping[str, object], tokens: Sequence[str], eos_id: int | None, source: object
) -> frozenset[int]:
    """eos, the file's other end-of-generation ids, and the usual end-of-turn tokens by text."""
    ids = {eos_id} if eos_id is not None else set()
    for key in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        found = _token_id(metadata, key, len(tokens), source)
        if found is not None:
            ids.add(found)
    for value in metadata.get("tokenizer.ggml.eos_token_ids") or ():
        ids.add(_checked_id(value, "tokenizer.ggml.eos_token_ids", len(tokens), source))
    wanted = set(STOP_TOKEN_TEXTS)
    if wanted.issuperset(HARMONY_TURN_ENDS) and set(HARMONY_TURN_ENDS) <= set(tokens):
        wanted.discard(HARMONY_MESSAGE_END)
    ids.update(i for i, text in enumerate(tokens) if text in wanted)
    return frozenset(ids)
