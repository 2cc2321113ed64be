"""A tokenized prompt as the decoder takes it (the runtime, vision and inspection share it)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class PromptTokens:
    """A tokenized prompt, ready for the decoder.

    `keys` identify what sits in each cache slot (token id, or (id, image digest, row) for
    image rows) so a later turn can reuse the longest common prefix. `positions` is [S]
    or [3, S] (M-RoPE); `next_position` is where the first generated token goes (for
    M-RoPE it is max position + 1, not S).
    """

    ids: np.ndarray                         # int64 [S]
    positions: np.ndarray                   # int64 [S] or [3, S]
    keys: tuple[Hashable, ...]
    next_position: int
    image_rows: np.ndarray | None = None    # int64 [R]: rows whose embedding is replaced
    image_embeds: np.ndarray | None = None  # float32 [R, H]
    image_deepstack: np.ndarray | None = None  # float32 [K, R, H]: Qwen3-VL's DeepStack
    # Gemma 3: the rows of one image also attend to the later rows of that image
    bidirectional_images: bool = False

    @classmethod
    def text(cls, ids: Sequence[int]) -> PromptTokens:
        array = np.asarray(ids, dtype=np.int64)
        return cls(array, np.arange(len(array), dtype=np.int64), tuple(int(i) for i in array),
                   len(array))

    def extended(self, ids: Sequence[int]) -> PromptTokens:
        """This prompt with text tokens after it (an answer so far that the model goes on
        from): each at the next position, on every M-RoPE axis alike."""
        added = np.asarray(ids, dtype=np.int64)
        steps = self.next_position + np.arange(len(added), dtype=np.int64)
        positions = (np.concatenate([self.positions, steps]) if self.positions.ndim == 1 else
                     np.concatenate([self.positions, np.tile(steps, (3, 1))], axis=1))
        return replace(self, ids=np.concatenate([self.ids, added]), positions=positions,
                       keys=self.keys + tuple(int(i) for i in added),
                       next_position=self.next_position + len(added))

    def image_groups(self) -> np.ndarray | None:
        """int64 [S]: for each row the image it belongs to (-1: none) where rows of one
        image attend to each other both ways; None where attention is causal throughout.
        Each run of consecutive image rows is one image."""
        if not self.bidirectional_images or self.image_rows is None or not len(self.image_rows):
            return None
        rows = np.asarray(self.image_rows)
        groups = np.full(len(self.ids), -1, dtype=np.int64)
        groups[rows] = np.cumsum(np.diff(rows, prepend=-2) != 1) - 1
        return groups

    def __len__(self) -> int:
        return len(self.ids)

    def deepstack(self, start: int = 0, stop: int | None = None) -> np.ndarray | None:
        """DeepStack features of rows start..stop as the decoder takes them, float32
        [K, stop - start, H] with zero text rows; None when the prompt carries none."""
        if self.image_deepstack is None or self.image_rows is None:
            return None
        stop = len(self) if stop is None else stop
        k, _, hidden = self.image_deepstack.shape
        out = np.zeros((k, stop - start, hidden), np.float32)
        rows = self.image_rows - start
        inside = (rows >= 0) & (rows < stop - start)
        out[:, rows[inside]] = self.image_deepstack[:, inside]
        return out
