"""Rotary position embedding: NeoX halves, llama-GGUF interleaved pairs, Qwen2-VL M-RoPE
(sections in a row), Qwen3-VL's (sections taking turns), LongRoPE, YaRN.

Interleaved: llama.cpp's converter permutes each head's Q/K rows so that HF row i lands at
2i and row i + D/2 at 2i + 1 (transformers' GGUF loader undoes it). Rotating pairs
(2i, 2i+1) with frequency i on the stored rows is therefore HF's NeoX rotation of pairs
(i, i + D/2), with q and k permuted alike inside each head, so q.k and the attention output
are unchanged.

LongRoPE (Phi-3.5): frequency j is divided by factor j of the short or the long set, and cos
and sin are multiplied by an attention factor. The set is chosen as HF transformers does: a
sequence longer than the original context turns every token with the long set, a shorter one
with the short set; a call that takes the sequence past the original context runs the cached
tokens again (HF's Phi-3 drops its cache there; engine.runtime.decoder does the same), and
the reference's cached runs are told the whole sequence's length (``length``).
llama.cpp instead picks once by the context size it was given (long when n_ctx > original).

YaRN (Qwen3, gpt-oss): frequency j is divided by the factor where it turns fewer than
beta_slow times over the original context, kept where it turns more than beta_fast times,
and mixed along a linear ramp of j between the two (the ramp's ends rounded outward to whole
frequencies, as llama.cpp always does and HF does unless told not to); cos and sin are
multiplied by the attention factor. Unlike LongRoPE it does not depend on the length.

Partial rotary (Phi-4-mini): only the first R = rope_dims of each head's D dims turn, with
R in place of D everywhere above (frequencies theta^(-2j/R), pairs (i, i + R/2) or (2i, 2i+1)
for i < R/2); dims R..D pass unchanged. That is HF's split of q into q[..., :R] and the rest,
and llama.cpp's rope of n_rot dims.

Angles are computed in float64 and cast once, so fp32 and fp64 runs share them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.gguf.config import TextConfig, YarnScaling


def inverse_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """theta^(-2j/D) for j < D/2 -> [D/2] float64."""
    return theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def mrope_streams(sections: Sequence[int], interleaved: bool = False) -> np.ndarray:
    """Which position stream (0 = t, 1 = h, 2 = w) each frequency j < sum(sections) reads.

    Chunked (Qwen2-VL): sections in a row, e.g. (16, 24, 24): j < 16 -> t, then h, then w.
    Interleaved (Qwen3-VL): the streams take turns, j % 3 == 1 -> h while j < 3 * h_section,
    j % 3 == 2 -> w while j < 3 * w_section, every other frequency t; e.g. (24, 20, 20):
    t h w t h w ... up to j = 59, then t for j = 60..63.
    """
    if not interleaved:
        return np.repeat(np.arange(len(sections)), sections)
    j = np.arange(sum(sections))
    stream = np.zeros_like(j)
    for axis in (1, 2):
        stream[(j % 3 == axis) & (j < 3 * sections[axis])] = axis
    return stream


def rope_angles(
    positions: np.ndarray, head_dim: int, theta: float, sections: Sequence[int] | None = None,
    factors: Sequence[float] | None = None, interleaved: bool = False,
) -> np.ndarray:
    """Rotation angle of every (token, frequency) -> [S, D/2] float64.

    positions [S]: one index per token. positions [3, S] (M-RoPE, needs ``sections``):
    frequency j reads the (t, h, w) stream ``mrope_streams`` assigns it (chunked, or with
    ``interleaved`` taking turns). ``factors`` [D/2] divide the frequencies (LongRoPE).
    """
    inv_freq = inverse_frequencies(head_dim, theta)  # [D/2]
    if factors is not None:
        inv_freq = inv_freq / np.asarray(factors, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    if positions.ndim == 1:
        return positions[:, None] * inv_freq  # [S, D/2]
    if sections is None:
        raise ValueError(f"positions of shape {positions.shape} need a model with M-RoPE")
    stream = mrope_streams(sections, interleaved)  # [D/2]: 0 = t, 1 = h, 2 = w
    if positions.shape[0] != 3 or stream.shape != inv_freq.shape:
        raise ValueError(
            f"M-RoPE needs positions [3, S] and sections summing to {len(inv_freq)}; "
            f"got positions {positions.shape}, sections {tuple(sections)}"
        )
    return positions[stream].T * inv_freq  # positions[stream]: [D/2, S] -> [S, D/2]


def text_rope_angles(positions: np.ndarray, text: TextConfig, local: bool = False,
                     length: int | None = None) -> np.ndarray:
    """The decoder's angles [S, R/2] (R = rope_dims, the turning part of a head): the global
    layers' (base rope_theta, positions divided by a linear scaling factor, LongRoPE's
    factors for a sequence of ``length``, default the last position + 1, or YaRN's), or
    with ``local`` the sliding layers' (Gemma 3: their own base, no scaling)."""
    if local:
        return rope_angles(positions, text.rope_dims, text.rope_theta_local or text.rope_theta)
    positions = np.asarray(positions, dtype=np.float64)
    return rope_angles(positions / text.rope_linear_factor, text.rope_dims, text.rope_theta,
                       text.mrope_sections, frequency_factors(positions, text, length),
                       text.mrope_interleaved)


