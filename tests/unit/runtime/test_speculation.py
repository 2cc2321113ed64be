"""Speculative decoding: drafters, the exact acceptance rule, and the decode loop with a
drafter against the same loop without one (tiny random models; the real demo models are in
test_speculation_demo.py).

With a drafter the answer must be the one plain decoding gives: greedy token for token
(penalties, stop strings, EOS inside a draft, num_predict and num_ctx reached mid-draft,
M-RoPE positions after an image, cancel), sampling with the same distribution.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from engine.chat.events import DoneEvent, TokenEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import open_model
from engine.graph.kernels import kernels_for
from engine.runtime.decoder import DecoderSession
from engine.runtime.drafters import DraftLength, PromptLookup, verify_cost
from engine.runtime.generate import Generator
from engine.runtime.loader import load_model
from engine.runtime.sampler import Sampler
from engine.runtime.speculation import (
    drafter_for,
    make_drafter,
    predicted_gain,
    speculation_note,
)
from engine.vision import preprocess
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model


class Recording:
    """Wraps a drafter and keeps what it proposed and how much was kept."""

    def __init__(self, inner):
        self.inner, self.name, self.rounds = inner, inner.name, []

    def propose(self, context, limit):
        draft = self.inner.propose(context, limit)
        assert len(draft) <= limit, f"drafted {len(draft)} tokens past the room of {limit}"
        if draft:
            self.rounds.append([draft, None])
        return draft

    def accepted(self, proposed, kept):
        self.rounds[-1][1] = kept
        self.inner.accepted(proposed, kept)


class Fixed:
    """Always proposes the same tokens (a drafter whose guesses the model rarely agrees
    with, to exercise rejection)."""

    name = "fixed"

    def __init__(self, tokens):
        self.tokens = list(tokens)

    def propose(self, context, limit):
        return self.tokens[:limit]

    def accepted(self, proposed, kept):
        pass


def eager() -> PromptLookup:
    """Prompt lookup that always drafts when it finds a match (tests want drafts)."""
    return PromptLookup(min_ngram=1, length=DraftLength(max_len=6, prior=0.99, memory=1.0))


def run(model, prompt, options, drafter=None, cancel=None):
    generator = Generator(model.decoder, model.tokenizer)
    events = list(generator.run(prompt, options, drafter=drafter, cancel=cancel))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    [done] = [e for e in events if isinstance(e, DoneEvent)]
    assert_cache_holds(model.decoder, prompt, tokens)
    return tokens, done


def assert_cache_holds(decoder, prompt, tokens):
    """The decoder's record of its cache is the prompt, then the answer's tokens fed so far
    (all but possibly the last; a drafted stop token that was kept after them): the rows of
    rejected drafts are gone."""
    fed, ids = decoder.keys[len(prompt):], [t.id for t in tokens]
    assert decoder.keys[:len(prompt)] == list(prompt.keys), "cache record out of step"
    assert fed[:len(ids)] == ids[:len(fed)], "cache record out of step"
    assert len(ids) - 1 <= len(fed) <= len(ids) + 1, "cache record out of step"


@pytest.fixture(scope="module")
def tiny(synthetic_gguf):
    return load_model(synthetic_gguf("qwen2", TextSpec(vocab=400), seed=5),
                      num_ctx=256, exact=True)


def repetitive(model) -> PromptTokens:
    ids = model.tokenizer.encode("the cat is on the mat and the cat is on the mat and the")
    return PromptTokens.text(ids * 3)


# -- drafters ------------------------------------------------------------------------------


def test_prompt_lookup_copies_what_followed_the_latest_match():
    lookup = PromptLookup(max_ngram=2, min_ngram=1, length=DraftLength(prior=0.95))
    context = [5, 6, 7, 8, 9, 1, 5, 6, 3, 4, 2, 5, 6]
    # latest earlier "5 6" is at index 6: what followed it was 3 4 2 5 6
    assert lookup.propose(context, 3) == [3, 4, 2]
    assert lookup.propose([1, 2, 3], 4) == []                  # nothing repeats
    assert lookup.propose([7, 8, -1, 7, 8, -1, 9, 7, 8], 5) == []  # stops at image rows
    assert PromptLookup(min_ngram=2).propose([1, 2, 9, 2], 4) == []   # 1-gram only: too short


def test_draft_length_follows_acceptance_and_cost():
    length = DraftLength(max_len=12, prior=0.9)
    long = length.choose(12)
    for _ in range(6):
        length.update(long, 0)          # everything rejected
    assert length.choose(12) == 0, "kept drafting although nothing was accepted"
    for _ in range(40):                 # drifts back to the prior: drafting is tried again
        if length.choose(12):
            break
    assert length.choose(12) > 0
    assert DraftLength(prior=0.9).choose(2) <= 2
    assert verify_cost(1) == 1.0 and verify_cost(3) == pytest.approx((1.52 + 1.81) / 2)


def test_auto_pays_only_for_a_cheap_draft_model():
    assert predicted_gain(0.44) == 1.0       # 0.5B for the 1.5B: size ratio 0.44
    assert predicted_gain(0.1) > 1.15        # 0.5B for a 7B
    assert predicted_gain(0.0) > predicted_gain(0.1)


def test_draft_model_needs_the_same_vocabulary(tmp_path):
    a = write_model(tmp_path / "a.gguf", "qwen2", TextSpec(vocab=400), seed=1)
    b = write_model(tmp_path / "b.gguf", "qwen2", TextSpec(vocab=400, hidden=32), seed=2)
    c = write_model(tmp_path / "c.gguf", "qwen2", TextSpec(vocab=420), seed=2)
    loaded = {p.name: load_model(p, num_ctx=64) for p in (b, c)}

    def load(name):
        return loaded[name].decoder, loaded[name].gguf.path

    assert make_drafter("b.gguf", a, load_draft=load).name == "draft model"
    with pytest.raises(Exception, match="vocabularies differ"):
        make_drafter("c.gguf", a, load_draft=load)
    assert make_drafter("off", a) is None
    assert make_drafter("ngram", a).name == "ngram"
    # auto: a draft model of comparable size does not pay
    assert make_drafter("auto", a, load_draft=load,
                        candidates=lambda: [("b.gguf", b)]).name == "ngram"


def test_auto_drafts_only_where_the_answer_cannot_change(tmp_path):
    """auto drafts where a verify step's rows equal one-token steps (fast CPU mode and exact
    mode, measured below); elsewhere (CUDA) it stays off, an explicit choice runs, and the
    user is told."""
    path = write_model(tmp_path / "a.gguf", "qwen2", TextSpec(vocab=400), seed=1)
    assert make_drafter("auto", path, row_invariant=False) is None
    assert make_drafter("auto", path, row_invariant=True).name == "ngram"
    assert make_drafter("ngram", path, row_invariant=False).name == "ngram"
    assert speculation_note("auto", True) is None and speculation_note("ngram", True) is None
    assert "CPU provider" in speculation_note("auto", False)
    assert "may differ" in speculation_note("ngram", False)
    for exact in (False, True):
        model = load_model(path, num_ctx=64, exact=exact)
        assert model.decoder.row_invariant
        assert drafter_for("auto", model, None).name == "ngram"


def verify_and_steps(decoder, new: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Logits of ``new`` fed as one verify forward and as one-token forwards, both after
    the same cached prompt."""
    decoder.forward(input_ids=[5, 17, 42, 8])
    batch = decoder.forward(input_ids=new, rows=len(new)).logits
    decoder.truncate(4)
    single = np.stack([decoder.forward(input_ids=[t]).logits for t in new])
    return batch, single


