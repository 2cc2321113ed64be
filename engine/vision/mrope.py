"""3-D M-RoPE positions (t, h, w) for a whole Qwen2-VL prompt, text and images.

Text tokens take t = h = w = a running index. An image whose merged grid is (Hm, Wm),
starting at running index p, takes t = p, h = p + row, w = p + col for its Hm*Wm pad
tokens in raster order, and the text after it continues at p + max(Hm, Wm). So positions
grow slower than the token count; decoding continues at ``next_position`` = max + 1.
Text-only prompts reduce to 1-D positions 0..S-1 on all three streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import ImageError


@dataclass(frozen=True)
class MRopePositions:
    positions: np.ndarray   # int64 [3, S]: t, h, w per token
    next_position: int      # where the first generated token goes (max + 1)


def merged_grid(grid: tuple[int, int, int], merge_size: int) -> tuple[int, int, int]:
    """(t, gh, gw) in patches -> (t, Hm, Wm) in merged cells, i.e. prompt tokens."""
    t, gh, gw = grid
    return t, gh // merge_size, gw // merge_size


def mrope_positions(ids: Sequence[int] | np.ndarray, image_pad: int | tuple[int, ...],
                    grids: Sequence[tuple[int, int, int]], merge_size: int) -> MRopePositions:
    """Positions of a prompt whose images are already expanded to their pad tokens.

    ``grids`` are the images' patch grids (ImageInput.grid), in prompt order; each image
    takes the next t*Hm*Wm pad tokens. ``image_pad`` may name several pad ids (Qwen3-VL:
    image and video pads; a video's temporal patches count as images of t = 1, each after
    its timestamp text, as HF's get_rope_index splits video_grid_thw).
    """
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    positions = np.empty((3, len(ids)), dtype=np.int64)
    is_pad = np.isin(ids, image_pad)
    pads = np.flatnonzero(is_pad)
    expected = sum(int(np.prod(merged_grid(g, merge_size))) for g in grids)
    if len(pads) != expected:
        raise ImageError(
            f"the prompt has {len(pads)} image pad tokens but its {len(grids)} image(s) need "
            f"{expected}; expand each image placeholder with engine.vision.prompt"
        )
    index, pos = 0, 0  # next token, next running position
    for grid in grids:
        t, hm, wm = merged_grid(grid, merge_size)
        start = int(pads[np.searchsorted(pads, index)])
        n_text = start - index
        positions[:, index:start] = pos + np.arange(n_text)
        pos += n_text
        n = t * hm * wm
        if not is_pad[start:start + n].all():
            raise ImageError(
                f"image of {hm}x{wm} tokens expects {n} consecutive pad tokens at {start}; "
                "the prompt's placeholders do not match its images"
            )
        tt, hh, ww = np.meshgrid(np.arange(t), np.arange(hm), np.arange(wm), indexing="ij")
        positions[:, start:start + n] = pos + np.stack([tt, hh, ww]).reshape(3, n)
        pos += max(hm, wm)
        index = start + n
    positions[:, index:] = pos + np.arange(len(ids) - index)
    next_position = int(positions.max()) + 1 if len(ids) else 0
    return MRopePositions(positions=positions, next_position=next_position)

