"""llama.cpp's second opinion ends in a verdict: agree or disagree against the tolerance
the cross-check uses (0.25 on |Δ logprob|), what was measured, where the largest difference
is and how far past the tolerance, and whether a different next token is a near tie."""

import numpy as np

from app.inspector.opinion_page import opinion_verdict
from engine.inspect.lens import LensToken
from engine.inspect.second_opinion import SecondOpinion

TOKENS = ("<s>", "The", " sky", " is")


def opinion(ours: list[float], theirs: list[float], same: bool = True,
            runner_up: float = 8.0) -> SecondOpinion:
    a, b = LensToken(1, " blue", 9.0, 0.8), LensToken(2, " grey", runner_up, 0.1)
    return SecondOpinion("0.3", 3, (a, b), (a, b) if same else (b, a),
                         np.array(ours), np.array(theirs))


def test_within_the_tolerance_agrees():
    text, agree = opinion_verdict(opinion([-1.0, -2.0, -3.0], [-1.05, -2.1, -3.0]), TOKENS)
    assert agree and text.startswith("AGREE") and "0.25" in text
    assert "position 2 (“·sky”)" in text and "Measured:" in text


def test_past_the_tolerance_disagrees_says_where_and_how_far():
    text, agree = opinion_verdict(opinion([-1.0, -2.0, -3.0], [-1.0, -2.0, -3.686]), TOKENS)
    assert not agree and text.startswith("DISAGREE")
    assert "0.686 at position 3 (“·is”) is 2.7x the tolerance 0.25" in text
    assert "Numeric" in text and "Measured:" in text


def test_a_different_next_token_disagrees_and_says_whether_it_is_a_near_tie():
    text, agree = opinion_verdict(opinion([-1.0], [-1.0], same=False), TOKENS[:2])
    assert not agree and text.startswith("DISAGREE on the next token")
    assert "“·blue”" in text and "“·grey”" in text and "not a near tie" in text
    text, _ = opinion_verdict(opinion([-1.0], [-1.0], same=False, runner_up=8.95), TOKENS[:2])
    assert "a near tie" in text and "not a near tie" not in text
