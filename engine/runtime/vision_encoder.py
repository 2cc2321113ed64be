"""Image -> embeddings for the text decoder (Qwen2.5-VL's tower, or Gemma 3's SigLIP tower
and projector): one ONNX Runtime session per model, reused across images, and a small LRU
cache so a picture re-sent in a later turn is not encoded again (keyed by
ImageInput.digest, which hashes the resized pixels)."""

from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np
import onnxruntime as ort

from engine.errors import UnsupportedModel
from engine.gguf import GGUFModel
from engine.graph import vision_tower as graph
from engine.graph.builder import create_session
from engine.graph.siglip_tower import build_siglip
from engine.modelmath.rope import vision_rope_angles
from engine.modelmath.vision_grid import check_grid, patch_positions, window_layout
from engine.vision.preprocess import ImageInput


def grid_feeds(grid: tuple[int, int, int], model: GGUFModel) -> dict[str, np.ndarray]:
    """Window order, rotary cos/sin and padded window layout for one (1, gh, gw) grid,
    computed by the reference's arithmetic."""
    vision = model.config.vision
    gh, gw = check_grid(grid, vision)
    layout = window_layout(gh, gw, vision)
    order = layout.patch_order  # [S]
    s = len(order)
    angles = vision_rope_angles(patch_positions(gh, gw, vision.spatial_merge_size)[order],
                                vision.hidden_size // vision.n_heads, vision.rope_theta)
    longest = int(layout.lengths.max())
    n_windows = len(layout.lengths)
    starts = layout.bounds[:-1]
    mask = (np.arange(longest) < layout.lengths[:, None]).astype(np.int32)  # [W, L]
    slot_of_row = (np.repeat(np.arange(n_windows) * longest, layout.lengths)
                   + np.arange(s) - np.repeat(starts, layout.lengths))  # [S]
    slots = np.zeros(n_windows * longest, dtype=np.int64)  # padding reads row 0, masked
    slots[slot_of_row] = np.arange(s)
    return {
        graph.PATCH_ORDER: order,
        graph.COS: np.cos(angles).astype(np.float32),
        graph.SIN: np.sin(angles).astype(np.float32),
        graph.POSITION_IDS: np.arange(s, dtype=np.int64)[None],
        graph.WINDOW_SLOTS: slots,
        graph.WINDOW_MASK: mask,
        graph.WINDOW_ROWS: slot_of_row.astype(np.int64),
        graph.RESTORE: layout.restore.astype(np.int64),
    }


class VisionEncoder:
    """Encodes images with the vision tower of ``model`` (fp32 activations, exact weights)."""

    def __init__(self, model: GGUFModel, *, threads: int | None = None, cache_size: int = 16):
        if model.config.vision is None:
            raise UnsupportedModel(f"{model.path} has no vision tower; it cannot read images")
        started = time.perf_counter()
        self.model = model
        siglip = model.config.vision.siglip
        built = build_siglip(model) if siglip else graph.build_vision(model)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
        # One long run per image: idle threads need not spin (and steal the decoder's cores).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = create_session(built.model, built.external, options)
        self.load_seconds = time.perf_counter() - started
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def encode(self, image: ImageInput) -> np.ndarray:
        """float32 [image.n_tokens, text hidden], raster order of merged cells."""
        cached = self._cache.get(image.digest)
        if cached is not None:
            self._cache.move_to_end(image.digest)
            return cached
        feeds = {} if self.model.config.vision.siglip else grid_feeds(image.grid, self.model)
        feeds[graph.PIXEL_VALUES] = np.ascontiguousarray(image.pixel_values, np.float32)
        [embeds] = self._session.run([graph.EMBEDS], feeds)
        embeds.setflags(write=False)  # shared by every prompt that shows this image
        self._cache[image.digest] = embeds
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return embeds
