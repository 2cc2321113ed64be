"""Mistral (GGUF architecture ``llama`` with a SentencePiece vocabulary) against HF
transformers: a random-weight MistralForCausalLM with a SentencePiece tokenizer trained here
(space prefix on, as Mistral and Llama 2 ship), converted by llama.cpp's convert_hf_to_gguf.py.

The converter permutes q/k rows for llama's interleaved rotary; the engine must undo nothing
and still equal HF: reference = HF, exact-mode greedy tokens = HF's, logits within the demo
models' tolerance, and the vocabulary tokenizes as sentencepiece does. A raw prompt gets the
BOS the family needs, as HF's tokenizer of the same GGUF adds it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sentencepiece as spm
import torch
from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

from engine.gguf import GGUFModel, open_model
from engine.reference.text import forward
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.tokenizer import load_tokenizer
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import corpus_lines, train
from tests.integration.test_engine_vs_hf import EXACT_ATOL

GREEDY = 12
QUESTION = "Write a Python function that checks whether a number"


@dataclasses.dataclass
class Mistral:
    hf: MistralForCausalLM
    model: GGUFModel
    sp: spm.SentencePieceProcessor
    prompt: list[int]


@pytest.fixture(scope="module")
def mistral(tmp_path_factory) -> Mistral:
    folder = tmp_path_factory.mktemp("mistral")
    tokenizer_model = train(folder / "sp", "bpe", add_dummy_prefix=True)
    config = MistralConfig(
        vocab_size=1200, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=None,
        max_position_embeddings=512, rope_theta=1_000_000.0, initializer_range=0.1,
        tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )
    torch.manual_seed(0)
    hf = MistralForCausalLM(config).eval()
    hf.save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.model").write_bytes(tokenizer_model.read_bytes())
    path = convert(folder / "hf", folder / "mistral.gguf")
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_model))
    prompt = [sp.bos_id()] + sp.encode(QUESTION)
    return Mistral(hf, open_model(path), sp, prompt)


def hf_logits(mistral: Mistral, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return mistral.hf(torch.tensor([ids])).logits[0].numpy()


def test_converted_as_llama_with_a_sentencepiece_vocabulary(mistral):
    assert mistral.model.config.architecture == "llama"
    tokenizer = load_tokenizer(mistral.model.path)
    assert tokenizer.info.model == "llama" and tokenizer.info.add_space_prefix
    for line in corpus_lines()[::5]:
        assert tokenizer.encode(line) == mistral.sp.encode(line), line
    assert tokenizer.encode_prompt([(QUESTION, False)]) == mistral.prompt


def test_a_raw_prompt_is_hfs_ids(mistral):
    hf_tokenizer = AutoTokenizer.from_pretrained(mistral.model.path.parent,
                                                 gguf_file=mistral.model.path.name)
    model = load_model(mistral.model.path, num_ctx=64)
    assert model.tokenize_raw(QUESTION).ids.tolist() == hf_tokenizer(QUESTION)["input_ids"] \
        == mistral.prompt
    model.tokenizer.close()


def test_reference_equals_hf(mistral):
    expected = hf_logits(mistral, mistral.prompt)
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(forward(mistral.model, mistral.prompt).logits, expected,
                               atol=2e-5, rtol=0)


def test_exact_engine_logits_and_greedy_tokens_are_hfs(mistral):
    session = DecoderSession(mistral.model, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(mistral.prompt).logits
    delta = float(np.abs(logits - hf_logits(mistral, mistral.prompt)).max())
    print(f"\nmistral exact mode: max |delta logit| vs HF: {delta:.1e}")
    assert delta < EXACT_ATOL
    with torch.no_grad():
        hf_tokens = mistral.hf.generate(torch.tensor([mistral.prompt]), max_new_tokens=GREEDY,
                                        min_new_tokens=GREEDY, do_sample=False)[0]
    session = DecoderSession(mistral.model, exact=True, max_cache_len=64)
    last = session.forward(mistral.prompt).logits
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(last.argmax()))
        last = session.forward([tokens[-1]]).logits
    assert tokens == hf_tokens[len(mistral.prompt):].tolist()
