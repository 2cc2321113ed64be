"""The sampler's transforms give exactly the distributions llama.cpp's chain gives, the
draw follows them, and options resolve like Ollama's (defaults < params layer < settings)."""

import math

import numpy as np
import pytest

from engine.chat.options import Options
from engine.errors import GenerationError
from engine.runtime.sampler import (
    Candidates,
    Sampler,
    draw,
    logprobs,
    min_p,
    penalize,
    temperature,
    top_k,
    top_p,
    typical_p,
)


def from_probs(*probs: float) -> Candidates:
    """Candidates whose softmax is exactly `probs` (ids 0..n-1)."""
    return Candidates.all(np.log(np.array(probs)).astype(np.float32))


def kept(c: Candidates) -> list[int]:
    return [int(i) for i in c.ids]


# --- transforms -------------------------------------------------------------------------


def test_top_k_keeps_k_highest_sorted_with_ties_by_id():
    c = Candidates.all(np.array([0.5, 3.0, -1.0, 3.0, 2.0, 0.0], np.float32))
    out = top_k(c, 3)
    assert kept(out) == [1, 3, 4] and out.is_sorted
    np.testing.assert_allclose(out.probs(), np.exp([3, 3, 2]) / np.exp([3, 3, 2]).sum())
    assert top_k(c, 0) is c and top_k(c, 6) is c


def test_top_k_on_large_vocab_equals_full_sort():
    rng = np.random.default_rng(1)
    logits = (rng.standard_normal(151_936) * 3).astype(np.float32)
    logits[rng.integers(0, len(logits), 30)] = 9.0  # a block of exact ties at the top
    out = top_k(Candidates.all(logits), 40)
    assert kept(out) == list(np.argsort(-logits, kind="stable")[:40])


def test_top_p_keeps_smallest_prefix_reaching_p():
    c = from_probs(0.1, 0.5, 0.25, 0.15)
    assert kept(top_p(c, 0.7)) == [1, 2]  # 0.5, 0.75 >= 0.7
    assert kept(top_p(c, 0.8)) == [1, 2, 3]  # 0.75 < 0.8 <= 0.9
    assert kept(top_p(c, 0.0)) == [1]  # always at least one
    assert top_p(c, 1.0) is c
    np.testing.assert_allclose(top_p(c, 0.7).probs(), [0.5 / 0.75, 0.25 / 0.75])


def test_top_p_adaptive_path_equals_full_sort():
    rng = np.random.default_rng(2)
    logits = (rng.standard_normal(151_936) * 2).astype(np.float32)
    logits[:100] += 12  # peaked: the first try of 256 already reaches p
    peaked = Candidates.all(logits)
    flat = Candidates.all((rng.standard_normal(20_000) * 2).astype(np.float32))
    for c, p in ((peaked, 0.9), (flat, 0.5), (flat, 0.99)):
        assert kept(top_p(c, p)) == kept(top_p(c.sorted(), p))


def test_min_p_keeps_tokens_at_least_p_times_the_best():
    c = from_probs(0.05, 0.4, 0.2, 0.35)
    assert kept(min_p(c, 0.6)) == [1, 3]  # threshold 0.24
    assert kept(min_p(c, 0.1)) == [0, 1, 2, 3]  # threshold 0.04
    assert kept(min_p(c, 1.0)) == [1]
    assert min_p(c, 0.0) is c
    np.testing.assert_allclose(min_p(c, 0.6).probs(), [0.4 / 0.75, 0.35 / 0.75])


def test_typical_p_keeps_tokens_closest_to_the_entropy():
    probs = np.array([0.5, 0.3, 0.1, 0.06, 0.04])
    entropy = -(probs * np.log(probs)).sum()  # 1.236: surprise -log p closest to it first
    order = np.argsort(np.abs(-np.log(probs) - entropy))
    assert list(order) == [1, 0, 2, 3, 4]
    c = from_probs(*probs)
    assert kept(typical_p(c, 0.5)) == [0, 1]  # 0.3, then 0.8 > 0.5
    assert kept(typical_p(c, 0.25)) == [1]  # 0.3 > 0.25 alone
    assert kept(typical_p(c, 0.85)) == [0, 1, 2]  # 0.8, 0.9 > 0.85
    assert typical_p(c, 1.0) is c
    np.testing.assert_allclose(typical_p(c, 0.5).probs(), [0.5 / 0.8, 0.3 / 0.8])