def test_a_verify_step_matches_one_token_steps_in_exact_mode(tmp_path):
    """The premise of exact speculation: k rows in one forward give the logits of k
    one-token forwards (fp32: summation order only)."""
    path = write_model(tmp_path / "a.gguf", "qwen2", TextSpec(vocab=400), seed=3)
    batch, single = verify_and_steps(load_model(path, num_ctx=64, exact=True).decoder,
                                     [99, 3, 250, 7, 11])
    assert np.abs(batch - single).max() < 1e-4


MIXED = {"ffn_down": T.Q4_K, "attn_q": T.Q4_0, "ffn_gate": T.Q5_K, "ffn_up": T.Q4_1}


@pytest.mark.parametrize("apart", [None, (4, 8)], ids=["this-cpu", "all-apart"])
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "explicit"])
@pytest.mark.parametrize("arch, default, types", [("qwen2", T.Q8_0, MIXED),
                                                  ("qwen3", T.Q8_0, MIXED),
                                                  ("qwen2", T.F16, {})], ids=["q2", "q3", "f16"])
def test_a_verify_step_equals_one_token_steps_to_the_bit_in_fast_mode(tmp_path, arch, default,
                                                                      types, fold, apart):
    """Fast mode's int8 activations amplify any rounding difference, so there the rows
    must be identical, with either zero-point form and with this CPU's way to row
    invariance or every quantized width apart (engine.graph.kernels): 4-bit ffn_down,
    K-quant and Q4_1 offsets, 8-bit matmuls (all int8 activations), dense matmuls and the
    attention's spare row, for 1 to 9 new tokens. The matrices are as wide as a small real
    model's: a one-row kernel can take another path for small ones."""
    spec = TextSpec(vocab=400, hidden=1024, heads=16, kv_heads=4, ffn=2816, layers=2)
    path = write_model(tmp_path / "q.gguf", arch, spec, default_type=default, types=types,
                       seed=4)
    kernels = replace(kernels_for(), fold_zero_points=fold)
    if apart is not None:
        kernels = replace(kernels, rows_apart_bits=apart)
    decoder = DecoderSession(open_model(path), max_cache_len=64, cache=False, kernels=kernels)
    assert decoder.row_invariant
    for k in (1, 2, 5, 9):
        decoder.reset()
        batch, single = verify_and_steps(decoder, [99, 3, 250, 7, 11, 40, 41, 300, 12][:k])
        np.testing.assert_array_equal(batch, single)


