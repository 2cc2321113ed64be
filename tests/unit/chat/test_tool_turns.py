"""A tool turn on a real (tiny) model: the call's text stays out of the answer, a result
too big for the context is cut and the answer goes on. The decode loop's output is fixed
(tests/fixtures/scripted_answers.py); rendering, fitting, the tool loop, the real MCP
server and the CLI run as they do on a real model."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from engine.chat.events import DoneEvent, TokenEvent, ToolCallEvent
from engine.chat.options import Options
from engine.chat.tool_results import CUT_NOTE, cut_to_fit
from engine.cli import main
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.tools.mcp_client import McpServer
from engine.tools.toolbox import Toolbox
from tests.fixtures.scripted_answers import script_answers

SERVER = Path(__file__).parents[2] / "fixtures" / "mcp_server.py"
BIG = 2_000_000                 # characters: a fetched page, a whole file
NUM_CTX = 4096
PAGE_CALL = f'<tool_call>\n{{"name": "page", "arguments": {{"size": {BIG}}}}}\n</tool_call>'


@pytest.fixture(scope="module")
def tiny(synthetic_gguf) -> Path:
    return synthetic_gguf()


@pytest.fixture(scope="module")
def tiny_model(tiny):
    return load_model(tiny, num_ctx=NUM_CTX)


def mcp_box() -> Toolbox:
    box = Toolbox()
    box.add_server(McpServer("test", command=sys.executable, args=(str(SERVER),), ask=False))
    return box


def test_a_2mb_tool_result_is_cut_to_fit_and_the_answer_goes_on(tiny_model, monkeypatch):
    prompts = script_answers(monkeypatch, [["Let me fetch it.\n", PAGE_CALL], ["It is a page."]])
    box = mcp_box()
    chat = LocalSession(tiny_model, Options(num_ctx=NUM_CTX), tools=box.tools,
                       run_tool=box.runner())
    events = list(chat.send("What is on the page?"))
    call = next(e for e in events if isinstance(e, ToolCallEvent))
    assert call.cut and call.total_tokens > 100_000 and 0 < call.shown_tokens < NUM_CTX
    assert call.result.endswith(f"[cut: {call.shown_tokens} of {call.total_tokens} tokens shown]")
    assert call.result.startswith("The quick brown fox")
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool", "assistant"]
    assert chat.messages[2].content == call.result            # what the model reads
    assert prompts[1] + 256 <= NUM_CTX                          # room left for the answer
    done = [e for e in events if isinstance(e, DoneEvent)]
    assert done[-1].done_reason == "stop" and chat.messages[-1].content == "It is a page."


def test_results_that_fit_are_whole_and_several_share_the_room(tiny_model, monkeypatch):
    calls = "".join(f'<tool_call>{{"name": "page", "arguments": {{"size": {size}}}}}</tool_call>'
                    for size in (100, 9000, 9000))
    prompts = script_answers(monkeypatch, [[calls], ["Done."]])
    box = mcp_box()
    chat = LocalSession(tiny_model, Options(num_ctx=NUM_CTX, num_predict=100), tools=box.tools,
                       run_tool=box.runner())
    results = [e for e in chat.send("Read three pages.") if isinstance(e, ToolCallEvent)]
    assert not results[0].cut and results[0].shown_tokens == results[0].total_tokens
    assert len(results[0].result) == 100
    assert results[1].cut and results[2].cut
    assert results[2].shown_tokens < results[1].shown_tokens    # what the first two left
    assert NUM_CTX - 100 - 40 <= prompts[1] + 100 <= NUM_CTX + 40  # used, not overrun


def test_lantern_run_previews_a_big_result_and_shows_no_call_text(tiny, tmp_path, capsys,
                                                                   monkeypatch):
    script_answers(monkeypatch, [[PAGE_CALL[:9], PAGE_CALL[9:]], ["It is a page."]])
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"test": {
        "command": sys.executable, "args": [str(SERVER)]}}}))
    code = main(["run", str(tiny), "What is on the page?", "--tools", str(config), "--yes",
                 "--num-ctx", str(NUM_CTX)])
    out = capsys.readouterr().out
    assert code == 0
    assert len(out) < 2000 and "<tool_call>" not in out and '"size"' not in out.split("[tool]")[0]
    assert "[tool] page({\"size\": 2000000}) -> The quick brown fox" in out
    assert "tokens shown]" in out and out.rstrip().endswith("It is a page.")


def test_a_cut_ends_on_a_whole_character():
    text = "é" * 30                                  # one token per byte: each "é" is two
    note = len(CUT_NOTE.format(shown=60, total=60).encode())
    result = cut_to_fit(text, note + 9, lambda t: list(t.encode()),
                        lambda ids: bytes(ids).decode(errors="replace"))
    assert result.cut and (result.shown, result.total) == (9, 60)
    assert result.text == "éééé" + CUT_NOTE.format(shown=9, total=60)


def test_tool_call_text_never_streams_from_a_real_session(tiny_model, monkeypatch):
    fenced = '```json\n{"name": "secret_word", "arguments": {}}\n```'
    script_answers(monkeypatch, [list(fenced), ["The word is heliotrope."]])
    box = mcp_box()
    chat = LocalSession(tiny_model, Options(num_ctx=NUM_CTX), tools=box.tools,
                       run_tool=box.runner())
    events = list(chat.send("What is the secret word?"))
    streamed = "".join(e.text for e in events if isinstance(e, TokenEvent))
    streamed += "".join(e.tail for e in events if isinstance(e, DoneEvent))
    assert streamed == "The word is heliotrope."
    assert [e.result for e in events if isinstance(e, ToolCallEvent)] == ["heliotrope"]
    assert [e.text for e in events if isinstance(e, DoneEvent)] == ["", "The word is heliotrope."]


HARMONY_TEMPLATE = ("{{ range .Messages }}<|start|>{{ .Role }}<|message|>{{ .Content }}<|end|>"
                    "{{ end }}<|start|>assistant")


HARMONY_REPLIES = [
    ["<|channel|>", "analysis", "<|message|>", "Need the ", "page.", "<|end|>",
     "<|start|>", "assistant", "<|channel|>", "commentary to=functions.page",
     " <|constrain|>json", "<|message|>", '{"size": ', "100}"],
    ["<|channel|>analysis<|message|>Got it.<|end|><|start|>assistant<|channel|>final",
     "<|message|>", "It is a page."]]


@pytest.mark.parametrize("template", ["go", "gpt-oss.jinja"])
def test_a_harmony_reply_thinks_calls_and_answers(tiny, monkeypatch, template):
    """gpt-oss's channels: analysis is thinking, a commentary message to functions.page a
    call the tool loop runs, final the answer; with gpt-oss's own template the next prompt
    holds the call, its thinking and its result as harmony messages."""
    model = load_model(tiny, num_ctx=NUM_CTX)
    if template == "go":
        model.template = HARMONY_TEMPLATE
    else:
        source = (Path(__file__).parents[2] / "data" / "templates" / template).read_text()
        model.gguf = dataclasses.replace(model.gguf, config=dataclasses.replace(
            model.gguf.config, chat_template=source))
    script_answers(monkeypatch, [list(reply) for reply in HARMONY_REPLIES])
    box = mcp_box()
    chat = LocalSession(model, Options(num_ctx=NUM_CTX), tools=box.tools, run_tool=box.runner())
    events = list(chat.send("What is on the page?"))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert "".join(e.thinking_text for e in tokens) == "Need the page.Got it."
    assert "".join(e.text for e in tokens) == "It is a page."
    [call] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert len(call.result) == 100
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool", "assistant"]
    assert [c.api() for c in chat.messages[1].tool_calls] == [
        {"function": {"name": "page", "arguments": {"size": 100}}}]
    assert chat.messages[1].thinking == "Need the page." and chat.messages[1].content == ""
    assert chat.messages[-1].content == "It is a page."
    if template != "go":
        second = model.tokenizer.decode([int(i) for i in chat.last_prompt.ids])
        assert ("<|start|>assistant<|channel|>analysis<|message|>Need the page.<|end|>"
                "<|start|>assistant to=functions.page<|channel|>commentary json<|message|>"
                '{"size": 100}<|call|><|start|>functions.page to=assistant<|channel|>'
                "commentary<|message|>") in second
        assert second.endswith("<|end|><|start|>assistant")
