"""The sampler's reasons for one token, from the trace its own pick recorded.

For the few tokens worth showing (the chosen one and the best by raw and by penalised
logit): the raw logit, the logit after penalties, after temperature, which of top-k /
typical-p / top-p / min-p kept it, and its final probability; plus how many candidates
each step left and whether the pick was greedy (temperature 0) or a draw, and under a
schema how many tokens it removed and whether the raw top-1 was one of them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.chat.options import Options
from engine.chat.reasons import FILTERS, Candidate, SamplerReasons
from engine.runtime.sampler import Candidates, SampleTrace, largest, softmax

SHOWN = 5  # best tokens by raw and by penalised logit that are always explained


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
    best = set(largest(raw, shown).tolist())
    if penalized is not raw:
        if best_penalized is None or len(best_penalized) < shown:
            best_penalized = largest(penalized, shown)
        best |= set(best_penalized.tolist())
    best.discard(chosen)
    return [chosen] + sorted(best, key=lambda i: (-float(raw[i]), i))
