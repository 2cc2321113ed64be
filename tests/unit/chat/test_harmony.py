"""gpt-oss's harmony replies split into thinking, answer and tool calls, whatever the deltas."""

from __future__ import annotations

import pytest

from engine.chat.harmony import HarmonyParser, HarmonySplit
from engine.chat.tools import ToolCall

ANSWER = ("<|channel|>analysis<|message|>The user greets; reply briefly.<|end|>"
          "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?")
CALL = ("<|channel|>analysis<|message|>Need the weather tool.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location": "San Francisco", "unit": "c"}')


def parse(reply: str, cuts: list[int] | None = None) -> tuple[str, str, list[ToolCall]]:
    """Feed ``reply`` cut at ``cuts`` (default: one character at a time)."""
    if cuts is None:
        cuts = list(range(1, len(reply)))
    bounds = [0, *cuts, len(reply)]
    parser = HarmonyParser()
    splits = [parser.push(reply[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    splits.append(parser.flush())
    return ("".join(s.thinking for s in splits), "".join(s.answer for s in splits),
            parser.calls)


@pytest.mark.parametrize("cuts", [None, [], [3, 15, 40, 41, 77]])
def test_analysis_is_thinking_and_final_the_answer(cuts):
    thinking, answer, calls = parse(ANSWER, cuts)
    assert thinking == "The user greets; reply briefly."
    assert answer == "Hello! How can I help?"
    assert calls == []


@pytest.mark.parametrize("cuts", [None, []])
def test_a_commentary_message_to_a_function_is_a_call(cuts):
    thinking, answer, calls = parse(CALL + "<|call|>", cuts)
    assert thinking == "Need the weather tool."
    assert answer == ""
    assert calls == [ToolCall("get_weather", {"location": "San Francisco", "unit": "c"})]


def test_the_stop_token_may_be_missing_and_the_recipient_may_precede_the_channel():
    reply = ('<|channel|>analysis<|message|>hm<|end|><|start|>assistant to=functions.add'
             '<|channel|>commentary json<|message|>{"a": 1, "b": 2}')
    assert parse(reply) == ("hm", "", [ToolCall("add", {"a": 1, "b": 2})])


def test_commentary_without_a_recipient_is_shown_with_the_answer():
    reply = ("<|channel|>commentary<|message|>Let me check. <|end|>"
             "<|start|>assistant<|channel|>final<|message|>Done.<|return|>")
    assert parse(reply) == ("", "Let me check. Done.", [])


def test_arguments_that_are_not_an_object_stay_text():
    reply = "<|channel|>commentary to=functions.add<|message|>not json<|call|>"
    assert parse(reply) == ("", "not json", [])


def test_a_partial_marker_is_held_until_decided():
    parser = HarmonyParser()
    assert parser.push("<|channel|>final<|message|>a <") == HarmonySplit(answer="a ")
    assert parser.push("b") == HarmonySplit(answer="<b")
    assert parser.push("<|re") == HarmonySplit()
    assert parser.push("turn|>") == HarmonySplit()
    assert parser.flush() == HarmonySplit()