@pytest.mark.parametrize("apart", [None, (4, 8)], ids=["this-cpu", "all-apart"])
def test_the_first_answer_token_does_not_depend_on_the_cached_prompt(tmp_path, apart):
    """A prompt prefilled whole, or its tail after a cached prefix (a later turn, a
    regenerated answer, or a drafted run after a plain one), gives its last position the
    same bits in fast mode: with the 4-bit one-row kernel of an AVX2 CPU that row runs
    alone either way."""
    spec = TextSpec(vocab=400, hidden=1024, heads=16, kv_heads=4, ffn=2816, layers=2)
    path = write_model(tmp_path / "q.gguf", "qwen2", spec, default_type=T.Q8_0, types=MIXED,
                       seed=4)
    kernels = kernels_for() if apart is None else replace(kernels_for(), rows_apart_bits=apart)
    decoder = DecoderSession(open_model(path), max_cache_len=64, cache=False, kernels=kernels)
    prompt = [99, 3, 250, 7, 11, 40, 41, 300, 12]
    whole = decoder.forward(input_ids=prompt).logits
    for cached in (1, 5, 8):
        decoder.truncate(cached)
        np.testing.assert_array_equal(decoder.forward(input_ids=prompt[cached:]).logits, whole)


# -- the acceptance rule -------------------------------------------------------------------


def test_greedy_verify_keeps_exactly_the_argmax():
    sampler = Sampler(Options(temperature=0, repeat_penalty=2.0))
    logits = np.array([1.0, 3.0, 2.9, 0.0], np.float32)
    assert sampler.verify(logits, [], 1) == (1, True)
    assert sampler.verify(logits, [], 2) == (1, False)
    assert sampler.verify(logits, [1], 1) == (2, False)     # the penalty moved the argmax


@pytest.mark.parametrize("drafted", [0, 1, 3])
def test_sampling_verify_has_the_distribution_of_sampling(drafted):
    """Frequencies of verify's tokens against the exact p over 15k draws: the bound is
    far below what a wrong rule gives (accepting always moves p(x) to 1; drawing the
    replacement from p with x left in moves it by p(x)(1 - p(x)) >= 0.19 here)."""
    options = Options(temperature=0.7, top_k=3, top_p=1.0, seed=11)
    logits = np.array([2.0, 1.6, 0.1, 1.2, -1.0], np.float32)
    sampler = Sampler(options)
    c = sampler.distribution(logits)
    p = np.zeros(len(logits))
    p[c.ids] = c.probs()
    n = 15_000
    counts = np.bincount([sampler.verify(logits, [], drafted)[0] for _ in range(n)],
                         minlength=len(logits))
    tv = 0.5 * np.abs(counts / n - p).sum()
    assert tv < 0.02, f"verify's tokens are {tv:.3f} (total variation) away from p"


