"""Summary statistics of hidden states, the figures the debug panel and graph checks show.

One row per layer (embeddings first): mean, std, min, max of a token's hidden vector, the
same four numbers ``DecoderSession(layer_stats=True)`` reports, so the two line up.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

STAT_NAMES = ("mean", "std", "min", "max")


def hidden_stats(x: np.ndarray) -> np.ndarray:
    """(mean, std, min, max) of one hidden vector x [H] -> [4] float32, summed in float64."""
    x = np.asarray(x, dtype=np.float64)
    return np.array([x.mean(), x.std(), x.min(), x.max()], dtype=np.float32)


def layer_stats(hidden_states: Sequence[np.ndarray], position: int = -1) -> np.ndarray:
    """Stats of token ``position`` in every hidden state [S, H] -> [n_layers + 1, 4]."""
    return np.stack([hidden_stats(h[position]) for h in hidden_states])
