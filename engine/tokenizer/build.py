"""GGUF vocabulary -> ``tokenizers`` pipeline, with the file's control and user-defined tokens
as added tokens.

Byte-level BPE: [NFC] -> split regex -> byte-level -> BPE, equal to the model's own
tokenizer.json (for Qwen2: BPE with no unk and no byte fallback, NFC, Split(regex,
isolated) + ByteLevel(use_regex=False), ByteLevel decoder).
SentencePiece: " " -> "▁" -> BPE with the merges the scores imply and byte fallback, equal to
``sentencepiece`` (the space prefix is the Tokenizer's, per piece of text, as llama.cpp adds it).
"""

import re
from functools import cache

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend

from engine.errors import CorruptModel
from engine.tokenizer.byte_level import byte_to_char, spell
from engine.tokenizer.info import TokenizerInfo
from engine.tokenizer.sentencepiece_bpe import SPACE, is_unigram, merges_by_score
from engine.tokenizer.vocab import SENTENCEPIECE, TokenType, Vocabulary

_ADDED = (TokenType.CONTROL, TokenType.USER_DEFINED)
NEVER = -1e9  # a unigram score no segmentation picks while it has another


def build_tokenizer(vocab: Vocabulary) -> tuple[Backend, TokenizerInfo]:
    """The pipeline and its info (load.py writes them as a cache entry and opens that)."""
    backend = _sentencepiece(vocab) if vocab.model == SENTENCEPIECE else _byte_level(vocab)
    return _with_added_tokens(backend, vocab)


def _byte_level(vocab: Vocabulary) -> Backend:
    assert vocab.pre is not None  # read_vocabulary sets it for every byte-level file
    entries = _vocabulary_entries(vocab)
    try:
        model = models.BPE(entries, list(vocab.merges), ignore_merges=vocab.pre.ignore_merges)
    except Exception as error:  # tokenizers reports bad merges as a plain Exception
        raise CorruptModel(
            f"{vocab.source}: the BPE merges do not fit the vocabulary ({error})"
        ) from None
    backend = Backend(model)
    if vocab.pre.nfc:
        backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(vocab.pre.split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece(vocab: Vocabulary) -> Backend:
    """No pre-tokenizer: SentencePiece joins across the whole text (its pieces never hold
    "▁" in the middle, so words stay apart by themselves). A unigram vocabulary (scores
    that are log-probabilities, not BPE's whole-number ranks) takes the most probable
    segmentation instead, as sentencepiece does."""
    pieces = {text: index for index, text in enumerate(vocab.tokens)}
    mergeable = {
        text: index for text, index in pieces.items()
        if vocab.token_types[index] in (TokenType.NORMAL, TokenType.USER_DEFINED)
    }
    if is_unigram([vocab.scores[i] for i in mergeable.values()]):
        # only normal pieces segment text: the others' scores make them lose every time
        normal = set(mergeable.values())
        scores = [score if index in normal else NEVER for index, score in enumerate(vocab.scores)]
        model = models.Unigram(list(zip(vocab.tokens, scores, strict=True)),
                               unk_id=vocab.unk_id, byte_fallback=True)
    else:
        unk = None if vocab.unk_id is None else vocab.tokens[vocab.unk_id]
        model = models.BPE(pieces, merges_by_score(mergeable, vocab.scores), unk_token=unk,
                           fuse_unk=True, byte_fallback=True)
    backend = Backend(model)
    backend.normalizer = normalizers.Replace(" ", SPACE)
    return backend


def _with_added_tokens(backend: Backend, vocab: Vocabulary) -> tuple[Backend, TokenizerInfo]:
    control = [i for i, kind in enumerate(vocab.token_types) if kind == TokenType.CONTROL]
    user = [i for i, kind in enumerate(vocab.token_types) if kind == TokenType.USER_DEFINED]
    # normalized=False: matched in the raw text, before NFC (as llama.cpp and HF do).
    backend.add_special_tokens(
        [AddedToken(vocab.tokens[i], special=True, normalized=False) for i in control]
    )
    backend.add_tokens([AddedToken(vocab.tokens[i], special=False, normalized=False) for i in user])
    info = TokenizerInfo(
        vocab_size=len(vocab.tokens),
        bos_id=vocab.bos_id,
        eos_id=vocab.eos_id,
        add_bos=vocab.add_bos,
        add_eos=vocab.add_eos,
        stop_ids=vocab.stop_ids,
        control_ids=frozenset(control),
        pre=vocab.pre.name if vocab.pre is not None else "",
        model=vocab.model,
        add_space_prefix=vocab.add_space_prefix,
    )
    return backend, info


def _vocabulary_entries(vocab: Vocabulary) -> dict[str, int]:
    """text -> id for the BPE model. Normal tokens must be spelled in the byte alphabet; a
    converter that wrote one as plain text is respelled (as HF's loader does). Added tokens
    keep their plain text, which is how llama.cpp stores them."""
    entries = {text: index for index, text in enumerate(vocab.tokens)}
    if _outside_alphabet().search("".join(vocab.tokens)) is None:
        return entries  # the usual case, checked in one pass
    for index, (text, kind) in enumerate(zip(vocab.tokens, vocab.token_types, strict=True)):
        if kind not in _ADDED and _outside_alphabet().search(text):
            entries.pop(text, None)
            entries[spell(text)] = index
    return entries


@cache
def _outside_alphabet() -> re.Pattern[str]:
    return re.compile("[^" + re.escape("".join(byte_to_char().values())) + "]")