def test_seeded_speculative_sampling_is_reproducible_and_keeps_the_distribution(tiny):
    """Next-token frequencies with and without speculation on a tiny model: the tokens
    after the first come from verify rows when drafts are proposed."""
    prompt = repetitive(tiny)
    options = Options(temperature=1.0, top_k=2, top_p=1.0, num_predict=3)
    seeded = Options(temperature=1.0, top_k=4, top_p=1.0, num_predict=6, seed=7)
    first, _ = run(tiny, prompt, seeded, eager())
    again, _ = run(tiny, prompt, seeded, eager())
    assert [e.id for e in first] == [e.id for e in again]

    def triples(drafter_factory, seeds):
        out = []
        for seed in seeds:
            tokens, _ = run(tiny, prompt, replace(options, seed=seed), drafter_factory())
            out.append(tuple(e.id for e in tokens[:3]))
        return out

    n = 1500             # seeded runs: the test is reproducible, its verdict a real test
    plain = triples(lambda: None, range(1, n + 1))
    # draft the most frequent second and third tokens: the rule is then tested where its
    # acceptance matters most
    draft = [max(set(col), key=col.count) for col in ([p[1] for p in plain],
                                                         [p[2] for p in plain])]
    spec = triples(lambda: Fixed(draft), range(n + 1, 2 * n + 1))
    # the second and third tokens come from verify rows; a wrong acceptance rule (keeping
    # the draft too often, or drawing the replacement from p itself) fails this by far
    for position in (1, 2):
        ours, theirs = [p[position] for p in spec], [p[position] for p in plain]
        statistic, critical = homogeneity(theirs, ours)
        assert statistic < critical, (f"token {position}: speculation moved its distribution "
                                      f"(chi-square {statistic:.1f} > {critical:.1f})")
        kept, expected = ours.count(draft[position - 1]), theirs.count(draft[position - 1])
        spread = np.sqrt(2 * expected * (1 - expected / n))
        assert abs(kept - expected) < 4 * spread, (
            f"token {position}: the draft was kept {kept} times of {n}, plain decoding "
            f"picks it {expected} times")
        assert 0.1 * n < expected < 0.9 * n, "the drafted token must be a real coin toss"


def homogeneity(a: list[int], b: list[int], z: float = 4.0) -> tuple[float, float]:
    """Pearson's chi-square test that two equal-sized samples share one distribution:
    (statistic, critical value at about p = 3e-5, by Wilson-Hilferty). Categories expected
    fewer than 5 times are pooled."""
    keys = sorted(set(a) | set(b))
    counts = np.array([[a.count(k), b.count(k)] for k in keys], dtype=np.float64)
    rare = counts.sum(axis=1) < 10
    if rare.any():
        counts = np.vstack([counts[~rare], counts[rare].sum(axis=0, keepdims=True)])
    expected = counts.sum(axis=1, keepdims=True) / 2
    statistic = float(((counts - expected) ** 2 / expected).sum())
    df = len(counts) - 1
    critical = df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3
    return statistic, float(critical)


# -- greedy decode loop: identical with and without a drafter ------------------------------


