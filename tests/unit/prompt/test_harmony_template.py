"""gpt-oss's own chat template (tests/data/templates/gpt-oss.jinja), rendered through
``render_prompt`` as a GGUF's Jinja template and by transformers' renderer: the strings must
be identical, with Ollama's ``think`` levels arriving as the template's reasoning effort."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.prompt import render_prompt

SOURCE = (Path(__file__).parents[2] / "data" / "templates" / "gpt-oss.jinja").read_text()
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "The city"},
        "unit": {"type": "string", "enum": ["c", "f"]}}}}}]
CHATS = {
    "user": [{"role": "user", "content": "Write hello world in C."}],
    "system": [{"role": "system", "content": "Answer in French."},
               {"role": "user", "content": "Hi"}],
    "developer": [{"role": "developer", "content": "Be terse."},
                  {"role": "user", "content": "Hi"}],
    "multi-turn": [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello!", "thinking": "Greet back."},
                   {"role": "user", "content": "Bye"}],
    "tool-calls": [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "", "thinking": "Use the tool.",
                    "tool_calls": [{"function": {"name": "get_weather",
                                                 "arguments": {"city": "Paris"}}}]},
                   {"role": "tool", "content": '{"temp": 20}'}],
}


def transformers_render(messages, tools, **extra) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([messages], tools=tools, chat_template=SOURCE,
                                        add_generation_prompt=True, **extra)
    return rendered[0]


@pytest.mark.parametrize("chat", CHATS)
@pytest.mark.parametrize("with_tools", [False, True])
def test_renders_as_transformers_does(chat, with_tools):
    tools = TOOLS if with_tools else None
    ours = render_prompt(CHATS[chat], chat_template=SOURCE, tools=tools).text
    assert ours == transformers_render(CHATS[chat], tools)
    assert ours.endswith("<|start|>assistant") and "Reasoning: medium" in ours
    assert ("namespace functions" in ours) is with_tools


@pytest.mark.parametrize("think", ["low", "medium", "high"])
def test_think_levels_are_the_reasoning_effort(think):
    chat = CHATS["user"]
    ours = render_prompt(chat, chat_template=SOURCE, think=think).text
    assert ours == transformers_render(chat, None, reasoning_effort=think)
    assert f"Reasoning: {think}\n" in ours


@pytest.mark.parametrize("think", [True, False])
def test_think_on_or_off_keeps_the_default_effort(think):
    assert "Reasoning: medium\n" in render_prompt(CHATS["user"], chat_template=SOURCE,
                                                  think=think).text