def yarn_divisors(yarn: YarnScaling, rope_dims: int, theta: float) -> np.ndarray:
    """What YaRN divides each frequency by -> [R/2] float64: 1 for the fast ones (j below the
    ramp), the factor for the slow ones (above it), the mix's inverse between."""
    low, high = (yarn_frequency_index(yarn.original_context, beta, rope_dims, theta)
                 for beta in (yarn.beta_fast, yarn.beta_slow))
    low, high = max(math.floor(low), 0), min(math.ceil(high), rope_dims - 1)
    j = np.arange(rope_dims // 2, dtype=np.float64)
    kept = (1 - np.clip((j - low) / max(high - low, 0.001), 0, 1)) * yarn.extrapolation
    return 1 / ((1 - kept) / yarn.factor + kept)


def yarn_frequency_index(context: int, turns: float, rope_dims: int, theta: float) -> float:
    """The (fractional) frequency index j that turns ``turns`` times over ``context``
    positions: context * theta^(-2j/R) = 2 pi turns, solved for j."""
    return rope_dims * math.log(context / (turns * 2 * math.pi)) / (2 * math.log(theta))


def frequency_factors(positions: np.ndarray, text: TextConfig,
                     length: int | None = None) -> Sequence[float] | None:
    """LongRoPE's factor set for a sequence of ``length`` (default: the last position + 1):
    long past the original context, else short; YaRN's divisors, whatever the length; None
    without either."""
    if text.rope_yarn is not None:
        return yarn_divisors(text.rope_yarn, text.rope_dims, text.rope_theta)
    if text.rope_original_context is None:
        return None
    if long_rope(text, length or int(np.max(positions)) + 1):
        return text.rope_factors_long
    return text.rope_factors_short


def long_rope(text: TextConfig, length: int) -> bool:
    """Does a sequence of ``length`` tokens turn with LongRoPE's long factors?"""
    return text.rope_original_context is not None and length > text.rope_original_context


def rope_amplitude(text: TextConfig, local: bool = False) -> float:
    """What cos and sin are multiplied by: LongRoPE's or YaRN's attention factor on the
    global layers."""
    return 1.0 if local else text.rope_attention_factor


def apply_rope(x: np.ndarray, angles: np.ndarray, interleaved: bool,
               amplitude: float = 1.0) -> np.ndarray:
    """Rotate x [..., S, D] by angles [S, R/2]; pairs (i, i + R/2), or (2i, 2i + 1), of the
    first R dims, the other D - R unchanged (partial rotary); cos and sin times ``amplitude``
    (LongRoPE's attention factor)."""
    turned = 2 * angles.shape[-1]  # R
    if turned < x.shape[-1]:
        return np.concatenate([apply_rope(x[..., :turned], angles, interleaved, amplitude),
                               x[..., turned:]], axis=-1)
    cos = (np.cos(angles) * amplitude).astype(x.dtype)  # [S, D/2]
    sin = (np.sin(angles) * amplitude).astype(x.dtype)
    half = x.shape[-1] // 2
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        x1, x2 = x[..., :half], x[..., half:]
    r1 = x1 * cos - x2 * sin  # [..., S, D/2]
    r2 = x2 * cos + x1 * sin
    if interleaved:
        return np.stack([r1, r2], axis=-1).reshape(x.shape)  # back to pairs (2i, 2i+1)
    return np.concatenate([r1, r2], axis=-1)


def vision_rope_angles(positions: np.ndarray, head_dim: int, theta: float) -> np.ndarray:
    """2-D rotary angles [S, D/2] float64: the first D/4 frequencies turn with the patch
    row, the next D/4 with the column (the same D/4 frequencies for both)."""
    quarter = head_dim // 2
    inv_freq = theta ** (-np.arange(0, quarter, 2, dtype=np.float64) / quarter)  # [D/4]
    rows = positions[:, :1].astype(np.float64) * inv_freq  # [S, D/4]
    cols = positions[:, 1:].astype(np.float64) * inv_freq
    return np.concatenate([rows, cols], axis=-1)
