"""What in the input caused a token: occlusion, one earlier token hidden at a time.

Token j is hidden from attention (no later query reads its key, at every layer) rather
than deleted, so every other token keeps its position and the rotary angles stay those of
the real prompt; the change of the explained token's log-probability at the inspected
position is token j's attribution. An image's merged patch is one token, so the same
values laid on its grid (ImageGrid.lay_out) are the heatmap over the picture; patches can
be hidden in square groups (fewer runs for a large image).

Rows before j do not see the change, so each run reuses the clean keys and values of
tokens 0..j-1 and recomputes only rows j..position: about half the cost of full re-runs.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import GenerationError
from engine.gguf import GGUFModel
from engine.inspect.attention import image_grids
from engine.inspect.inspection import (
    InspectionCancelled,
    Progress,
    check_position,
    image_embeds,
)
from engine.reference import ReferenceWeights, forward
from engine.reference.text import AttentionProbe, KVCache


@dataclass(frozen=True)
class Attribution:
    position: int
    token: int                  # the token explained: the one that came next, else the top-1
    logprob: float              # its clean log-probability at ``position``
    delta: np.ndarray           # float64 [position]: log-prob with token j hidden - clean
    #                             (the tokens of one image patch group share their value)
    sizes: np.ndarray | None = None  # int [position]: how many tokens were hidden with j
    patch_group: int = 1        # image patches hidden together: patch_group x patch_group

    @property
    def spread(self) -> np.ndarray:
        """delta shared out over each hidden group [position]: sums over a span (an image's
        patches) then count every group once."""
        return self.delta if self.sizes is None else self.delta / self.sizes

    def to_json(self) -> list[dict]:
        return [{"position": j, "delta_logprob": float(d)} for j, d in enumerate(self.delta)]


def hidden_units(context: PromptTokens, position: int, patch_group: int) -> list[np.ndarray]:
    """What is hidden together, in order of first position: every token before
    ``position`` alone, except an image's merged patches, in blocks of patch_group^2."""
    grids = [g for g in image_grids(context) if g.stop <= position] if patch_group > 1 else []
    units, j = [], 0
    for grid in grids:
        units += [np.array([i]) for i in range(j, grid.start)]
        index = np.arange(grid.start, grid.stop).reshape(grid.height, grid.width)
        units += [index[r:r + patch_group, c:c + patch_group].ravel()
                  for r in range(0, grid.height, patch_group)
                  for c in range(0, grid.width, patch_group)]
        j = grid.stop
    return units + [np.array([i]) for i in range(j, position)]


def first_row(unit: np.ndarray, groups: np.ndarray | None) -> int:
    """Where a run that changes ``unit`` must start: its first row, or the first row of its
    image where rows of one image see each other both ways (``groups``, Gemma 3)."""
    first = int(unit.min())
    if groups is not None and groups[first] >= 0:
        first = int(np.flatnonzero(groups == groups[first])[0])
    return first


def fitting_patch_group(context: PromptTokens, position: int, runs_per_image: int = 64) -> int:
    """The smallest patch group that hides the largest image before ``position`` in at
    most ``runs_per_image`` runs (1 without images): what the app uses."""
    sizes = [g.height * g.width for g in image_grids(context) if g.stop <= position]
    return max(1, math.ceil(math.sqrt(max(sizes, default=1) / runs_per_image)))


def occlusion(
    model: GGUFModel, context: PromptTokens, position: int | None = None, *,
    patch_group: int = 1, progress: Progress | None = None,
    cancel: threading.Event | None = None, steering: np.ndarray | None = None,
) -> Attribution:
    """Hide each token before ``position`` (default: the last) in turn, an image's patches
    in patch_group x patch_group blocks; see the module. ``steering``: the control vectors
    the answer ran with (as for ``inspect_context``)."""
    position = check_position(context, position)
    if patch_group < 1:
        raise GenerationError(f"a patch group is at least 1 patch wide, not {patch_group}")
    report = progress or (lambda stage, fraction: None)
    weights = ReferenceWeights(model, keep=True)
    embeds = image_embeds(context, position, weights)
    if embeds is None:
        embeds = weights.embed(context.ids[: position + 1])
    positions = np.asarray(context.positions)[..., : position + 1]
    groups = context.image_groups()  # Gemma 3: an image's rows see each other
    deepstack = context.deepstack(0, position + 1)  # Qwen3-VL's image features, or None

    def rows(start: int, stop: int) -> dict[str, np.ndarray | None]:
        """The image groups and DeepStack features of rows start..stop, for ``forward``."""
        return {"image_groups": None if groups is None else groups[start:stop],
                "deepstack": None if deepstack is None else deepstack[:, start:stop],
                "steering": steering}
    length = int(positions.max()) + 1  # every run turns as the whole context does (LongRoPE)

    def last_logprobs(j: int, cache: KVCache, hidden: np.ndarray | None) -> np.ndarray:
        probe = AttentionProbe(np.zeros(0, dtype=np.int64), hidden_keys=hidden)
        logits = forward(model, None, positions[..., j:], embeds[j:], weights=weights,
                         cache=cache, probe=probe, rope_length=length,
                         **rows(j, position + 1)).logits[-1].astype(np.float64)
        peak = logits.max()
        return logits - peak - np.log(np.exp(logits - peak).sum())

    report("Clean run", 0.0)
    clean = last_logprobs(0, KVCache(), None)
    token = int(context.ids[position + 1]) if position + 1 < len(context) else int(clean.argmax())
    units = hidden_units(context, position, patch_group)
    prefix = KVCache()  # clean keys and values of the tokens before the unit hidden now
    delta, sizes = np.zeros(position), np.ones(position, dtype=np.int64)
    for n, unit in enumerate(units):
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the attribution was cancelled")
        report(f"Hiding {n + 1} of {len(units)}", n / len(units))
        first = first_row(unit, groups)
        if first > prefix.length:
            forward(model, None, positions[..., prefix.length:first],
                    embeds[prefix.length:first], weights=weights, cache=prefix,
                    rope_length=length, **rows(prefix.length, first))
        cache = KVCache()
        cache.keys, cache.values = list(prefix.keys), list(prefix.values)
        delta[unit] = last_logprobs(first, cache, unit)[token] - clean[token]
        sizes[unit] = len(unit)
    report("Done", 1.0)
    return Attribution(position, token, float(clean[token]), delta, sizes, patch_group)
