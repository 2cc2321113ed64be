"""A tool call's text never reaches the streamed answer (engine.chat.call_holder)."""

from __future__ import annotations

import pytest

from engine.chat.call_holder import CallHolder
from engine.chat.events import DoneEvent, TokenEvent

NAMES = {"get_weather", "calculator"}
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def stream(pieces: list[str], names=NAMES) -> tuple[list[str], DoneEvent]:
    """The text each token carries after the holder, and the DoneEvent."""
    holder = CallHolder(names)
    shown = [holder.apply(TokenEvent(i, i, p, p, 0.0, 0.0, 0.0, (), 1)).text
             for i, p in enumerate(pieces)]
    done = holder.apply(DoneEvent("stop", "".join(pieces), "", 1, 1, len(pieces), 1, 0, 1))
    return shown, done


def pieces_of(text: str, size: int = 3) -> list[str]:
    return [text[at:at + size] for at in range(0, len(text), size)]


@pytest.mark.parametrize("answer", [
    f"<tool_call>\n{CALL}\n</tool_call>",
    f"```json\n{CALL}\n```",
    f"```\n{CALL}\n```\n",
    f"  {CALL}",
    f"{CALL}\n{CALL}",
    '```json\n{"name": "get_weather", "arguments": {"city": "P}a\\"r]i{s"}}\n```',
])
@pytest.mark.parametrize("size", [1, 3])
def test_a_call_in_tags_a_fence_or_bare_is_never_streamed(answer, size):
    shown, done = stream(pieces_of(answer, size))
    assert "".join(shown) == "" and done.tail == "" and done.text == ""


@pytest.mark.parametrize("size", [1, 2, 7, 40])
def test_prose_before_a_tagged_call_streams_and_the_call_does_not(size):
    answer = f"Let me look that up.\n<tool_call>\n{CALL}\n</tool_call>"
    shown, done = stream(pieces_of(answer, size))
    assert "".join(shown) + done.tail == "Let me look that up.\n"
    assert done.text == "Let me look that up.\n"
    assert all("<" not in piece for piece in shown)      # no piece of the tag flickers in


@pytest.mark.parametrize("answer", [
    'Call it as {"name": "get_weather"} with a city, and read the JSON back.',
    '{"temperature": 21, "unit": "C"}',
    '```python\nprint({"name": "get_weather"})\n```',
    "I would write <tool_call>like this</tool_call>.",
    'Use <tool so: {"name": "x"}',
])
def test_prose_and_json_that_are_not_calls_stay_the_answer(answer):
    shown, done = stream(pieces_of(answer))
    assert "".join(shown) + done.tail == answer and done.text == answer


def test_text_that_is_no_call_is_released_as_soon_as_that_is_known():
    shown, _ = stream(["Sure", ", it is sunny."])
    assert shown == ["Sure", ", it is sunny."]
    shown, _ = stream(['{"temperature": 21}', " is the reading"])
    assert shown == ['{"temperature": 21}', " is the reading"]   # the object named no tool
    shown, _ = stream(['{"note": "a } and a \\" in a string"', ", ", '"n": 1}', " more"])
    assert shown == ["", "", '{"note": "a } and a \\" in a string", "n": 1}', " more"]
    shown, _ = stream(["```", "python\n", "x = 1"])
    assert shown == ["", "", "```python\nx = 1"]


def test_without_tools_nothing_is_held():
    answer = f"<tool_call>{CALL}</tool_call>"
    shown, done = stream([answer], names=())
    assert shown == [answer] and done.text == answer
