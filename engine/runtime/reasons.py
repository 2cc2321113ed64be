"""The sampler's reasons for one token, from the trace its own pick recorded.

For the few tokens worth showing (the chosen one and the best by raw and by penalised
logit): the raw logit, the logit after penalties, after temperature, which of top-k /
typical-p / top-p / min-p kept it, and its final probability; plus how many candidates
each step left and whether the pick was greedy (temperature 0) or a draw. Under a schema
(structured output) also how many tokens it removed and whether the model's own top-1 was
one of them: then the token was forced by the schema, not chosen by the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.runtime.sampler import Candidates, Options, SampleTrace, _largest, softmax

FILTERS = ("top_k", "typical_p", "top_p", "min_p")
SHOWN = 5  # best tokens by raw and by penalised logit that are always explained


@dataclass(frozen=True)
class Candidate:
    id: int
    piece: str
    raw_logit: float
    penalized_logit: float
    scaled_logit: float | None       # after temperature; None when a filter dropped it
    kept: tuple[bool, ...]           # survived each of FILTERS (empty when greedy: none ran)
    probability: float               # final: what the draw used (greedy: 1 or 0)
    chosen: bool


@dataclass(frozen=True)
class SamplerReasons:
    greedy: bool                     # temperature 0: argmax of the penalised logits
    chosen: int
    survivors: tuple[int, ...]       # candidates left after each of FILTERS (greedy: none)
    candidates: tuple[Candidate, ...]  # the chosen token first, then by raw logit
    options: Options
    schema_removed: int | None = None  # tokens the schema disallowed (None: no schema)
    schema_forced: bool = False      # the raw top-1 was one of them

    @property
    def raw_top(self) -> Candidate:
        return max(self.candidates, key=lambda c: (c.raw_logit, -c.id))

    @property
    def summary(self) -> str:
        """One sentence: how the pick was made, and why the raw favourite lost if it did."""
        chosen = self.candidates[0]
        o = self.options
        if self.greedy:
            text = f"greedy (temperature 0): {chosen.piece!r} had the highest logit after penalties"
            if self.schema_removed is not None:
                text += " of the tokens the schema allows"
        else:
            text = (f"drawn at temperature {o.temperature:g} from {self.survivors[-1]} "
                    f"candidate(s), p = {chosen.probability:.3f}")
        if self.schema_removed is not None:
            text += f"; the schema removed {self.schema_removed} candidate(s)"
        best = self.raw_top
        if best.id != chosen.id:
            why = []
            if self.schema_forced:
                why.append("forced by the schema, which does not allow it")
            else:
                if best.penalized_logit != best.raw_logit:
                    why.append(f"penalties (repeat {o.repeat_penalty:g}, presence "
                               f"{o.presence_penalty:g}, frequency {o.frequency_penalty:g}) took "
                               f"it from {best.raw_logit:.3f} to {best.penalized_logit:.3f}")
                if not self.greedy:
                    why.append("the draw picked another candidate" if all(best.kept) else
                               "dropped by " + ", ".join(
                                   f for f, k in zip(FILTERS, best.kept, strict=True) if not k))
            text += f"; the raw top-1 {best.piece!r} was not chosen: " + "; ".join(why)
        return text

    def to_json(self) -> dict:
        return {
            "greedy": self.greedy, "chosen": self.chosen, "summary": self.summary,
            "survivors": dict(zip(FILTERS, self.survivors, strict=False)),
            **({"schema": {"removed": self.schema_removed, "forced": self.schema_forced}}
               if self.schema_removed is not None else {}),
            "candidates": [
                {"id": c.id, "token": c.piece, "raw_logit": c.raw_logit,
                 "penalized_logit": c.penalized_logit, "scaled_logit": c.scaled_logit,
                 "kept": dict(zip(FILTERS, c.kept, strict=False)),
                 "probability": c.probability, "chosen": c.chosen}
                for c in self.candidates
            ],
        }


def explain(trace: SampleTrace, options: Options, piece: Callable[[int], str],
            shown: int = SHOWN) -> SamplerReasons:
    """The reasons of the pick ``trace`` recorded (Sampler.sample(..., trace=trace))."""
    steps = dict(trace.steps)
    raw, penalized = trace.raw, trace.penalized    # [V] each
    greedy = "greedy" in steps
    chosen = int(steps["greedy" if greedy else "draw"].ids[0])
    best_penalized = None
    if penalized is not raw and not greedy and steps["top_k"].is_sorted:
        best_penalized = steps["top_k"].ids[:shown]   # the top-k cut sorted them already
    watch = _watched(raw, penalized, chosen, shown, best_penalized)
    if greedy:
        kept = np.ones((len(watch), 0), dtype=bool)
        survivors = ()
        scaled = {i: None for i in watch}
        probability = {i: float(i == chosen) for i in watch}
    else:
        kept = np.stack([np.isin(watch, steps[f].ids) for f in FILTERS], axis=1)  # [n, 4]
        survivors = tuple(len(steps[f].ids) for f in FILTERS)
        final: Candidates = steps["temperature"]
        probs = softmax(final.logits)
        where = {int(i): k for k, i in enumerate(final.ids)}
        scaled = {i: float(final.logits[where[i]]) if i in where else None for i in watch}
        probability = {i: float(probs[where[i]]) if i in where else 0.0 for i in watch}
    candidates = tuple(
        Candidate(int(i), piece(int(i)), float(raw[i]), float(penalized[i]), scaled[i],
                  tuple(bool(k) for k in kept[n]), probability[i], int(i) == chosen)
        for n, i in enumerate(watch)
    )
    removed = forced = None
    if trace.allowed is not None:
        removed = int(len(trace.allowed) - np.count_nonzero(trace.allowed))
        forced = not bool(trace.allowed[int(np.argmax(raw))])
    return SamplerReasons(greedy, chosen, survivors, candidates, options, removed, bool(forced))


def _watched(raw: np.ndarray, penalized: np.ndarray, chosen: int, shown: int,
             best_penalized: np.ndarray | None) -> list[int]:
    """The chosen token, then the best by raw and by penalised logit, by raw logit.
    (Penalties off: the two are one array; the top-k cut may have sorted the penalised.)"""
    best = set(_largest(raw, shown).tolist())
    if penalized is not raw:
        if best_penalized is None or len(best_penalized) < shown:
            best_penalized = _largest(penalized, shown)
        best |= set(best_penalized.tolist())
    best.discard(chosen)
    return [chosen] + sorted(best, key=lambda i: (-float(raw[i]), i))
