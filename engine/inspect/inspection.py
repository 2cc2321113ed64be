"""One inspection of one position in a context: the lens and the attention, as plain data.

The context (prompt, and the reply so far, teacher-forced) runs once through the numpy
fp32 reference; the chosen position's hidden states give the lens and its attention rows
the maps. It is exact in every engine mode (the reference is what exact mode is checked
against); `lantern inspect --json` prints `to_json()`, the app draws the same record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import GenerationError, LanternError
from engine.gguf import GGUFModel
from engine.inspect.attention import ImageGrid, head_mean, image_grids
from engine.inspect.contributions import Contributions, contributions
from engine.inspect.lens import LensRow, lens_logits, logit_lens
from engine.reference import ReferenceOutput, ReferenceWeights, forward
from engine.reference.text import AttentionProbe

SOURCE = "numpy fp32 reference"

Progress = Callable[[str, float], None]  # (stage, fraction done 0..1)


class InspectionCancelled(LanternError):
    """The user cancelled an inspection."""


@dataclass(frozen=True)
class ExpertChoice:
    """One layer's router choice for the inspected token (mixture-of-experts models)."""

    ids: np.ndarray       # int [K]: the experts it took, best first
    weights: np.ndarray   # float32 [K]: what each one's output was multiplied by

    def to_json(self) -> dict:
        return {"ids": self.ids.tolist(), "weights": self.weights.astype(float).tolist()}


@dataclass(frozen=True)
class Inspection:
    position: int                        # the query row inspected (0-based)
    ids: tuple[int, ...]                 # the context, ids [position + 1]
    tokens: tuple[str, ...]              # their display text
    lens: tuple[LensRow, ...]            # n_layers + 1 rows
    attention: np.ndarray                # float32 [n_layers, n_heads, position + 1]
    images: tuple[ImageGrid, ...]        # images inside the context, in order
    logprobs: np.ndarray                 # float64 [position]: row r's log-prob of ids[r + 1]
    contributions: Contributions | None = None  # the next token's logit, split by head
    source: str = SOURCE
    steering: np.ndarray | None = None   # [n_layers, H]: the control vectors it ran with
    experts: tuple[ExpertChoice, ...] = ()  # per layer, with a mixture of experts

    @property
    def attention_mean(self) -> np.ndarray:
        """[n_layers, position + 1]: averaged over heads."""
        return head_mean(self.attention)

    def to_json(self) -> dict:
        return {
            "position": self.position,
            "source": self.source,
            "tokens": [{"id": i, "token": t} for i, t in zip(self.ids, self.tokens, strict=True)],
            "lens": [row.to_json() for row in self.lens],
            "attention": self.attention.astype(float).tolist(),
            "images": [grid.to_json() for grid in self.images],
            "experts": [choice.to_json() for choice in self.experts],
        }


def continued(prompt: PromptTokens, reply: Sequence[int]) -> PromptTokens:
    """The prompt followed by generated tokens, at the positions generation gave them."""
    if not len(reply):
        return prompt
    ids = np.asarray(reply, dtype=np.int64)
    steps = prompt.next_position + np.arange(len(ids), dtype=np.int64)  # [N]
    if np.ndim(prompt.positions) == 2:
        steps = np.broadcast_to(steps, (prompt.positions.shape[0], len(ids)))  # [3, N]
    return PromptTokens(
        ids=np.concatenate([prompt.ids, ids]),
        positions=np.concatenate([prompt.positions, steps], axis=-1),
        keys=prompt.keys + tuple(int(i) for i in ids),
        next_position=prompt.next_position + len(ids),
        image_rows=prompt.image_rows,
        image_embeds=prompt.image_embeds,
        image_deepstack=prompt.image_deepstack,
        bidirectional_images=prompt.bidirectional_images,
    )


