"""The rotary maths (engine.modelmath.rope) against transformers' own functions: NeoX and
interleaved pairs, M-RoPE sections, and the inputs they refuse."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Qwen2_5_VLTextConfig
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding

from engine.modelmath.rope import apply_rope, inverse_frequencies, rope_angles


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
