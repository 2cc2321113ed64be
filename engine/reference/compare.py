"""Layer-by-layer comparison of two runs, naming the first hidden state that is off.

A wrong rotary, head mapping or scale shows up as one layer where the difference jumps;
everything after it is off too, so the first layer off is the one to look at.
Tolerances are relative to each layer's magnitude (Qwen's hidden states grow by orders
of magnitude with depth).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def layer_label(i: int) -> str:
    """Hidden state i: 0 is the embeddings, i >= 1 the output of block blk.{i-1}."""
    return "embeddings" if i == 0 else f"layer {i} (blk.{i - 1})"


@dataclass(frozen=True)
class LayerComparison:
    max_abs: tuple[float, ...]    # per hidden state: max |expected - actual|
    scale: tuple[float, ...]      # per hidden state: max |expected|
    tolerance: tuple[float, ...]  # per hidden state: atol + rtol * scale
    first_off: int | None         # index of the first hidden state beyond tolerance

    def summary(self) -> str:
        rows = ", ".join(f"{i}: {d:.3g}/{s:.3g}" for i, (d, s) in enumerate(
            zip(self.max_abs, self.scale, strict=True)))
        head = "all layers within tolerance" if self.first_off is None else (
            f"{layer_label(self.first_off)} is the first off: max |diff| "
            f"{self.max_abs[self.first_off]:.4g} > tolerance {self.tolerance[self.first_off]:.4g}"
        )
        return f"{head}; per layer max |diff| / max |expected|: {rows}"


def compare_layers(
    expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
    rtol: float = 1e-4, atol: float = 1e-5,
) -> LayerComparison:
    """Compare hidden states [S, H] pairwise; both lists start with the embeddings."""
    if len(expected) != len(actual):
        raise ValueError(f"{len(expected)} expected hidden states but {len(actual)} actual")
    max_abs, scale, tolerance = [], [], []
    for e, a in zip(expected, actual, strict=True):
        e, a = np.asarray(e, dtype=np.float64), np.asarray(a, dtype=np.float64)
        if e.shape != a.shape:
            raise ValueError(f"hidden state shapes differ: {e.shape} vs {a.shape}")
        max_abs.append(float(np.abs(e - a).max()))
        scale.append(float(np.abs(e).max()))
        tolerance.append(atol + rtol * scale[-1])
    first_off = next(
        (i for i, (d, t) in enumerate(zip(max_abs, tolerance, strict=True)) if not d <= t), None
    )
    return LayerComparison(tuple(max_abs), tuple(scale), tuple(tolerance), first_off)
