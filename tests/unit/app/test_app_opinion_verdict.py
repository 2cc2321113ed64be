"""llama.cpp's second opinion ends in a verdict: agree or disagree against the tolerance
the cross-check uses (0.25 on |Δ logprob|), and where the largest difference is."""

import numpy as np

from app.inspector.opinion_page import opinion_verdict
from engine.inspect.lens import LensToken
from engine.inspect.second_opinion import SecondOpinion

TOKENS = ("<s>", "The", " sky", " is")


def opinion(ours: list[float], theirs: list[float], same: bool = True) -> SecondOpinion:
    a, b = LensToken(1, " blue", 9.0, 0.8), LensToken(2, " grey", 8.0, 0.1)
    return SecondOpinion("0.3", 3, (a, b), (a, b) if same else (b, a),
                         np.array(ours), np.array(theirs))


def test_within_the_tolerance_agrees():
    text = opinion_verdict(opinion([-1.0, -2.0, -3.0], [-1.05, -2.1, -3.0]), TOKENS)
    assert text.startswith("AGREE") and "0.25" in text and "position 2 (·sky)" in text


def test_past_the_tolerance_disagrees_and_says_where():
    text = opinion_verdict(opinion([-1.0, -2.0, -3.0], [-1.0, -2.0, -3.686]), TOKENS)
    assert text.startswith("DISAGREE") and "0.686 at position 3 (·is)" in text
    assert "over the tolerance 0.25" in text


def test_a_different_next_token_disagrees():
    assert opinion_verdict(opinion([-1.0], [-1.0], same=False), TOKENS[:2]).startswith(
        "DISAGREE")
