"""YaRN against HF transformers: a random-weight Qwen3ForCausalLM whose rope_parameters are
yarn (factor 4 over an original context of 32), converted by llama.cpp's
convert_hf_to_gguf.py in f32. The frequencies and the attention factor equal HF's
``_compute_yarn_parameters``; the reference and exact mode equal HF's logits and greedy tokens
on prompts past the original context; without the scaling they do not.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.modeling_rope_utils import _compute_yarn_parameters

from engine.gguf import GGUFModel, open_model
from engine.gguf.config import YarnScaling
from engine.modelmath.rope import inverse_frequencies, yarn_divisors
from engine.reference.text import forward, greedy
from engine.runtime.decoder import DecoderSession
from tests.fixtures.greedy_runs import engine_greedy, hf_greedy
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import train
from tests.integration.test_engine_vs_hf import EXACT_ATOL

ORIGINAL = 32
FACTOR = 4.0
VOCAB = 1200
GREEDY = 10


@dataclasses.dataclass
class Yarn:
    hf: Qwen3ForCausalLM
    model: GGUFModel


def qwen3_config(head_dim: int = 16, theta: float = 10_000.0, **rope: object) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim,
        max_position_embeddings=int(ORIGINAL * FACTOR), initializer_range=0.1,
        rope_parameters={"rope_theta": theta, "rope_type": "yarn", "factor": FACTOR,
                         "original_max_position_embeddings": ORIGINAL, **rope},
        tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        attn_implementation="eager",
    )


@pytest.fixture(scope="module")
def yarn(tmp_path_factory) -> Yarn:
    folder = tmp_path_factory.mktemp("qwen3-yarn")
    torch.manual_seed(0)
    hf = Qwen3ForCausalLM(qwen3_config()).eval()
    hf.save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.model").write_bytes(train(folder / "sp", "bpe").read_bytes())
    return Yarn(hf, open_model(convert(folder / "hf", folder / "qwen3.gguf")))


def prompt(n: int) -> list[int]:
    return [2] + np.random.default_rng(n).integers(3, VOCAB, n - 1).tolist()


def hf_logits(yarn: Yarn, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return yarn.hf(torch.tensor([ids])).logits[0].numpy()


@pytest.mark.parametrize("head_dim, theta, factor, original, betas", [
    (16, 10_000.0, FACTOR, ORIGINAL, {}),
    (64, 150_000.0, 32.0, 4096, {"beta_fast": 32.0, "beta_slow": 1.0}),   # gpt-oss's
    (128, 1_000_000.0, 4.0, 32768, {"beta_fast": 16.0, "beta_slow": 2.0}),
])
def test_frequencies_and_attention_factor_are_hfs(head_dim, theta, factor, original, betas):
    config = qwen3_config(head_dim, theta, **betas)
    config.rope_parameters.update(factor=factor, original_max_position_embeddings=original)
    inv_freq, attention = _compute_yarn_parameters(config)
    scaling = YarnScaling(factor=factor, original_context=original, **betas)
    ours = inverse_frequencies(head_dim, theta) / yarn_divisors(scaling, head_dim, theta)
    np.testing.assert_allclose(ours, inv_freq.double().numpy(), rtol=2e-6)
    assert attention == pytest.approx(0.1 * math.log(factor) + 1)
    assert not np.allclose(ours, inverse_frequencies(head_dim, theta), rtol=1e-3)


def test_the_files_keys_are_read(yarn):
    text = yarn.model.config.text
    assert text.rope_yarn == YarnScaling(factor=FACTOR, original_context=ORIGINAL)
    assert text.rope_attention_factor == pytest.approx(yarn.hf.model.rotary_emb.attention_scaling)


@pytest.mark.parametrize("length", [ORIGINAL - 8, 3 * ORIGINAL])
def test_reference_equals_hf_inside_and_past_the_original_context(yarn, length):
    ids = prompt(length)
    expected = hf_logits(yarn, ids)
    np.testing.assert_allclose(forward(yarn.model, ids).logits, expected, atol=2e-5, rtol=0)
    plain = dataclasses.replace(yarn.model.config.text, rope_yarn=None, rope_attention_factor=1.0)
    unscaled = dataclasses.replace(yarn.model,
                                   config=dataclasses.replace(yarn.model.config, text=plain))
    assert np.abs(forward(unscaled, ids).logits - expected).max() > 100 * EXACT_ATOL


def test_exact_mode_logits_and_greedy_tokens_are_hfs(yarn):
    long_ids = prompt(3 * ORIGINAL)
    session = DecoderSession(yarn.model, exact=True, max_cache_len=4 * ORIGINAL, all_logits=True)
    delta = float(np.abs(session.forward(long_ids).logits - hf_logits(yarn, long_ids)).max())
    assert delta < EXACT_ATOL
    ids = prompt(ORIGINAL + 4)
    tokens = engine_greedy(yarn.model, ids, exact=True, n=GREEDY, max_cache_len=4 * ORIGINAL)
    assert tokens == hf_greedy(yarn.hf, ids, GREEDY)
    assert greedy(yarn.model, ids, GREEDY) == tokens