def test_temperature_scales_logits():
    c = from_probs(0.6, 0.3, 0.1)
    cold = temperature(c, 0.5).probs()
    expected = np.array([0.6, 0.3, 0.1]) ** 2
    np.testing.assert_allclose(cold, expected / expected.sum(), rtol=1e-6)
    hot = temperature(c, 2.0).probs()
    expected = np.sqrt([0.6, 0.3, 0.1])
    np.testing.assert_allclose(hot, expected / expected.sum(), rtol=1e-6)


def test_penalties_follow_llama_cpp():
    logits = np.array([2.0, -2.0, 1.0, 0.5, 3.0], np.float32)
    history = [4, 4, 0, 1, 0, 4]  # last 4: 0, 1, 0, 4 -> counts {0: 2, 1: 1, 4: 1}
    out = penalize(logits, history, repeat_penalty=2.0, last_n=4, presence=0.25, frequency=0.125)
    expected = [2.0 / 2 - 2 * 0.125 - 0.25, -2.0 * 2 - 0.125 - 0.25, 1.0, 0.5, 3.0 / 2 - 0.375]
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert logits[0] == 2.0  # input untouched
    everything = penalize(logits, history, repeat_penalty=2.0, last_n=-1, presence=0, frequency=0)
    np.testing.assert_allclose(everything, [1.0, -4.0, 1.0, 0.5, 1.5])
    assert (
        penalize(logits, history, repeat_penalty=2.0, last_n=0, presence=1, frequency=1) is logits
    )
    assert (
        penalize(logits, history, repeat_penalty=1.0, last_n=64, presence=0, frequency=0) is logits
    )
    with pytest.raises(GenerationError, match="token 7 in the history"):
        penalize(logits, [7], repeat_penalty=1.1, last_n=64, presence=0, frequency=0)


# --- drawing ------------------------------------------------------------------------------


def test_draw_frequencies_match_probabilities():
    c = from_probs(0.5, 0.25, 0.15, 0.1)
    rng = np.random.default_rng(1234)
    n = 40_000
    counts = np.bincount([draw(c, rng) for _ in range(n)], minlength=4)
    expected = np.array([0.5, 0.25, 0.15, 0.1])
    sigma = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(counts / n - expected) < 4 * sigma), counts / n


def test_sampler_frequencies_through_the_whole_chain():
    """top_k 3 then temperature 0.5 over logits log([.4,.3,.2,.1]): p ~ [.4,.3,.2]^2."""
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.1])).astype(np.float32)
    sampler = Sampler(Options(top_k=3, top_p=1.0, temperature=0.5, seed=7))
    n = 30_000
    counts = np.bincount([sampler.sample(logits, ()) for _ in range(n)], minlength=4)
    expected = np.array([0.16, 0.09, 0.04, 0.0]) / 0.29
    sigma = np.sqrt(expected * (1 - expected) / n)
    assert counts[3] == 0
    assert np.all(np.abs(counts / n - expected) <= 4 * sigma), counts / n


def test_greedy_at_temperature_zero_uses_penalised_logits():
    logits = np.array([1.0, 5.0, 4.0, -1.0], np.float32)
    assert Sampler(Options(temperature=0)).sample(logits, [1, 1]) == 1
    penalised = Sampler(Options(temperature=0, repeat_penalty=1.5))
    assert penalised.sample(logits, [1]) == 2  # 5 / 1.5 < 4


