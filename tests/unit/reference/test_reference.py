"""Unit checks of the numpy reference: the KV cache against full recomputation, weight
loading modes, stats and input checks (the rotary maths: tests/unit/modelmath)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.gguf import GGUFModel, open_model
from engine.modelmath.stats import layer_stats
from engine.reference import (
    KVCache,
    ReferenceWeights,
    compare_layers,
    forward,
    greedy,
)
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory) -> GGUFModel:
    """q/k norm, head_dim != hidden / heads, GQA, untied output, mixed quant types."""
    path = tmp_path_factory.mktemp("ref") / "qwen3.gguf"
    spec = TextSpec(layers=3, heads=4, kv_heads=2, head_dim=32)
    return open_model(write_model(path, "qwen3", spec, default_type=T.Q8_0,
                                  types={"ffn_up": T.Q4_0}, std=0.2))


@pytest.fixture(scope="module")
def vl(tmp_path_factory) -> GGUFModel:
    path = tmp_path_factory.mktemp("ref") / "vl.gguf"
    return open_model(write_model(path, "qwen25vl", TextSpec(layers=2), std=0.2, seed=2))


def ids_of(model: GGUFModel, n: int) -> np.ndarray:
    return np.random.default_rng(4).integers(0, model.config.text.vocab_size, n)


def test_kv_cache_decode_equals_full_forward(qwen3):
    ids = ids_of(qwen3, 9)
    full = forward(qwen3, ids, dtype=np.float64)
    weights = ReferenceWeights(qwen3, np.float64, keep=True)
    cache = KVCache()
    steps = [forward(qwen3, ids[:5], weights=weights, cache=cache)]
    steps += [forward(qwen3, ids[i:i + 1], weights=weights, cache=cache) for i in range(5, 9)]
    assert cache.length == 9
    np.testing.assert_allclose(np.concatenate([s.logits for s in steps]), full.logits, atol=1e-10)
    stepped = [np.concatenate([s.hidden_states[i] for s in steps]) for i in range(4)]
    assert compare_layers(full.hidden_states, stepped, rtol=1e-10).first_off is None


def test_kv_cache_with_mrope_positions(vl):
    positions = np.stack([[0, 1, 2, 2, 2, 2, 4, 5], [0, 1, 2, 2, 3, 3, 4, 5],
                          [0, 1, 2, 3, 2, 3, 4, 5]])  # text, a 2x2 image, text
    ids = ids_of(vl, 8)
    full = forward(vl, ids, positions=positions, dtype=np.float64)
    cache = KVCache()
    head = forward(vl, ids[:6], positions=positions[:, :6], dtype=np.float64, cache=cache)
    tail = forward(vl, ids[6:], positions=positions[:, 6:], dtype=np.float64, cache=cache)
    np.testing.assert_allclose(np.concatenate([head.logits, tail.logits]), full.logits,
                               atol=1e-10)


def test_greedy_equals_argmax_of_recomputation(qwen3):
    ids = list(ids_of(qwen3, 4))
    expected = []
    for _ in range(5):
        expected.append(int(forward(qwen3, ids + expected).logits[-1].argmax()))
    assert greedy(qwen3, ids, 5) == expected


def test_lazy_and_kept_weights_agree_and_embeds_path(qwen3):
    ids = ids_of(qwen3, 6)
    lazy = forward(qwen3, ids)
    kept_weights = ReferenceWeights(qwen3, keep=True)
    kept = forward(qwen3, ids, weights=kept_weights)
    np.testing.assert_array_equal(lazy.logits, kept.logits)
    embeds = forward(qwen3, inputs_embeds=kept_weights.embed(ids))
    np.testing.assert_array_equal(embeds.logits, lazy.logits)
    assert lazy.logits.dtype == np.float32
    assert len(lazy.hidden_states) == qwen3.config.text.n_layers + 1


def test_layer_stats_of_last_token(qwen3):
    out = forward(qwen3, ids_of(qwen3, 5), dtype=np.float64)
    stats = layer_stats(out.hidden_states)
    assert stats.shape == (4, 4) and stats.dtype == np.float32
    last = out.hidden_states[2][-1]
    np.testing.assert_allclose(stats[2], [last.mean(), last.std(), last.min(), last.max()],
                               rtol=1e-6)


def test_forward_rejects_bad_inputs(qwen3):
    cfg = qwen3.config.text
    with pytest.raises(ValueError, match="exactly one"):
        forward(qwen3)
    with pytest.raises(ValueError, match="exactly one"):
        forward(qwen3, [1], inputs_embeds=np.zeros((1, cfg.hidden_size)))
    with pytest.raises(ValueError, match="token ids must lie"):
        forward(qwen3, [cfg.vocab_size])
    with pytest.raises(ValueError, match="do not match 2 tokens"):
        forward(qwen3, [1, 2], positions=[0, 1, 2])
    with pytest.raises(ValueError, match="need a model with M-RoPE"):
        forward(qwen3, [1, 2], positions=np.zeros((3, 2)))
