"""gpt-oss's vocabulary as llama.cpp's converter writes it (``--vocab-only`` of a
GptOssForCausalLM folder), against llama.cpp's tokenizer on the same file: plain text, and
a harmony prompt whose markers (<|start|>, <|channel|>, <|message|> ...) are special tokens.

gpt-oss's o200k_harmony tokenizer cannot be fetched here, so the folder holds a byte-level
BPE trained on the test corpus with o200k's split regex and harmony's special tokens. The
converter names a pre-tokenizer by the hash of a check text's ids, which only the real
vocabulary has; the run tells it the name its table gives gpt-oss's ("gpt-4o"), and writes
everything else (token types, special ids, merges) itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import llama_cpp
import pytest
import regex
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GptOssConfig, PreTrainedTokenizerFast

from engine.gguf.reader import read_gguf
from engine.prompt import render_prompt
from engine.tokenizer import load_tokenizer
from engine.tokenizer.pretokenizers import PRE_TOKENIZERS
from tests.data.tokenizer_corpus import generate
from tests.fixtures.llama_converter import converter_tree

LINES = generate.corpus()[::3]
MARK = regex.compile(r"\p{M}")
HARMONY = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
           "<|start|>", "<|end|>", "<|message|>", "<|call|>"]
TEMPLATE = (Path(__file__).parents[2] / "data" / "templates" / "gpt-oss.jinja").read_text()
# the converter run with the pre-tokenizer's name given (the hash is the real vocabulary's)
CONVERT = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-4o"
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gpt-oss-vocab")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRE_TOKENIZERS["gpt-4o"].split), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.train_from_iterator(LINES, trainers.BpeTrainer(
        vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=HARMONY, show_progress=False))
    backend.decoder = decoders.ByteLevel()
    hf = folder / "hf"
    PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|startoftext|>",
                            eos_token="<|return|>", pad_token="<|endoftext|>").save_pretrained(hf)
    GptOssConfig(vocab_size=backend.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 num_local_experts=2, intermediate_size=64,
                 architectures=["GptOssForCausalLM"]).save_pretrained(hf)
    tree = converter_tree()
    out = folder / "gpt-oss-vocab.gguf"
    subprocess.run([sys.executable, "-c", CONVERT, str(tree), str(tree / "convert_hf_to_gguf.py"),
                    str(hf), "--vocab-only", "--outfile", str(out)],
                   check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(tree / "gguf-py")))
    return out


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
