"""Where a position looked: attention probabilities, and image tokens back on their image.

The probabilities come from the numpy reference (engine.reference.text.AttentionProbe),
one row per layer and head over every earlier position. Image tokens are laid back on
the merged patch grid of Qwen2.5-VL: under M-RoPE an image's token at merged row r and
column c carries positions (t0, t0 + r, t0 + c), so the grid is read from the prompt's
own positions and is the same for both GGUF layouts. Gemma 3's images are squares of
pooled cells in raster order, their positions 1-D.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.chat.prompt_tokens import PromptTokens


@dataclass(frozen=True)
class ImageGrid:
    """One image's tokens in the prompt: rows start .. start + height * width, row-major."""

    start: int
    height: int     # merged patch rows (Hm)
    width: int      # merged patch columns (Wm)

    @property
    def stop(self) -> int:
        return self.start + self.height * self.width

    def lay_out(self, weights: np.ndarray) -> np.ndarray:
        """Per-token values [..., T] of a whole context -> this image's [..., Hm, Wm]."""
        return weights[..., self.start:self.stop].reshape(
            *weights.shape[:-1], self.height, self.width)

    def to_json(self) -> dict:
        return {"start": self.start, "height": self.height, "width": self.width}


def image_grids(prompt: PromptTokens) -> tuple[ImageGrid, ...]:
    """The images of a prompt, in order, from its image rows and M-RoPE positions."""
    if prompt.image_rows is None or not len(prompt.image_rows):
        return ()
    rows = np.asarray(prompt.image_rows)
    positions = np.asarray(prompt.positions)  # [3, S], or [S] (Gemma 3: square images)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    grids = []
    for run in np.split(rows, breaks):
        if positions.ndim == 1:
            side = math.isqrt(len(run))
            grids.append(ImageGrid(int(run[0]), side, len(run) // max(side, 1)))
            continue
        h = positions[1, run] - positions[1, run].min()  # merged row of each token
        w = positions[2, run] - positions[2, run].min()  # merged column
        grid = ImageGrid(int(run[0]), int(h.max()) + 1, int(w.max()) + 1)
        if grid.height * grid.width != len(run):
            raise ValueError(f"image rows {run[0]}..{run[-1]} do not form a grid "
                             f"({grid.height} x {grid.width} for {len(run)} tokens)")
        grids.append(grid)
    return tuple(grids)


def head_mean(probs: np.ndarray) -> np.ndarray:
    """[n_layers, n_heads, T] -> the average over heads [n_layers, T]."""
    return probs.mean(axis=1)
