"""Speculation never changes a greedy answer of the real demo models, in either mode.

Fast mode (the default) builds its graph so that a verify forward of k rows gives each row
the bits of a one-token forward (engine.graph.kernels, 3.): tokens
and logits must be identical. Exact mode (fp32 activations) gives them within ~4e-5
(measured on the 0.5B), so the greedy tokens must be identical. Prompts where drafts are
kept (edit, quote, repeat: the reply copies the prompt) and where they are rejected (free
text).
"""

from __future__ import annotations

import pytest

from engine.chat.options import Options
from engine.runtime.loader import load_model
from tests.unit.runtime.test_speculation import Recording, eager, run

CODE = '''def area(w, h):
    return w * h


def describe(w, h):
    print("area", area(w, h))
'''
PROMPTS = {
    "edit": "Rename the function area to rect_area everywhere. Reply with the code only.\n\n"
            + CODE,
    "quote": "Quote this sentence word for word: The keeper climbed the stairs, trimmed "
             "the wick and wound the clockwork that turned the lens.",
    "repeat": "Repeat exactly, with nothing else: Alpha, Beta, Gamma, Delta.",
    "free": "Write a haiku about autumn.",
}


MORE_PROMPTS = [  # fast mode only, where the answer must not move by a single bit
    "Translate to French: The lamp is lit at dusk and put out at dawn.",
    "List the planets of the solar system, one per line.",
    "What is 17 * 23? Explain step by step.",
    'Return this as JSON with keys "name" and "age": Ada, 36.',
    "用一句话介绍灯塔。",
    "Fix the bug: def add(a, b): return a - b",
    "Write a Python function that reverses a string, with a docstring.",
    "Summarise in one sentence: Lighthouses guided ships past rocks for centuries, and "
    "their keepers wrote down the weather every day.",
]


def check(model, text, options):
    prompt = model.tokenize_chat([{"role": "user", "content": text}])
    plain, plain_done = run(model, prompt, options)
    drafter = Recording(eager())  # drafts at every step: many verify steps, kept and not
    tokens, done = run(model, prompt, options, drafter)
    assert [e.id for e in tokens] == [e.id for e in plain], f"answer changed for {text!r}"
    assert done.text == plain_done.text and done.done_reason == plain_done.done_reason
    tolerance = 2e-3 if model.exact else 0.0  # fast mode: the very same bits
    for e, p in zip(tokens, plain, strict=True):
        assert [t.id for t in e.top] == [t.id for t in p.top]
        assert max(abs(a.logit - b.logit) for a, b in zip(e.top, p.top, strict=True)) <= tolerance
    return tokens, done, drafter


@pytest.fixture(scope="module", params=[("0.5b", "fast"), ("0.5b", "exact"), ("1.5b", "fast"),
                                        ("1.5b", "exact")], ids="-".join)
def demo(request):
    size, mode = request.param
    path = request.getfixturevalue("demo_05b" if size == "0.5b" else "demo_15b")
    return load_model(path, num_ctx=1024, exact=mode == "exact")


def test_greedy_answers_are_identical(demo):
    options = Options(temperature=0, num_predict=32)
    stats = {}
    for name, text in PROMPTS.items():
        tokens, done, drafter = check(demo, text, options)
        stats[name] = done
        if name == "repeat":  # the copied text ends where the user's message ended
            stops = demo.tokenizer.stop_ids
            assert done.done_reason == "stop"
            kept_stop = any(set(d[:k]) & stops for d, k in drafter.rounds)
            assert kept_stop or demo.gguf.config.text.n_layers > 24, "no stop in a kept draft"
    for copying in ("edit", "quote", "repeat"):
        assert stats[copying].draft_accepted >= 3, f"{copying}: drafts were not kept"
    assert all(s.draft_accepted < s.draft_count for s in stats.values()), "none rejected"


@pytest.mark.parametrize("size", ["0.5b", "1.5b"])
def test_more_prompts_keep_their_answer_in_fast_mode(request, size):
    path = request.getfixturevalue("demo_05b" if size == "0.5b" else "demo_15b")
    model = load_model(path, num_ctx=1024)
    drafted = 0
    for text in MORE_PROMPTS:
        _, done, _ = check(model, text, Options(temperature=0, num_predict=24))
        drafted += done.draft_count
    assert drafted > 0


@pytest.mark.parametrize("exact", [False, True], ids=["fast", "exact"])
def test_penalties_stop_strings_and_num_predict(demo_05b, exact):
    model = load_model(demo_05b, num_ctx=1024, exact=exact)
    text = PROMPTS["edit"]
    check(model, text, Options(temperature=0, num_predict=40, repeat_penalty=1.2,
                               presence_penalty=0.3, frequency_penalty=0.2))
    _, done, _ = check(model, text, Options(temperature=0, num_predict=60, stop=("w * h",)))
    assert done.done_reason == "stop"
    _, done, drafter = check(model, text, Options(temperature=0, num_predict=13))
    assert done.eval_count == 13 and drafter.rounds
