"""What in the input caused a token: occlusion, one earlier token hidden at a time.

Token j is hidden from attention (no later query reads its key, at every layer) rather
than deleted, so every other token keeps its position and the rotary angles stay those of
the real prompt; the change of the explained token's log-probability at the inspected
position is token j's attribution. An image's merged patch is one token, so the same
values laid on its grid (ImageGrid.lay_out) are the heatmap over the picture.

Rows before j do not see the change, so each run reuses the clean keys and values of
tokens 0..j-1 and recomputes only rows j..position: about half the cost of full re-runs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import GGUFModel
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

    def to_json(self) -> list[dict]:
        return [{"position": j, "delta_logprob": float(d)} for j, d in enumerate(self.delta)]


def occlusion(
    model: GGUFModel, context: PromptTokens, position: int | None = None, *,
    progress: Progress | None = None, cancel: threading.Event | None = None,
) -> Attribution:
    """Hide each token before ``position`` (default: the last) in turn; see the module."""
    position = check_position(context, position)
    report = progress or (lambda stage, fraction: None)
    weights = ReferenceWeights(model, keep=True)
    embeds = image_embeds(context, position, weights)
    if embeds is None:
        embeds = weights.embed(context.ids[: position + 1])
    positions = np.asarray(context.positions)[..., : position + 1]

    def last_logprobs(j: int, cache: KVCache, hidden: int | None) -> np.ndarray:
        probe = AttentionProbe(np.zeros(0, dtype=np.int64), hidden_key=hidden)
        logits = forward(model, None, positions[..., j:], embeds[j:], weights=weights,
                         cache=cache, probe=probe).logits[-1].astype(np.float64)
        peak = logits.max()
        return logits - peak - np.log(np.exp(logits - peak).sum())

    report("Clean run", 0.0)
    clean = last_logprobs(0, KVCache(), None)
    token = int(context.ids[position + 1]) if position + 1 < len(context) else int(clean.argmax())
    prefix = KVCache()  # clean keys and values of tokens 0..j-1
    delta = np.zeros(position)
    for j in range(position):
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the attribution was cancelled")
        report(f"Hiding token {j + 1} of {position}", j / position)
        cache = KVCache()
        cache.keys, cache.values = list(prefix.keys), list(prefix.values)
        delta[j] = last_logprobs(j, cache, j)[token] - clean[token]
        forward(model, None, positions[..., j:j + 1], embeds[j:j + 1], weights=weights,
                cache=prefix)
    report("Done", 1.0)
    return Attribution(position, token, float(clean[token]), delta)
