"""GPT-4o's pre-tokenizer (``tokenizer.ggml.pre`` "gpt-4o", Phi-4-mini's GGUFs) against
llama.cpp's tokenizer on the same file.

The vocabulary is a byte-level BPE trained on the corpus without any split, so its merges
cross the boundaries a pre-tokenizer draws: two splits that differ give different ids, and
the ids equal llama.cpp's only where the pieces do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import llama_cpp
import pytest
import regex
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from engine.tokenizer import load_tokenizer
from tests.data.tokenizer_corpus import generate
from tests.fixtures.synthetic_gguf import write_model

LINES = generate.corpus()[::3]
MARK = regex.compile(r"\p{M}")


@pytest.fixture(scope="module")
def gguf_with(tmp_path_factory) -> Callable[[str], Path]:
    """pre name -> a qwen2-shaped GGUF holding the trained vocabulary under that name."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.train_from_iterator(LINES, trainers.BpeTrainer(
        vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    model = json.loads(backend.to_str())["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    folder = tmp_path_factory.mktemp("gpt4o")

    def write(pre: str) -> Path:
        return write_model(folder / f"{pre}.gguf", "qwen2", overrides={
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [1] * len(tokens),
            "tokenizer.ggml.merges": merges, "tokenizer.ggml.pre": pre,
            "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 0,
            "tokenizer.ggml.padding_token_id": 0})
    return write


def llama_cpp_ids(path: Path) -> list[list[int]]:
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        return [llm.tokenize(line.encode(), add_bos=False, special=False) for line in LINES]
    finally:
        llm.close()


def test_gpt4o_ids_are_llama_cpps_on_the_corpus(gguf_with):
    """Except where a word holds a combining mark: the regex keeps marks in words,
    llama.cpp's rewrite of it does not."""
    path = gguf_with("gpt-4o")
    ours = load_tokenizer(path)
    differ = [line for line, theirs in zip(LINES, llama_cpp_ids(path), strict=True)
              if ours.encode(line) != theirs]
    assert all(MARK.search(line) for line in differ), differ
    assert sum(not MARK.search(line) for line in LINES) > len(LINES) // 2


def test_the_split_shows_in_the_ids(gguf_with):
    """The same vocabulary read as Llama 3's (case-blind words, contractions apart)."""
    gpt4o, llama3 = (load_tokenizer(gguf_with(pre)) for pre in ("gpt-4o", "llama-bpe"))
    differ = [line for line in LINES if gpt4o.encode(line) != llama3.encode(line)]
    assert len(differ) > len(LINES) // 10
    pre_tokenizer = Tokenizer.from_str(gpt4o.pipeline()).pre_tokenizer
    pieces = pre_tokenizer.pre_tokenize_str("HelloWorld don't 12345")
    assert [p for p, _ in pieces] == ["Hello", "World", "Ġdon't", "Ġ", "123", "45"]
