"""The vision grids and tensors of Qwen2.5-VL and Qwen3-VL, shared by the ONNX vision graph,
the runtime that feeds it and the numpy reference: the GGUF ``v.*`` tensor names, the Conv3d
kernel as a matrix, patch positions, the window layout and Qwen3-VL's interpolated position
table. The indices are checked against HF transformers (tests/unit/vision/test_vision_tower.py,
tests/unit/vision/test_qwen3vl_tower.py), since the reference cannot check what it shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from engine.errors import ImageError

if TYPE_CHECKING:
    from engine.gguf import GGUFModel
    from engine.gguf.config import VisionConfig

PATCH_EMBD = ("v.patch_embd_0.weight", "v.patch_embd_1.weight")  # Conv3d kernel, t = 0, 1
# VisionBlockWeights field -> tensor name under "v.blk.{i}."
BLOCK_TENSORS: dict[str, str] = {
    "ln1": "ln1.weight",
    "attn_q": "attn_q.weight",
    "attn_q_bias": "attn_q.bias",
    "attn_k": "attn_k.weight",
    "attn_k_bias": "attn_k.bias",
    "attn_v": "attn_v.weight",
    "attn_v_bias": "attn_v.bias",
    "attn_out": "attn_out.weight",
    "attn_out_bias": "attn_out.bias",
    "ln2": "ln2.weight",
    "ffn_gate": "ffn_gate.weight",
    "ffn_gate_bias": "ffn_gate.bias",
    "ffn_up": "ffn_up.weight",
    "ffn_up_bias": "ffn_up.bias",
    "ffn_down": "ffn_down.weight",
    "ffn_down_bias": "ffn_down.bias",
}
MERGER_TENSORS: dict[str, str] = {
    "ln_q": "v.merger.ln_q.weight",
    "mlp0": "v.merger.mlp.0.weight",
    "mlp0_bias": "v.merger.mlp.0.bias",
    "mlp2": "v.merger.mlp.2.weight",
    "mlp2_bias": "v.merger.mlp.2.bias",
}


def block_tensor_name(i: int, field: str) -> str:
    return f"v.blk.{i}.{BLOCK_TENSORS[field]}"


def patch_embedding(model: GGUFModel, dtype: DTypeLike = np.float32) -> np.ndarray:
    """The Conv3d kernel as a matrix [D, C*T*P*P]: the two temporal halves side by side,
    in the pixel rows' column order c*T*P*P + t*P*P + py*P + px."""
    halves = [model.tensors[name].dequantize().astype(dtype, copy=False)
              for name in PATCH_EMBD]  # each [D, C, P, P]
    kernel = np.stack(halves, axis=2)  # [D, C, T, P, P]
    return kernel.reshape(len(kernel), -1)


@dataclass(frozen=True)
class WindowLayout:
    """Where each patch goes for windowed attention.

    Windows are squares of ``window_cells`` x ``window_cells`` merged cells (the last row and
    column of windows may be smaller), taken in raster order; inside a window, cells are in
    raster order and each cell keeps its merge_size^2 patches together.
    """

    cell_order: np.ndarray   # int64 [S/m^2]: merged cell at each window-order slot
    lengths: np.ndarray      # int64 [n_windows]: patches per window, in window order
    cell_size: int           # merge_size^2 patches per merged cell

    @property
    def patch_order(self) -> np.ndarray:
        """int64 [S]: source row (merge-block order) of each window-order row."""
        m2 = self.cell_size
        return (self.cell_order[:, None] * m2 + np.arange(m2)).reshape(-1)

    @property
    def restore(self) -> np.ndarray:
        """int64 [S/m^2]: window-order slot of each merged cell, raster order (the inverse)."""
        return np.argsort(self.cell_order, kind="stable")

    @property
    def bounds(self) -> np.ndarray:
        """int64 [n_windows + 1]: cumulative window boundaries in patches (cu_window_seqlens)."""
        return np.concatenate([[0], np.cumsum(self.lengths)])


