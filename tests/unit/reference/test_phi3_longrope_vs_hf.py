"""Phi-3.5's LongRoPE against HF transformers: a random-weight Phi3ForCausalLM whose
rope_parameters are longrope (an original context of 64 in a context of 256, distinct short
and long factor sets), converted by llama.cpp's convert_hf_to_gguf.py in f32.

The reference equals HF for a prompt inside the original context (short factors) and past it
(long factors); exact-mode greedy tokens equal HF's through a generation that crosses the
original context mid-way. Dropping the factors moves the logits far past the tolerance, so
the checks see them. Scalings Lantern does not run (dynamic NTK) are refused by name; Phi-4-mini's
partial rotary has its own test (test_phi4_partial_rotary_vs_hf.py).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from transformers import Phi3Config, Phi3ForCausalLM

from engine.errors import UnsupportedModel
from engine.gguf import GGUFModel, open_model
from engine.reference.text import KVCache, forward, greedy
from engine.runtime.decoder import DecoderSession
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import train
from tests.fixtures.synthetic_gguf import write_model
from tests.integration.test_engine_vs_hf import EXACT_ATOL

ORIGINAL = 64
CONTEXT = 256
VOCAB = 1200
GREEDY = 12


@dataclasses.dataclass
class LongRope:
    hf: Phi3ForCausalLM
    model: GGUFModel


def phi3_config(tie: bool = False, hidden: int = 64, heads: int = 4, **rope: object) -> Phi3Config:
    """Half as many kv heads as query heads (GQA)."""
    return Phi3Config(
        vocab_size=VOCAB, hidden_size=hidden, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=heads // 2, max_position_embeddings=CONTEXT,
        original_max_position_embeddings=ORIGINAL, sliding_window=None,
        rope_parameters={"rope_theta": 10_000.0, **rope}, initializer_range=0.1,
        tie_word_embeddings=tie, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )


def converted(folder, config: Phi3Config) -> tuple[Phi3ForCausalLM, object]:
    torch.manual_seed(0)
    hf = Phi3ForCausalLM(config).eval()
    hf.save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.model").write_bytes(train(folder / "sp", "bpe").read_bytes())
    return hf, convert(folder / "hf", folder / "phi3.gguf")


@pytest.fixture(scope="module")
def longrope(tmp_path_factory) -> LongRope:
    rng = np.random.default_rng(0)
    half = 16 // 2  # head_dim 16
    config = phi3_config(
        rope_type="longrope", original_max_position_embeddings=ORIGINAL,
        short_factor=(1.0 + rng.random(half)).tolist(),
        long_factor=(1.0 + 8.0 * rng.random(half)).tolist(),
    )
    hf, path = converted(tmp_path_factory.mktemp("phi3-longrope"), config)
    return LongRope(hf, open_model(path))


def prompt(n: int) -> list[int]:
    return [2] + np.random.default_rng(n).integers(3, VOCAB, n - 1).tolist()


def hf_logits(longrope: LongRope, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return longrope.hf(torch.tensor([ids])).logits[0].numpy()


def test_factors_and_attention_factor_are_read(longrope):
    text = longrope.model.config.text
    rope = longrope.hf.config.rope_parameters
    assert text.rope_original_context == ORIGINAL and text.context_length == CONTEXT
    np.testing.assert_allclose(text.rope_factors_short, rope["short_factor"], rtol=1e-6)
    np.testing.assert_allclose(text.rope_factors_long, rope["long_factor"], rtol=1e-6)
    expected = math.sqrt(1 + math.log(CONTEXT / ORIGINAL) / math.log(ORIGINAL))
    assert longrope.hf.model.rotary_emb.attention_scaling == pytest.approx(expected)
    assert text.rope_attention_factor == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("length", [ORIGINAL - 8, ORIGINAL + 24])
def test_reference_equals_hf_inside_and_past_the_original_context(longrope, length):
    ids = prompt(length)
    expected = hf_logits(longrope, ids)
    np.testing.assert_allclose(forward(longrope.model, ids).logits, expected, atol=2e-5, rtol=0)
    plain = dataclasses.replace(longrope.model.config.text, rope_original_context=None,
                                rope_attention_factor=1.0)
    unscaled = dataclasses.replace(longrope.model,
                                   config=dataclasses.replace(longrope.model.config, text=plain))
    assert np.abs(forward(unscaled, ids).logits - expected).max() > 100 * EXACT_ATOL


def test_cached_reference_runs_turn_as_the_whole_sequence_with_rope_length(longrope):
    """What the occlusion view does: a prefix inside the original context, then the rest."""
    ids = prompt(ORIGINAL + 24)
    whole = forward(longrope.model, ids).logits
    cache = KVCache()
    forward(longrope.model, ids[:40], cache=cache, rope_length=len(ids))
    rest = forward(longrope.model, ids[40:], cache=cache, rope_length=len(ids)).logits
    np.testing.assert_allclose(rest, whole[40:], atol=1e-5, rtol=0)
    cache = KVCache()
    forward(longrope.model, ids[:40], cache=cache)
    mixed = forward(longrope.model, ids[40:], cache=cache).logits
    assert np.abs(mixed - whole[40:]).max() > 100 * EXACT_ATOL


def test_exact_greedy_tokens_cross_the_original_context_as_hfs(longrope):
    ids = prompt(ORIGINAL - 6)
    session = DecoderSession(longrope.model, exact=True, max_cache_len=CONTEXT,
                             all_logits=True)
    long_ids = prompt(ORIGINAL + 24)
    delta = float(np.abs(session.forward(long_ids).logits
                         - hf_logits(longrope, long_ids)).max())
    assert delta < EXACT_ATOL
    with torch.no_grad():
        hf_tokens = longrope.hf.generate(torch.tensor([ids]), max_new_tokens=GREEDY,
                                         min_new_tokens=GREEDY, do_sample=False)[0]
    session = DecoderSession(longrope.model, exact=True, max_cache_len=CONTEXT)
    last = session.forward(ids).logits
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(last.argmax()))
        last = session.forward([tokens[-1]]).logits
    assert session.cache_len > ORIGINAL
    assert tokens == hf_tokens[len(ids):].tolist()
    assert greedy(longrope.model, ids, GREEDY) == tokens


def test_a_cache_shortened_inside_the_original_context_turns_short_again(longrope):
    """A rejected draft or an edited turn can shorten a cache that had turned long."""
    ids = prompt(ORIGINAL + 24)
    session = DecoderSession(longrope.model, exact=True, max_cache_len=CONTEXT)
    session.forward(ids)
    session.truncate(40)
    resumed = session.forward(ids[40:50]).logits
    assert session.cache_len == 50
    np.testing.assert_allclose(resumed, hf_logits(longrope, ids[:50])[-1], atol=EXACT_ATOL,
                               rtol=0)


def test_undeclared_scaling_types_are_refused_by_name(tmp_path):
    path = write_model(tmp_path / "m.gguf", "qwen2",
                       overrides={"qwen2.rope.scaling.type": "dynamic"})
    with pytest.raises(UnsupportedModel, match="rope scaling 'dynamic'"):
        open_model(path)