@pytest.mark.parametrize("options", [
    Options(temperature=0, num_predict=40),
    Options(temperature=0, num_predict=40, repeat_penalty=1.3, presence_penalty=0.4,
            frequency_penalty=0.3, repeat_last_n=16),
    Options(temperature=0, num_predict=7),                    # num_predict mid-draft
    Options(temperature=0, num_predict=-1, num_ctx=130),      # num_ctx mid-draft
], ids=["plain", "penalties", "num_predict", "num_ctx"])
def test_greedy_is_identical_with_a_drafter(tiny, options):
    prompt = repetitive(tiny)
    plain, plain_done = run(tiny, prompt, options)
    for drafter in (Recording(eager()), Recording(Fixed([7, 8, 9, 10]))):
        tokens, done = run(tiny, prompt, options, drafter)
        assert [e.id for e in tokens] == [e.id for e in plain]
        assert done.done_reason == plain_done.done_reason and done.text == plain_done.text
        for e, p in zip(tokens, plain, strict=True):
            np.testing.assert_allclose([t.logit for t in e.top], [t.logit for t in p.top],
                                       atol=1e-3)
            assert [t.id for t in e.top] == [t.id for t in p.top]
        assert done.draft_count == sum(len(d) for d, _ in drafter.rounds)
        assert done.draft_accepted == sum(k for _, k in drafter.rounds)
        assert sum(e.drafted for e in tokens) <= done.draft_accepted


def test_lookup_drafts_get_accepted_on_a_repetitive_model(tiny):
    prompt = repetitive(tiny)
    tokens, done = run(tiny, prompt, Options(temperature=0, num_predict=40), eager())
    assert done.draft_accepted > 0 and any(e.drafted for e in tokens)
    assert done.acceptance == done.draft_accepted / done.draft_count


def test_stop_string_and_stop_token_inside_a_draft(tiny):
    prompt = repetitive(tiny)
    plain, _ = run(tiny, prompt, Options(temperature=0, num_predict=30))
    text = "".join(e.text for e in plain)
    stop = text[len(text) // 2:len(text) // 2 + 3]
    options = Options(temperature=0, num_predict=30, stop=(stop,))
    expected, expected_done = run(tiny, prompt, options)
    tokens, done = run(tiny, prompt, options, Recording(eager()))
    assert [e.id for e in tokens] == [e.id for e in expected]
    assert done.text == expected_done.text and done.done_reason == "stop"

    # a stop token inside a draft the model does not want is rejected after the kept
    # prefix (test_speculation_demo has the real model keep one and stop)
    eos = next(iter(tiny.tokenizer.stop_ids))
    prefix = [e.id for e in plain[1:6]]

    class ThenStop(Fixed):
        def propose(self, context, limit):
            return ([*prefix, eos] if len(context) == len(prompt) + 1 else [])[:limit]

    fake = Recording(ThenStop([]))
    tokens, done = run(tiny, prompt, Options(temperature=0, num_predict=30), fake)
    assert [e.id for e in tokens] == [e.id for e in plain]
    assert fake.rounds[0] == [[*prefix, eos], 5]


def test_cancel_inside_a_verify_step_stops_at_once(tiny):
    prompt = repetitive(tiny)
    cancel = threading.Event()
    generator = Generator(tiny.decoder, tiny.tokenizer)
    seen = []
    for event in generator.run(prompt, Options(temperature=0, num_predict=40), cancel=cancel,
                               drafter=eager()):
        if isinstance(event, TokenEvent):
            seen.append(event)
            if event.drafted:
                cancel.set()
        else:
            done = event
    assert done.done_reason == "cancel" and seen[-1].drafted
    assert_cache_holds(tiny.decoder, prompt, seen)


def test_image_prompt_keeps_mrope_positions(tmp_path):
    """After an image the positions continue from the prompt's M-RoPE maximum: drafts
    verified at those positions give the tokens of plain decoding."""
    path = write_model(tmp_path / "vl.gguf", "qwen25vl", TextSpec(vocab=400), seed=4)
    model = load_model(path, num_ctx=512, exact=True)
    rng = np.random.default_rng(0)
    image = preprocess(Image.fromarray(rng.integers(0, 256, (56, 84, 3), np.uint8)))
    prompt = model.tokenize_chat([{"role": "user", "content": "the cat is on the mat " * 4,
                                   "images": [image]}])
    assert prompt.positions.ndim == 2 and prompt.next_position < len(prompt)
    options = Options(temperature=0, num_predict=30)
    plain, _ = run(model, prompt, options)
    tokens, done = run(model, prompt, options, eager())
    assert [e.id for e in tokens] == [e.id for e in plain]
    assert done.draft_count > 0
