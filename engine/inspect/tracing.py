"""Causal tracing: which hidden states carry the answer from a clean prompt.

A clean and a corrupted prompt of the same length (one word changed) run through the fp32
reference. The measure is the last position's logit difference between the clean answer
(the clean run's top-1) and its rival (the corrupted run's top-1, or the clean runner-up
when both runs agree). Then, for each hidden state (the embeddings and every block's
output) and each position, the corrupted run is repeated with that one state restored to
its clean value: the share of the clean difference that comes back is the classic layer x
position plot.

Restoring state (l, i) changes nothing before layer l or before position i, so each run
starts there, from the corrupted run's states and its keys and values of positions < i.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from engine.errors import LanternError
from engine.gguf import GGUFModel
from engine.inspect.inspection import InspectionCancelled, Progress
from engine.reference import KVCache, ReferenceWeights, forward
from engine.reference.text import decoder_layer, rms_norm, rope_tables


class TraceError(LanternError):
    """Prompts that cannot be traced against each other."""


@dataclass(frozen=True)
class Trace:
    clean: tuple[int, ...]          # ids [S]
    corrupt: tuple[int, ...]        # ids [S]
    answer: int                     # the clean run's top-1 at the last position
    rival: int                      # what the difference is measured against
    clean_diff: float               # logit[answer] - logit[rival], clean run
    corrupt_diff: float             # the same, corrupted run
    diff: np.ndarray                # float64 [n_layers + 1, S]: with state (l, i) restored

    @property
    def restored(self) -> np.ndarray:
        """The share of the clean difference that comes back [n_layers + 1, S]."""
        span = self.clean_diff - self.corrupt_diff
        return (self.diff - self.corrupt_diff) / span if span else np.zeros_like(self.diff)

    def to_json(self) -> dict:
        return {"clean": list(self.clean), "corrupt": list(self.corrupt),
                "answer": self.answer, "rival": self.rival, "clean_diff": self.clean_diff,
                "corrupt_diff": self.corrupt_diff, "diff": self.diff.tolist(),
                "restored": self.restored.tolist()}


def trace(
    model: GGUFModel, clean: np.ndarray, corrupt: np.ndarray, *,
    progress: Progress | None = None, cancel: threading.Event | None = None,
) -> Trace:
    clean, corrupt = np.asarray(clean, np.int64), np.asarray(corrupt, np.int64)
    if len(clean) != len(corrupt):
        raise TraceError(f"the clean prompt has {len(clean)} tokens and the corrupted one "
                         f"{len(corrupt)}: change a word for one of the same token count")
    if np.array_equal(clean, corrupt):
        raise TraceError("the clean and corrupted prompts are the same tokens: change a word")
    report = progress or (lambda stage, fraction: None)

    def check_cancel(_block: int = 0) -> None:
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the trace was cancelled")

    weights = ReferenceWeights(model, keep=True)
    cfg = weights.config
    report("Clean and corrupted runs", 0.0)
    clean_out = forward(model, clean, weights=weights, on_layer=check_cancel)
    cache = KVCache()
    corrupt_out = forward(model, corrupt, weights=weights, cache=cache, on_layer=check_cancel)
    answer = int(clean_out.logits[-1].argmax())
    rival = int(corrupt_out.logits[-1].argmax())
    if rival == answer:
        others = clean_out.logits[-1].astype(np.float64).copy()
        others[answer] = -np.inf
        rival = int(others.argmax())
    direction = (weights.lm_head()[answer].astype(np.float64)
                 - weights.lm_head()[rival].astype(np.float64))

    def diff(last: np.ndarray) -> float:
        """The measure from the last position's final hidden state [H]."""
        return float(rms_norm(last[None], weights.output_norm(), cfg.rms_eps)[0] @ direction)

    s, n_layers = len(clean), cfg.n_layers
    angles, local_angles = rope_tables(np.arange(s), cfg)
    grid = np.empty((n_layers + 1, s))
    for layer in range(n_layers + 1):
        for i in range(s):
            check_cancel()
            x = corrupt_out.hidden_states[layer][i:].copy()
            x[0] = clean_out.hidden_states[layer][i]
            prefix = KVCache()
            prefix.keys = [k[:, :i] for k in cache.keys]
            prefix.values = [v[:, :i] for v in cache.values]
            for block in range(layer, n_layers):
                rows = (local_angles if cfg.slides(block) else angles)[i:]
                x = decoder_layer(x, weights.layer(block), cfg, rows, prefix, block)
            grid[layer, i] = diff(x[-1])
        report(f"Restoring states after {'the embeddings' if layer == 0 else f'block {layer}'}",
               (layer + 1) / (n_layers + 1))
    return Trace(tuple(int(t) for t in clean), tuple(int(t) for t in corrupt), answer, rival,
                 diff(clean_out.hidden_states[-1][-1]), diff(corrupt_out.hidden_states[-1][-1]),
                 grid)