def inspect_context(
    model: GGUFModel,
    context: PromptTokens,
    piece: Callable[[int], str],
    position: int | None = None,
    *,
    top: int = 5,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    steering: np.ndarray | None = None,
) -> Inspection:
    """Lens, attention and direct contributions of ``position`` (default: the last) over
    ``context``, computed by the fp32 reference over the context up to that position; the
    contributions explain the token that follows in ``context``, else the top-1.
    ``steering`` [n_layers, H]: the control vectors the answer ran with (each row counts
    in its block's MLP part)."""
    n = len(context)
    position = check_position(context, position)
    report = progress or (lambda stage, fraction: None)
    n_layers = model.config.text.n_layers

    def on_layer(i: int) -> None:
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the inspection was cancelled")
        report(f"Reference forward: block {i + 1} of {n_layers}", (i + 1) / (n_layers + 1))

    ids = context.ids[: position + 1]
    positions = context.positions[..., : position + 1]
    weights = ReferenceWeights(model)
    embeds = image_embeds(context, position, weights)
    report("Reference forward", 0.0)
    probe = AttentionProbe(np.array([position]), parts=True)
    groups = context.image_groups()
    out = forward(model, None if embeds is not None else ids, positions, embeds,
                  weights=weights, probe=probe, on_layer=on_layer,
                  image_groups=None if groups is None else groups[: position + 1],
                  deepstack=context.deepstack(0, position + 1), steering=steering)
    report("Logit lens", n_layers / (n_layers + 1))
    states = np.stack([h[position] for h in out.hidden_states])  # [L + 1, H]
    lens = logit_lens(lens_logits(states, weights), piece, top)
    attention = np.stack([p[:, 0, :] for p in out.attentions]).astype(np.float32)  # [L, heads, T]
    report("Done", 1.0)
    return Inspection(
        position=position,
        ids=tuple(int(i) for i in ids),
        tokens=tuple(piece(int(i)) for i in ids),
        lens=lens,
        attention=attention,
        images=tuple(g for g in image_grids(context) if g.stop <= position + 1),
        logprobs=next_logprobs(out.logits, ids),
        contributions=contributions(probe, out.hidden_states, out.logits, weights, piece,
                                    context.ids[position + 1] if position + 1 < n else None),
        steering=steering,
        experts=tuple(ExpertChoice(took[0], share[0].astype(np.float32)) for took, share
                      in zip(probe.expert_ids, probe.expert_weights, strict=True)),
    )


def image_embeds(context: PromptTokens, position: int,
                 weights: ReferenceWeights) -> np.ndarray | None:
    """Input embeddings [position + 1, H] with the image rows filled in, or None when no
    image lies within the context up to ``position`` (then the ids are the input)."""
    if context.image_rows is None or not len(context.image_rows):
        return None
    inside = context.image_rows <= position
    if not inside.any():
        return None
    embeds = weights.embed(context.ids[: position + 1])
    embeds[context.image_rows[inside]] = context.image_embeds[inside]
    return embeds


def forward_context(model: GGUFModel, context: PromptTokens, *,
                    weights: ReferenceWeights | None = None,
                    on_layer: Callable[[int], None] | None = None,
                    steering: np.ndarray | None = None) -> ReferenceOutput:
    """The fp32 reference over a whole prepared context: image rows filled in, its
    positions (M-RoPE), two-way image groups and DeepStack features as the answer ran
    (steered by ``steering`` [n_layers, H] when given)."""
    weights = weights or ReferenceWeights(model)
    embeds = image_embeds(context, len(context) - 1, weights)
    return forward(model, context.ids if embeds is None else None, context.positions, embeds,
                   weights=weights, on_layer=on_layer, image_groups=context.image_groups(),
                   deepstack=context.deepstack(), steering=steering)


def check_position(context: PromptTokens, position: int | None) -> int:
    """The position to inspect (default: the last), or an error saying the valid range."""
    n = len(context)
    position = n - 1 if position is None else position
    if not 0 <= position < n:
        raise GenerationError(f"position {position} is outside the context of {n} tokens "
                              f"(0..{n - 1})")
    return position


def next_logprobs(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """logits [S, V], ids [S] -> log-softmax of row r at ids[r + 1], [S - 1]."""
    rows = logits[:-1].astype(np.float64)  # [S - 1, V]
    peak = rows.max(axis=1, keepdims=True)
    log_norm = peak[:, 0] + np.log(np.exp(rows - peak).sum(axis=1))
    return rows[np.arange(len(rows)), ids[1:]] - log_norm
