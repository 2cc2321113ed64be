"""Unit checks of the numpy reference: rotary maths against transformers' functions, the
KV cache against full recomputation, weight loading modes, stats and input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Qwen2_5_VLTextConfig
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding

from engine.gguf import GGUFModel, open_model
from engine.modelmath.rope import apply_rope, inverse_frequencies, rope_angles
from engine.modelmath.stats import layer_stats
from engine.reference import (
    KVCache,
    ReferenceWeights,
    compare_layers,
    forward,
    greedy,
)
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model


def neox_tables(angles: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's cos/sin layout: the D/2 angles repeated for both halves -> [S, D]."""
    full = torch.from_numpy(np.concatenate([angles, angles], axis=-1))
    return full.cos(), full.sin()


def test_neox_rope_matches_transformers():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 7, 16))  # [heads, S, D]
    angles = rope_angles(np.arange(5, 12), 16, 1e4)
    cos, sin = neox_tables(angles)
    hf_q, hf_k = apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(k), cos, sin, 0)
    np.testing.assert_allclose(apply_rope(q, angles, interleaved=False), hf_q.numpy(), atol=1e-12)
    np.testing.assert_allclose(apply_rope(k, angles, interleaved=False), hf_k.numpy(), atol=1e-12)


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Row order llama.cpp's converter writes: per head, HF row i -> 2i, i + D/2 -> 2i + 1."""
    d = w.shape[0] // n_heads
    return w.reshape(n_heads, 2, d // 2, -1).swapaxes(1, 2).reshape(w.shape)


def test_interleaved_rope_on_gguf_rows_equals_neox_on_hf_rows():
    """Why llama GGUFs need interleaved rotary: scores on the stored (permuted) rows equal
    HF's NeoX scores on the rows transformers' loader restores."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rng = np.random.default_rng(1)
    heads, d, hidden, s = 2, 8, 12, 6
    wq_hf, wk_hf = rng.standard_normal((2, heads * d, hidden))
    wq, wk = llama_cpp_permute(wq_hf, heads), llama_cpp_permute(wk_hf, heads)
    restore = LlamaTensorProcessor()._reverse_permute_weights
    np.testing.assert_array_equal(restore(wq, heads, heads), wq_hf)

    x = rng.standard_normal((s, hidden))
    angles = rope_angles(np.arange(s), d, 1e4)

    def scores(wq: np.ndarray, wk: np.ndarray, interleaved: bool) -> np.ndarray:
        q = apply_rope((x @ wq.T).reshape(s, heads, d).transpose(1, 0, 2), angles, interleaved)
        k = apply_rope((x @ wk.T).reshape(s, heads, d).transpose(1, 0, 2), angles, interleaved)
        return q @ k.transpose(0, 2, 1)  # [heads, S, S]

    expected = scores(wq_hf, wk_hf, interleaved=False)
    np.testing.assert_allclose(scores(wq, wk, interleaved=True), expected, atol=1e-10)
    assert np.abs(scores(wq, wk, interleaved=False) - expected).max() > 1e-2


def test_mrope_angles_match_qwen25vl_rotary():
    config = Qwen2_5_VLTextConfig(
        hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [8, 12, 12]},
    )
    positions = np.stack([np.full(6, 3), 3 + np.arange(6) // 3, 3 + np.arange(6) % 3])  # [3, S]
    rotary = Qwen2_5_VLRotaryEmbedding(config)
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(positions)[:, None])
    angles = rope_angles(positions, 64, 1e6, (8, 12, 12))  # [S, 32]
    ours_cos, ours_sin = neox_tables(angles)
    np.testing.assert_allclose(ours_cos.numpy(), cos[0].numpy(), atol=2e-6)  # HF: fp32 angles
    np.testing.assert_allclose(ours_sin.numpy(), sin[0].numpy(), atol=2e-6)


def test_rope_angles_reject_bad_positions():
    with pytest.raises(ValueError, match="need a model with M-RoPE"):
        rope_angles(np.zeros((3, 4)), 16, 1e4)
    with pytest.raises(ValueError, match="sections summing to 8"):
        rope_angles(np.zeros((3, 4)), 16, 1e4, (2, 2, 2))
    np.testing.assert_allclose(inverse_frequencies(4, 100.0), [1.0, 0.1])


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