def test_seeded_runs_are_reproducible():
    rng = np.random.default_rng(0)
    steps = [(rng.standard_normal(1000) * 2).astype(np.float32) for _ in range(50)]
    runs = []
    for _ in range(2):
        sampler = Sampler(Options(seed=42, temperature=1.0))
        runs.append([sampler.sample(x, ()) for x in steps])
    assert runs[0] == runs[1]
    other = Sampler(Options(seed=43, temperature=1.0))
    assert [other.sample(x, ()) for x in steps] != runs[0]


def test_broken_logits_raise():
    with pytest.raises(GenerationError, match="logit of nan"):
        Sampler(Options()).sample(np.array([0.0, np.nan], np.float32), ())


def test_logprobs_are_log_softmax_of_raw_logits():
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal(5000) * 3).astype(np.float32)
    logits[17] = -np.inf
    result = logprobs(logits, 5)
    x = logits.astype(np.float64)
    finite = np.isfinite(x)
    log_z = np.log(np.exp(x[finite] - x.max()).sum()) + x.max()
    expected = x - log_z
    best = np.argsort(-x)[:5]
    assert [i for i, _ in result.top] == list(best)
    np.testing.assert_allclose([lp for _, lp in result.top], expected[best], rtol=1e-6)
    assert result.of(123) == pytest.approx(expected[123], rel=1e-6)
    assert result.of(17) == -math.inf
    p = np.exp(expected[finite])
    assert result.entropy == pytest.approx(-(p * expected[finite]).sum(), rel=1e-5)
    assert logprobs(np.zeros(8, np.float32), 3).entropy == pytest.approx(math.log(8))


# --- options ------------------------------------------------------------------------------


def test_options_defaults_are_ollamas():
    o = Options()
    assert (o.temperature, o.top_k, o.top_p, o.min_p, o.typical_p) == (0.8, 40, 0.9, 0.0, 1.0)
    assert (o.repeat_penalty, o.repeat_last_n, o.presence_penalty, o.frequency_penalty) == (
        1.0,
        64,
        0.0,
        0.0,
    )
    assert (o.seed, o.num_predict, o.num_ctx, o.stop) == (-1, -1, 4096, ())


def test_resolve_precedence():
    layer = {"temperature": 0.2, "stop": ["<|im_end|>", "<|endoftext|>"], "num_ctx": 8192.0}
    user = {"temperature": 1, "stop": ["END"], "top_k": None}
    o = Options.resolve(layer, user)
    assert o.temperature == 1.0 and isinstance(o.temperature, float)
    assert o.stop == ("END",)
    assert o.num_ctx == 8192 and isinstance(o.num_ctx, int)
    assert o.top_k == 40
    assert Options.resolve(layer, {}).stop == ("<|im_end|>", "<|endoftext|>")
    assert Options.resolve(None, None) == Options()
    assert Options.resolve({"num_gpu": 99, "mirostat": 0}, {}) == Options()


@pytest.mark.parametrize(
    "layer, user, message",
    [
        ({}, {"top_kk": 3}, r"unknown option 'top_kk' in settings; valid options: temperature"),
        ({"temprature": 1}, {}, r"unknown option 'temprature' in the model's params"),
        ({}, {"top_k": "40"}, r"option 'top_k' in settings must be a number"),
        ({}, {"top_k": 2.5}, r"'top_k' .* must be a whole number"),
        ({}, {"seed": True}, r"'seed' .* must be a number"),
        ({}, {"stop": "END"}, r"'stop' .* must be a list of strings"),
        ({}, {"stop": ["a", 1]}, r"'stop' .* must be a list of strings"),
        ({}, {"top_p": 1.5}, r"'top_p' .* must be between 0 and 1"),
        ({}, {"temperature": -0.1}, r"'temperature' .* must be at least 0"),
        ({}, {"temperature": math.nan}, r"'temperature' .* must be finite"),
        ({}, {"num_ctx": 0}, r"'num_ctx' .* must be at least 1"),
    ],
)
def test_resolve_errors(layer, user, message):
    with pytest.raises(GenerationError, match=message):
        Options.resolve(layer, user)
