"""Stop strings straddling token boundaries are never shown, not even in part."""

import pytest

from engine.runtime.stops import StopMatcher


def feed(stops, deltas):
    matcher = StopMatcher(stops)
    shown, stopped = [], False
    for delta in deltas:
        result = matcher.push(delta)
        shown.append(result.text)
        if result.stopped:
            stopped = True
            break
    if not stopped:
        shown.append(matcher.flush())
    return shown, stopped


def test_stop_split_across_three_tokens_is_never_shown():
    shown, stopped = feed(["</answer>"], ["The answer is 4", "</ans", "wer", ">more"])
    assert stopped
    assert "".join(shown) == "The answer is 4"
    assert all("<" not in piece for piece in shown)


def test_partial_prefix_that_does_not_complete_is_released():
    shown, stopped = feed(["STOP"], ["a ST", "OR", "Y"])
    assert not stopped
    assert shown == ["a ", "STOR", "Y", ""]


def test_prefix_held_until_flush_at_end_of_generation():
    shown, stopped = feed(["\n\nUser:"], ["Hi", "\n\n"])
    assert not stopped
    assert shown == ["Hi", "", "\n\n"]


def test_earliest_of_several_stops_wins():
    shown, stopped = feed(["world", "lo w"], ["hello world"])
    assert stopped
    assert "".join(shown) == "hel"


@pytest.mark.parametrize("stops", [[], [""]])
def test_no_stops_passes_text_through(stops):
    shown, stopped = feed(stops, ["a", "b"])
    assert not stopped
    assert "".join(shown) == "ab"


def test_stop_inside_a_single_delta_cuts_the_rest():
    shown, stopped = feed(["<|user|>"], ["ok<|user|>ignored"])
    assert stopped and shown == ["ok"]