def window_layout(grid_h: int, grid_w: int, vision: VisionConfig) -> WindowLayout:
    """The window layout of one image of grid_h x grid_w patches."""
    m = vision.spatial_merge_size
    k = vision.window_size // m // vision.patch_size  # window side in merged cells (4)
    cells = np.arange((grid_h // m) * (grid_w // m)).reshape(grid_h // m, grid_w // m)
    windows = [cells[r:r + k, c:c + k].reshape(-1)
               for r in range(0, cells.shape[0], k) for c in range(0, cells.shape[1], k)]
    return WindowLayout(
        cell_order=np.concatenate(windows).astype(np.int64),
        lengths=np.array([len(w) * m * m for w in windows], dtype=np.int64),
        cell_size=m * m,
    )


def patch_positions(grid_h: int, grid_w: int, merge: int) -> np.ndarray:
    """(row, col) of every patch in merge-block order -> int64 [S, 2]."""
    rows, cols = np.meshgrid(np.arange(grid_h), np.arange(grid_w), indexing="ij")
    blocks = (grid_h // merge, merge, grid_w // merge, merge)
    rows = rows.reshape(blocks).transpose(0, 2, 1, 3).reshape(-1)  # [bh, bw, mh, mw]
    cols = cols.reshape(blocks).transpose(0, 2, 1, 3).reshape(-1)
    return np.stack([rows, cols], axis=-1).astype(np.int64)


def check_grid(grid: tuple[int, int, int], vision: VisionConfig) -> tuple[int, int]:
    """(grid_h, grid_w) of a still image whose sides split into merged cells."""
    t, gh, gw = grid
    m = vision.spatial_merge_size
    if t != 1 or gh % m or gw % m or gh <= 0 or gw <= 0:
        raise ImageError(
            f"image grid {grid} cannot be encoded: expected (1, h, w) with h and w multiples "
            f"of {m}; preprocess the image with engine.vision.preprocess"
        )
    return gh, gw


def merge_block_order(values: np.ndarray, merge: int) -> np.ndarray:
    """[..., gh, gw] in raster order -> [..., gh*gw] in merge-block order (each merged
    cell's merge x merge patches together, cells in raster order)."""
    *lead, gh, gw = values.shape
    blocks = values.reshape(*lead, gh // merge, merge, gw // merge, merge)
    return np.swapaxes(blocks, -3, -2).reshape(*lead, gh * gw)


def position_interpolation(grid_h: int, grid_w: int, side: int,
                           merge: int) -> tuple[np.ndarray, np.ndarray]:
    """Qwen3-VL's learned position table (side x side cells) read bilinearly at a
    grid_h x grid_w image, corners aligned (HF's fast_pos_embed_interpolate): the four
    neighbouring table rows of each patch, int64 [4, S], and their weights, float32 [4, S],
    both in merge-block order; the patch's embedding is sum_k table[rows[k]] * weights[k]."""
    ys = np.linspace(0, side - 1, grid_h, dtype=np.float32)
    xs = np.linspace(0, side - 1, grid_w, dtype=np.float32)
    y0, x0 = ys.astype(np.int64), xs.astype(np.int64)  # floor: both are >= 0
    y1, x1 = np.minimum(y0 + 1, side - 1), np.minimum(x0 + 1, side - 1)
    dy, dx = (ys - y0)[:, None], (xs - x0)[None, :]  # [gh, 1], [1, gw]
    rows = np.stack([y0[:, None] * side + x0, y0[:, None] * side + x1,
                     y1[:, None] * side + x0, y1[:, None] * side + x1])  # [4, gh, gw]
    weights = np.stack([(1 - dy) * (1 - dx), (1 - dy) * dx, dy * (1 - dx), dy * dx])
    return merge_block_order(rows, merge), merge_block_order(weights, merge).astype(np.float32)
