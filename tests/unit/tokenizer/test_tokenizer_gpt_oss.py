"""gpt-oss's vocabulary as llama.cpp's converter writes it (``--vocab-only`` of a
GptOssForCausalLM folder), against llama.cpp's tokenizer on the same file: plain text, and
a harmony prompt whose markers (<|start|>, <|channel|>, <|message|> ...) are special tokens.

The vocabulary is tests/fixtures/gpt_oss.py's (an o200k-split BPE with harmony's special
tokens, since gpt-oss's own cannot be fetched here).
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest
import regex

from engine.gguf.reader import read_gguf
from engine.prompt import render_prompt
from engine.tokenizer import load_tokenizer
from tests.fixtures.gpt_oss import CORPUS as LINES
from tests.fixtures.gpt_oss import HARMONY, TEMPLATE, convert_gpt_oss

MARK = regex.compile(r"\p{M}")


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    return convert_gpt_oss(tmp_path_factory.mktemp("gpt-oss-vocab"), vocab_only=True)[1]


def llama_cpp_ids(path: Path, texts: list[str], special: bool) -> list[list[int]]:
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        return [llm.tokenize(text.encode(), add_bos=False, special=special) for text in texts]
    finally:
        llm.close()


def test_the_converter_writes_gpt4o_and_harmonys_control_tokens(gguf):
    metadata = read_gguf(gguf).metadata
    assert metadata["general.architecture"] == "gpt-oss"
    assert metadata["tokenizer.ggml.pre"] == "gpt-4o"
    tokenizer = load_tokenizer(gguf)
    for marker in HARMONY:
        [token] = tokenizer.encode(marker, parse_special=True)
        assert tokenizer.decode([token]) == marker
    assert tokenizer.eos_id == tokenizer.token_to_id("<|return|>")


def test_a_turn_ends_where_llama_cpps_does(gguf):
    """At <|return|> and <|call|>; <|end|> closes a message (the thinking) mid-turn."""
    tokenizer = load_tokenizer(gguf)
    llm = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    try:
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        ends = {marker for marker in HARMONY if llama_cpp.llama_vocab_is_eog(
            vocab, tokenizer.token_to_id(marker))}
    finally:
        llm.close()
    assert {tokenizer.decode([i]) for i in tokenizer.stop_ids} == ends
    assert {"<|return|>", "<|call|>"} <= ends and "<|end|>" not in ends


def test_plain_text_ids_are_llama_cpps(gguf):
    """Except where a word holds a combining mark (test_tokenizer_gpt4o.py says why)."""
    ours = load_tokenizer(gguf)
    differ = [line for line, theirs in zip(LINES, llama_cpp_ids(gguf, LINES, False), strict=True)
              if ours.encode(line) != theirs]
    assert all(MARK.search(line) for line in differ), differ


def test_a_harmony_prompt_is_llama_cpps(gguf):
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": LINES[1]},
                {"role": "assistant", "content": LINES[2], "thinking": LINES[3]},
                {"role": "user", "content": "What's 12345 + 678?"}]
    prompt = render_prompt(messages, chat_template=TEMPLATE, think="low")
    ours = load_tokenizer(gguf).encode_segments(prompt.segments)
    [theirs] = llama_cpp_ids(gguf, [prompt.text], True)
    assert ours == theirs
    assert sum(token < len(HARMONY) for token in ours) > 10  # markers as single tokens
