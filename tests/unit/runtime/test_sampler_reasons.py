"""The sampler's reasons are the pick's own account: same token, same kept sets."""

from __future__ import annotations

import numpy as np
import pytest

from engine.chat.options import Options
from engine.runtime.reasons import explain
from engine.runtime.sampler import (
    Candidates,
    Sampler,
    SampleTrace,
    min_p,
    penalize,
    top_k,
    top_p,
    typical_p,
)

V = 500
SETTINGS = [
    Options(temperature=0.8, top_k=40, top_p=0.9, seed=1),
    Options(temperature=1.3, top_k=0, top_p=0.95, min_p=0.05, seed=2),
    Options(temperature=0.7, top_k=20, typical_p=0.8, top_p=1.0, repeat_penalty=1.3, seed=3),
    Options(temperature=0.0, repeat_penalty=1.05, seed=4),
    Options(temperature=1.0, top_k=5, top_p=0.5, min_p=0.2, presence_penalty=0.5,
            frequency_penalty=0.3, seed=5),
]


def piece(i: int) -> str:
    return f"t{i}"


def expected_kept(logits: np.ndarray, history: list[int], o: Options) -> list[set[int]]:
    """The kept sets, from the chain's functions called one by one."""
    penalized = penalize(logits, history, repeat_penalty=o.repeat_penalty,
                         last_n=o.repeat_last_n, presence=o.presence_penalty,
                         frequency=o.frequency_penalty)
    c = top_k(Candidates.all(penalized), o.top_k)
    out = [set(c.ids.tolist())]
    for step, value in ((typical_p, o.typical_p), (top_p, o.top_p), (min_p, o.min_p)):
        c = step(c, value)
        out.append(set(c.ids.tolist()))
    return out


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: f"t{o.temperature}-seed{o.seed}")
def test_reasons_match_the_samplers_own_choice_over_many_seeded_steps(options):
    rng = np.random.default_rng(options.seed)
    traced, plain = Sampler(options), Sampler(options)
    history = rng.integers(0, V, 30).tolist()
    for _step in range(60):
        logits = (rng.standard_normal(V) * 3).astype(np.float32)
        logits[history[-1]] += 6  # the last token is a favourite: penalties matter
        trace = SampleTrace()
        token = traced.sample(logits, history, trace)
        assert token == plain.sample(logits, history)   # tracing changes nothing
        reasons = explain(trace, options, piece)
        assert reasons.chosen == token and reasons.candidates[0].id == token
        assert reasons.candidates[0].chosen and sum(c.chosen for c in reasons.candidates) == 1
        assert reasons.greedy == (options.temperature == 0)
        raw_best = int(np.argmax(logits))
        assert raw_best in {c.id for c in reasons.candidates}
        for c in reasons.candidates:
            assert c.raw_logit == pytest.approx(float(logits[c.id]))
        if options.temperature == 0:
            penalized = penalize(logits, history, repeat_penalty=options.repeat_penalty,
                                 last_n=options.repeat_last_n, presence=0.0, frequency=0.0)
            assert token == int(np.argmax(penalized))
            assert reasons.candidates[0].probability == 1.0
        else:
            kept_sets = expected_kept(logits, history, options)
            assert reasons.survivors == tuple(len(s) for s in kept_sets)
            for c in reasons.candidates:
                assert c.kept == tuple(c.id in s for s in kept_sets), c
                assert (c.scaled_logit is None) == (c.id not in kept_sets[-1])
            chosen = reasons.candidates[0]
            assert all(chosen.kept) and 0 < chosen.probability <= 1
            assert chosen.scaled_logit == pytest.approx(chosen.penalized_logit
                                                        / options.temperature, rel=1e-6)
        history.append(token)


def test_summary_says_why_the_raw_top1_lost_at_temperature_0():
    options = Options(temperature=0.0, repeat_penalty=1.5)
    logits = np.zeros(V, dtype=np.float32)
    logits[7], logits[9] = 10.0, 9.0
    trace = SampleTrace()
    token = Sampler(options).sample(logits, [7, 7], trace)
    reasons = explain(trace, options, piece)
    assert token == 9
    assert reasons.raw_top.id == 7 and reasons.raw_top.penalized_logit == pytest.approx(10 / 1.5)
    assert "greedy" in reasons.summary and "'t7' was not chosen" in reasons.summary
    assert "repeat 1.5" in reasons.summary
    assert reasons.to_json()["survivors"] == {} and reasons.candidates[0].kept == ()


def test_summary_names_the_filter_that_dropped_a_token():
    options = Options(temperature=1.0, top_k=1, top_p=1.0, repeat_penalty=2.0, seed=0)
    logits = np.zeros(V, dtype=np.float32)
    logits[3], logits[4] = 5.0, 4.0
    trace = SampleTrace()
    assert Sampler(options).sample(logits, [3], trace) == 4
    reasons = explain(trace, options, piece)
    assert reasons.raw_top.kept == (False, False, False, False)
    assert "dropped by top_k" in reasons.summary
