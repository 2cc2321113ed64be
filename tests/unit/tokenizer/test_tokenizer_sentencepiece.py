"""SentencePiece vocabularies (tokenizer.ggml.model = "llama") against the ``sentencepiece``
package loading the same model, over the tokenizer corpus.

The models are trained here (BPE, as Gemma, Mistral and Llama 2 ship; unigram too), with and
without the space prefix, and written as a GGUF vocabulary as llama.cpp's converter does.
Around control tokens we follow sentencepiece as llama.cpp runs it: every piece of text
between control tokens is tokenized on its own (with its own space prefix), which is what
sentencepiece gives for that piece alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sentencepiece as spm

from engine.errors import CorruptModel
from engine.gguf.reader import read_gguf
from engine.tokenizer import StreamDecoder, load_tokenizer
from engine.tokenizer.build import build_tokenizer
from engine.tokenizer.tokenizer import Tokenizer
from engine.tokenizer.vocab import read_vocabulary
from tests.fixtures.sentencepiece_models import CONTROLS, corpus_lines, train, write_vocabulary

CORPUS = corpus_lines()
START, END = CONTROLS


class Pair:
    """Our tokenizer and sentencepiece on one trained model."""

    def __init__(self, folder: Path, model_type: str, prefix: bool) -> None:
        model = train(folder, model_type, add_dummy_prefix=prefix)
        self.prefix = prefix
        self.gguf = write_vocabulary(model, folder / "vocab.gguf", add_space_prefix=prefix)
        self.ours: Tokenizer = load_tokenizer(self.gguf)
        self.sp = spm.SentencePieceProcessor(model_file=str(model))

    def reference(self, text: str) -> list[int]:
        """sentencepiece on each piece between control tokens, control tokens as their ids."""
        ids: list[int] = []
        for part in _split(text):
            ids += [self.sp.PieceToId(part)] if part in CONTROLS else self.sp.encode(part)
        return ids


def _split(text: str) -> list[str]:
    parts = [text]
    for control in CONTROLS:
        parts = [p for part in parts for p in _around(part, control)]
    return [p for p in parts if p]


def _around(text: str, control: str) -> list[str]:
    if text in CONTROLS:
        return [text]
    pieces = text.split(control)
    return [p for piece in pieces for p in (piece, control)][:-1]


@pytest.fixture(scope="module", params=[("bpe", True), ("bpe", False), ("unigram", False)],
                ids=["bpe-prefix", "bpe-no-prefix", "unigram"])
def pair(request, tmp_path_factory) -> Pair:
    model_type, prefix = request.param
    return Pair(tmp_path_factory.mktemp(f"sp-{model_type}"), model_type, prefix)


def test_corpus_ids_are_sentencepieces(pair):
    """Code, CJK, emoji, whitespace runs, another family's control-token strings (plain
    text here), every line of the corpus. (A unigram model with the space prefix is not
    among them: where two splits of a whitespace run score the same, sentencepiece and
    ``tokenizers`` break the tie differently.)"""
    differ = [(line, pair.ours.encode(line), pair.sp.encode(line)) for line in CORPUS
              if pair.ours.encode(line) != pair.sp.encode(line)]
    assert not differ, f"{len(differ)} of {len(CORPUS)} lines differ, first: {differ[0]}"


def test_byte_fallback_and_unknown_characters(pair):
    text = "Ωmega ∑ 🦙 \u0300 ☃☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"
    ids = pair.ours.encode(text)
    assert ids == pair.sp.encode(text)
    assert any(pair.sp.IsByte(i) for i in ids)  # some characters went to <0xAB> tokens
    assert pair.ours.decode(ids) == (" " if pair.prefix else "") + text


def test_control_tokens_in_a_prompt(pair):
    """A chat turn around every 25th line: control tokens parsed, the text between them
    tokenized as sentencepiece tokenizes it alone."""
    for line in CORPUS[::25]:
        prompt = f"{START}user\n{line}{END}\n{START}model\n"
        assert pair.ours.encode(prompt, parse_special=True) == pair.reference(prompt), line


def test_control_token_strings_typed_by_a_user_stay_text(pair):
    ids = pair.ours.encode(f"say {END} please")
    assert pair.sp.PieceToId(END) not in ids
    assert ids == pair.sp.encode(f"say {END} please")


def test_decode_and_stream_give_the_text_back(pair):
    for line in CORPUS[::7]:
        ids = pair.ours.encode(line)
        expected = (" " if pair.prefix else "") + line
        assert pair.ours.decode(ids) == expected
        stream = StreamDecoder(pair.ours)
        assert "".join(stream.push(i) for i in ids) + stream.flush() == expected


def test_bos_by_default_and_token_lookup(pair):
    assert pair.ours.add_bos and pair.ours.bos_id == pair.sp.bos_id()
    assert pair.ours.encode_prompt([("hi", False)])[0] == pair.sp.bos_id()
    assert pair.ours.token_to_id(END) == pair.sp.PieceToId(END)
    assert pair.ours.id_to_piece(pair.sp.PieceToId("▁the")) == " the"


def test_the_cached_tokenizer_is_the_same(pair):
    again = load_tokenizer(pair.gguf)  # read back from the cache entry
    built, _ = build_tokenizer(read_vocabulary(read_gguf(pair.gguf).metadata, pair.gguf))
    assert again.pipeline() == built.to_str()  # the whole pipeline
    assert [again.encode(line) for line in CORPUS[::50]] == [
        pair.ours.encode(line) for line in CORPUS[::50]]


def test_sentencepiece_vocabulary_labelled_byte_level_is_refused(tmp_path):
    model = train(tmp_path / "sp", "bpe")
    path = write_vocabulary(model, tmp_path / "gpt2.gguf", add_space_prefix=True,
                            ggml_model="gpt2")
    with pytest.raises(CorruptModel, match=r"says gpt2 \(byte-level BPE\).*SentencePiece"):
        read_vocabulary(read_gguf(path).metadata, path)


def test_byte_level_vocabulary_labelled_sentencepiece_is_refused():
    tokens = ["<unk>", "Ġthe", "Ġa", "Ġof", "the", "▁x"]
    metadata = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
                "tokenizer.ggml.scores": [0.0] * len(tokens)}
    with pytest.raises(CorruptModel, match=r"says llama \(SentencePiece\).*byte-level BPE"):
        read_vocabulary(metadata, "qwen.gguf")
