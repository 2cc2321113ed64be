"""Another engine's dump against the reference: the first layer off, and what usually
causes that pattern.

The heuristics are the ones engine builders use by hand, and no more certain than that:

- embeddings off: the token embedding table (its de-quantization or quant scales), or a
  scaled embedding, or other ids;
- position 0 right, later positions wrong, in the first layer off: only attention mixes
  positions, and position 0 reads itself alone at rotation angle 0, so its value path is
  right and the fault is in how queries and keys meet: RoPE style (NeoX halves vs
  interleaved pairs), rope theta or position ids, the GQA head mapping, the causal mask or
  the 1/sqrt(head_dim) scale;
- every position off by one common factor: a norm weight (stored as weight - 1 by some
  formats) or a quant scale;
- every position off otherwise: the block's norms (epsilon), weights (quant scales,
  de-quantization), MLP activation or gate/up order, q/k/v bias; a small error that stays
  small is the precision of the activations rather than a bug.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.reference.compare import layer_label
from engine.reference.dump import Dump, DumpError

ROPE_GQA = ("position 0 agrees and later positions do not: only attention mixes positions "
            "and position 0 reads itself alone at rotation angle 0, so look at how queries "
            "and keys meet: RoPE style (NeoX halves vs interleaved pairs), rope theta or "
            "position ids, the GQA head mapping (query head h reads kv head h // group), "
            "the causal mask, the 1/sqrt(head_dim) scale")
EMBEDDINGS = ("the token embeddings: the table's de-quantization or quant scales, an "
              "embedding scale (some families multiply by sqrt(hidden)), or other token ids")
BLOCK = ("every position is off, position 0 too, so not the mixing of positions: the "
         "block's norms (epsilon, weight offset), its weights' quant scales or "
         "de-quantization, the MLP activation or gate/up order, q/k/v bias")
PRECISION = ("the error is small (relative {:.2g}): norm epsilon, or the precision of "
             "activations or weights (fp16, quantized) rather than a bug")
HEAD = "all hidden states agree but the logits do not: the final norm or lm_head (tied?)"


@dataclass(frozen=True)
class LayerDelta:
    label: str
    max_abs: float          # max |theirs - ours|
    relative: float         # the largest over positions of max |Δ| / max |ours|
    cosine: float           # mean over positions of cos(theirs, ours)


@dataclass(frozen=True)
class Against:
    rows: tuple[LayerDelta, ...]          # embeddings, then every block
    logits: LayerDelta | None
    first_off: int | None                 # index into rows; len(rows) for the logits
    suspects: tuple[str, ...]
    tolerance: float                      # relative

    @property
    def ok(self) -> bool:
        return self.first_off is None

    def verdict(self) -> str:
        if self.first_off is None:
            return f"no layer is off (every hidden state within relative {self.tolerance:g})"
        row = self.logits if self.first_off == len(self.rows) else self.rows[self.first_off]
        return (f"{row.label} is the first off: max |Δ| {row.max_abs:.4g} (relative "
                f"{row.relative:.3g} > {self.tolerance:g}), cosine {row.cosine:.6f}")


def row_relative(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """max |theirs - ours| / max |ours| of every position [S]: per row, so one position's
    huge activations (Qwen's first token) do not hide an error at the others."""
    scale = np.abs(ours).max(axis=-1)
    return np.abs(theirs - ours).max(axis=-1) / np.where(scale > 0, scale, 1e-30)


def delta(label: str, ours: np.ndarray, theirs: np.ndarray) -> LayerDelta:
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    norms = np.linalg.norm(ours, axis=-1) * np.linalg.norm(theirs, axis=-1)
    cos = (ours * theirs).sum(-1) / np.where(norms > 0, norms, 1.0)
    return LayerDelta(label, float(np.abs(theirs - ours).max()),
                      float(row_relative(ours, theirs).max()), float(cos.mean()))


def against(ours: Dump, theirs: Dump, tolerance: float = 1e-2) -> Against:
    """Compare ``theirs`` with ``ours`` (the reference over the same ids)."""
    if len(ours.hidden_states) != len(theirs.hidden_states):
        raise DumpError(f"the dump has {len(theirs.hidden_states)} hidden states; this model "
                         f"has {len(ours.hidden_states)} (the embeddings and one per block)")
    for i, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states, strict=True)):
        if a.shape != b.shape:
            raise DumpError(f"hidden state {i} has shape {b.shape} in the dump; this model's "
                             f"is {a.shape}")
    rows = tuple(delta(layer_label(i), a, b)
                 for i, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states,
                                                strict=True)))
    logits = None
    if theirs.logits is not None and ours.logits is not None:
        logits = delta("logits", ours.logits, theirs.logits)
    first = next((i for i, r in enumerate(rows) if not r.relative <= tolerance), None)
    if first is None and logits is not None and not logits.relative <= tolerance:
        first = len(rows)
    return Against(rows, logits, first,
                   suspects(ours, theirs, first, tolerance), tolerance)


def suspects(ours: Dump, theirs: Dump, first: int | None, tolerance: float) -> tuple[str, ...]:
    if first is None:
        return ()
    if first == len(ours.hidden_states):
        return (HEAD,)
    if first == 0:
        return (EMBEDDINGS,)
    a = np.asarray(ours.hidden_states[first], np.float64)
    b = np.asarray(theirs.hidden_states[first], np.float64)
    per_position = row_relative(a, b)  # [S]
    if per_position[0] <= tolerance and len(per_position) > 1:
        return (ROPE_GQA,)
    found = []
    factor = float((a * b).sum() / (a * a).sum())
    if row_relative(factor * a, b).max() <= tolerance and abs(factor - 1) > tolerance:
        found.append(f"the state is the reference's times {factor:.4g} at every position: "
                     f"a uniform scale, a norm weight (stored as weight - 1?) or a quant scale")
    found.append(BLOCK)
    relative = float(per_position.max())
    if relative < 10 * tolerance:
        found.append(PRECISION.format(relative))
    return tuple(found)
