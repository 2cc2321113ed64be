"""Causal tracing: which hidden states carry the answer from a clean prompt.

A clean and a corrupted prompt of the same length (one word changed) run through the fp32
reference. The measure is the last position's logit difference between the clean answer
(the clean run's top-1) and its rival (the corrupted run's top-1, or the clean runner-up
when both runs agree). Then, for each hidden state (the embeddings and every block's
output) and each position, the corrupted run is repeated with that one state restored to
its clean value: the share of the clean difference that comes back is the classic layer x
position plot.

Prompts with images trace the same way: both prompts hold their images at the same tokens
(image embeddings, M-RoPE positions, Gemma 3's two-way image attention, Qwen3-VL's DeepStack
features, steering all as the answer ran). The corruption may be in the text, in the
pictures or both: ``noised`` replaces a picture by noise of its own layout (ROME corrupts a
subject's input with noise), so the same question over a noised picture shows which patches
carry the answer. An image's merged patches are restored in square patch groups
(occlusion's hidden_units), one column of the result each, which bounds the runs for a large
image.

Restoring state (l, i) changes nothing before layer l or before position i, so each run
starts there, from the corrupted run's states and its keys and values of positions < i
(at an image's first row where its rows see each other both ways). A state that is the
same in both runs (every token before the changed word, an image before it) restores
nothing: no run is needed.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import LanternError
from engine.gguf import GGUFModel
from engine.inspect.attention import ImageGrid, image_grids
from engine.inspect.inspection import InspectionCancelled, Progress, image_embeds
from engine.inspect.occlusion import first_row, hidden_units
from engine.reference import KVCache, ReferenceOutput, ReferenceWeights, forward
from engine.reference.text import blocks, rms_norm, rope_tables
from engine.vision.preprocess import ImageInput
from engine.vision.video import VideoInput

IMAGE_COLUMNS = 16  # patch groups per image that the app and CLI choose: a readable map


class TraceError(LanternError):
    """Prompts that cannot be traced against each other."""


@dataclass(frozen=True)
class PatchBlock:
    """Where a column of image patches lies: image ``image`` (from 0), merged patch rows
    and columns."""

    image: int
    rows: range
    columns: range

    @property
    def label(self) -> str:
        """Short, for a column or a line: "img 1 r0-1 c2-3"."""
        return f"img {self.image + 1} r{span(self.rows)} c{span(self.columns)}"

    @property
    def name(self) -> str:
        return (f"image {self.image + 1}, patch rows {span(self.rows)}, columns "
                f"{span(self.columns)}")


def span(values: range) -> str:
    return f"{values.start}" if len(values) == 1 else f"{values.start}-{values.stop - 1}"


@dataclass(frozen=True)
class Trace:
    clean: tuple[int, ...]          # ids [S]
    corrupt: tuple[int, ...]        # ids [S]
    answer: int                     # the clean run's top-1 at the last position
    rival: int                      # what the difference is measured against
    clean_diff: float               # logit[answer] - logit[rival], clean run
    corrupt_diff: float             # the same, corrupted run
    diff: np.ndarray                # float64 [n_layers + 1, U]: with state (l, unit) restored
    units: tuple[tuple[int, ...], ...]  # U: the positions restored together, in order
    #                                     (one each, but an image's patch groups)
    images: tuple[ImageGrid, ...] = ()
    patch_group: int = 1            # image patches restored together: patch_group^2

    @property
    def restored(self) -> np.ndarray:
        """The share of the clean difference that comes back [n_layers + 1, U]."""
        span = self.clean_diff - self.corrupt_diff
        return (self.diff - self.corrupt_diff) / span if span else np.zeros_like(self.diff)

    def changed(self, unit: int) -> bool:
        """Does a position of column ``unit`` hold another token in the corrupted prompt?"""
        return any(self.clean[i] != self.corrupt[i] for i in self.units[unit])

    def patch_block(self, unit: int) -> PatchBlock | None:
        """The image patches of column ``unit``; None for a text token."""
        first = self.units[unit][0]
        for n, grid in enumerate(self.images):
            if grid.start <= first < grid.stop:
                at = np.array(self.units[unit]) - grid.start
                rows, columns = at // grid.width, at % grid.width
                return PatchBlock(n, range(int(rows.min()), int(rows.max()) + 1),
                                  range(int(columns.min()), int(columns.max()) + 1))
        return None

    def to_json(self) -> dict:
        return {"clean": list(self.clean), "corrupt": list(self.corrupt),
                "answer": self.answer, "rival": self.rival, "clean_diff": self.clean_diff,
                "corrupt_diff": self.corrupt_diff, "units": [list(u) for u in self.units],
                "images": [g.to_json() for g in self.images], "patch_group": self.patch_group,
                "diff": self.diff.tolist(), "restored": self.restored.tolist()}


def as_context(prompt: PromptTokens | ArrayLike) -> PromptTokens:
    """A prepared prompt as it is, token ids as a text prompt."""
    return prompt if isinstance(prompt, PromptTokens) else PromptTokens.text(
        np.asarray(prompt, np.int64))


def paired(clean: PromptTokens, corrupt: PromptTokens) -> PromptTokens:
    """The corrupted prompt, or an error saying why the two cannot be traced against each
    other."""
    if len(clean) != len(corrupt):
        raise TraceError(f"the clean prompt has {len(clean)} tokens and the corrupted one "
                         f"{len(corrupt)}: change a word for one of the same token count")
    rows = [np.asarray(p.image_rows if p.image_rows is not None else (), np.int64)
            for p in (clean, corrupt)]
    if not np.array_equal(*rows) or not np.array_equal(clean.positions, corrupt.positions):
        raise TraceError("the clean and corrupted prompts hold their images at different "
                         "tokens: change a word of the text, or a picture for one of the "
                         "same size")
    same_pictures = not len(rows[0]) or np.array_equal(clean.image_embeds, corrupt.image_embeds)
    if np.array_equal(clean.ids, corrupt.ids) and same_pictures:
        raise TraceError("the clean and corrupted prompts are the same: change a word (or "
                         "a picture)")
    return corrupt


def noised(picture: ImageInput | VideoInput, seed: int = 0) -> ImageInput | VideoInput:
    """``picture`` with its pixels replaced by standard normal noise (in the tower's
    normalised units) of the same layout, under a digest of its own so no cached embedding
    of the real picture stands in for it."""
    if isinstance(picture, VideoInput):
        return replace(picture, patches=tuple(noised(p, seed + n)
                                              for n, p in enumerate(picture.patches)))
    pixels = np.random.default_rng(seed).standard_normal(picture.pixel_values.shape)
    pixels = pixels.astype(picture.pixel_values.dtype)
    digest = hashlib.sha256(b"noise:" + picture.digest.encode() + pixels.tobytes())
    return replace(picture, pixel_values=pixels, digest=digest.hexdigest())


def trace(
    model: GGUFModel, clean: PromptTokens | ArrayLike, corrupt: PromptTokens | ArrayLike, *,
    patch_group: int = 1, steering: np.ndarray | None = None,
    progress: Progress | None = None, cancel: threading.Event | None = None,
) -> Trace:
    """Trace ``corrupt`` against ``clean`` (prompts, or token ids of text); see the module.
    ``patch_group``: an image's merged patches restored patch_group x patch_group at a time;
    ``steering``: the control vectors the answer ran with (as for ``inspect_context``)."""
    clean = as_context(clean)
    corrupt = paired(clean, as_context(corrupt))
    if patch_group < 1:
        raise TraceError(f"a patch group is at least 1 patch wide, not {patch_group}")
    runs = Runs(model, clean, corrupt, steering, progress, cancel)
    runs.report("Clean and corrupted runs", 0.0)
    clean_out, (corrupt_out, cache) = runs.full(clean), runs.cached(corrupt)
    answer = int(clean_out.logits[-1].argmax())
    rival = int(corrupt_out.logits[-1].argmax())
    if rival == answer:
        others = clean_out.logits[-1].astype(np.float64).copy()
        others[answer] = -np.inf
        rival = int(others.argmax())
    runs.measure(answer, rival)
    units = hidden_units(clean, len(clean), patch_group)
    corrupt_diff = runs.diff(corrupt_out.hidden_states[-1][-1])
    n_layers = runs.weights.config.n_layers
    grid = np.empty((n_layers + 1, len(units)))
    for layer in range(n_layers + 1):
        for n, unit in enumerate(units):
            runs.check_cancel()
            states = clean_out.hidden_states[layer], corrupt_out.hidden_states[layer]
            same = np.array_equal(states[0][unit], states[1][unit])
            grid[layer, n] = corrupt_diff if same else runs.restore(layer, unit, states, cache)
        runs.report(f"Restoring states after "
                    f"{'the embeddings' if layer == 0 else f'block {layer}'}",
                    (layer + 1) / (n_layers + 1))
    return Trace(tuple(int(t) for t in clean.ids), tuple(int(t) for t in corrupt.ids),
                 answer, rival, runs.diff(clean_out.hidden_states[-1][-1]), corrupt_diff,
                 grid, tuple(tuple(int(i) for i in u) for u in units), image_grids(clean),
                 patch_group)


class Runs:
    """The reference runs of one trace, over the positions and image layout both prompts share."""

    def __init__(self, model: GGUFModel, clean: PromptTokens, corrupt: PromptTokens,
                 steering: np.ndarray | None, progress: Progress | None,
                 cancel: threading.Event | None) -> None:
        self.model, self.steering, self.cancel = model, steering, cancel
        self.report = progress or (lambda stage, fraction: None)
        self.weights = ReferenceWeights(model, keep=True)
        self.positions = np.asarray(clean.positions)
        self.length = int(self.positions.max()) + 1  # every run turns as the whole (LongRoPE)
        self.groups = clean.image_groups()            # Gemma 3: an image's rows see each other
        self.deepstack = corrupt.deepstack()  # Qwen3-VL's image features (the restoring
        #                                       runs are the corrupted one's), or None
        self.tables = rope_tables(self.positions, self.weights.config, self.length)
        self.direction = np.zeros(0)

    def check_cancel(self, _block: int = 0) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise InspectionCancelled("the trace was cancelled")

    def full(self, context: PromptTokens, cache: KVCache | None = None) -> ReferenceOutput:
        embeds = image_embeds(context, len(context) - 1, self.weights)
        if embeds is None:
            embeds = self.weights.embed(context.ids)
        return forward(self.model, None, self.positions, embeds, weights=self.weights,
                       cache=cache, on_layer=self.check_cancel, image_groups=self.groups,
                       rope_length=self.length, deepstack=context.deepstack(),
                       steering=self.steering)

    def cached(self, context: PromptTokens) -> tuple[ReferenceOutput, KVCache]:
        cache = KVCache()
        return self.full(context, cache), cache

    def measure(self, answer: int, rival: int) -> None:
        head = self.weights.lm_head()
        self.direction = head[answer].astype(np.float64) - head[rival].astype(np.float64)

    def diff(self, last: np.ndarray) -> float:
        """The measure from the last position's final hidden state [H]."""
        cfg = self.weights.config
        return float(rms_norm(last[None], self.weights.output_norm(), cfg.rms_eps)[0]
                     @ self.direction)

    def restore(self, layer: int, unit: np.ndarray, states: tuple[np.ndarray, np.ndarray],
                cache: KVCache) -> float:
        """The measure with hidden state ``layer`` of the positions ``unit`` restored:
        states (clean, corrupted) [S, H] at that layer, ``cache`` the corrupted run's."""
        start = first_row(unit, self.groups)
        x = states[1][start:].copy()
        x[unit - start] = states[0][unit]
        prefix = KVCache()
        prefix.keys = [k[:, :start] for k in cache.keys]
        prefix.values = [v[:, :start] for v in cache.values]
        out = blocks(x, self.weights, tuple(t[start:] for t in self.tables), first=layer,
                     cache=prefix, groups=None if self.groups is None else self.groups[start:],
                     deepstack=None if self.deepstack is None else self.deepstack[:, start:],
                     steering=self.steering)
        return self.diff(out[-1][-1] if out else x[-1])
