"""Tool calling: Qwen's <tool_call> format parsed, tools and results rendered through the
real Qwen templates, the built-ins, a real MCP server over stdio (and a hanging, a crashing
and a garbage-writing one survived), and the 1.5B demo model calling the calculator."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.chat.events import DoneEvent, ToolCallEvent
from engine.chat.options import Options
from engine.chat.tools import Tool, ToolCall, ToolFailed, call_from_api, parse_tool_calls
from engine.cli import main
from engine.prompt import render_prompt
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.tools import builtin
from engine.tools.mcp_client import McpServer, call_tool, list_tools, read_config
from engine.tools.toolbox import Toolbox

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
SERVER = Path(__file__).parents[2] / "fixtures" / "mcp_server.py"


def server(mode: str = "normal", ask: bool = False) -> McpServer:
    return McpServer(mode, command=sys.executable, args=(str(SERVER), mode), ask=ask)


# -- parsing ----------------------------------------------------------------------------

def test_qwen_tool_calls_are_parsed_with_the_content_before_them():
    text = ('Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": '
            '{"expression": "2*3"}}\n</tool_call>\n<tool_call>\n{"name": "current_time", '
            '"arguments": "{}"}\n</tool_call>')
    content, calls = parse_tool_calls(text)
    assert content == "Let me compute."
    assert calls == [ToolCall("calculator", {"expression": "2*3"}), ToolCall("current_time", {})]


def test_an_unclosed_last_call_is_read_and_bad_json_stays_text():
    assert parse_tool_calls('<tool_call>{"name": "f", "arguments": {"x": 1}}')[1] == [
        ToolCall("f", {"x": 1})]
    text = "I would write <tool_call>like this</tool_call>."
    assert parse_tool_calls(text) == (text, [])
    assert parse_tool_calls("no calls") == ("no calls", [])


def test_server_tool_calls_take_objects_or_json_strings():
    assert call_from_api({"function": {"name": "f", "arguments": '{"a": 2}'}}) == ToolCall(
        "f", {"a": 2})
    assert call_from_api({"function": {"name": "f", "arguments": {"a": 2}}}) == ToolCall(
        "f", {"a": 2})


# -- templates --------------------------------------------------------------------------

def conversation() -> list[dict]:
    call = ToolCall("multiply", {"a": 6, "b": 7})
    return [{"role": "user", "content": "What is 6 times 7?"},
            {"role": "assistant", "content": "", "tool_calls": [call.api()]},
            {"role": "tool", "content": "42", "tool_name": "multiply"}]


MULTIPLY = Tool("multiply", "Multiply two numbers.", {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"]})


def test_qwen_go_template_renders_tools_calls_and_results():
    text = render_prompt(conversation(), tools=[MULTIPLY.api()],
                         template_layer=(TEMPLATES / "qwen2.5-tools.gotmpl").read_text()).text
    assert "<tools>" in text and '"name":"multiply"' in text.replace(" ", "")
    assert '<tool_call>\n{"name": "multiply", "arguments": {"a":6,"b":7}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_qwen_jinja_template_renders_tools_calls_and_results(demo_15b):
    from engine.gguf.model import open_model

    template = open_model(demo_15b).config.chat_template
    text = render_prompt(conversation(), tools=[MULTIPLY.api()], chat_template=template).text
    assert "<tools>\n" + json.dumps(MULTIPLY.api(), ensure_ascii=False) + "\n</tools>" in text
    assert '<tool_call>\n{"name": "multiply", "arguments": {"a": 6, "b": 7}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>" in text


# -- built-ins --------------------------------------------------------------------------

def test_calculator_is_exact_and_runs_no_code():
    assert builtin.calculate("12345 * 6789") == "83810205"
    assert builtin.calculate("(1 + 2) / 4") == "0.75"
    for bad in ("__import__('os').system('true')", "2 ** 99999999", "1/0", "x + 1"):
        with pytest.raises(ToolFailed):
            builtin.calculate(bad)


def test_read_file_only_reads_what_the_user_shared(tmp_path):
    shared, other = tmp_path / "notes.txt", tmp_path / "secret.txt"
    shared.write_text("the notes")
    other.write_text("secret")
    box = Toolbox()
    box.add_builtins([str(shared)])
    run = box.runner()
    assert run(ToolCall("read_file", {"path": str(shared)})) == "the notes"
    with pytest.raises(ToolFailed, match="not shared"):
        run(ToolCall("read_file", {"path": str(other)}))


# -- MCP --------------------------------------------------------------------------------

def test_a_real_mcp_server_over_stdio_is_listed_and_called():
    tools = {t.name: t for t in list_tools(server())}
    assert set(tools) == {"multiply", "secret_word", "page"}
    assert tools["multiply"].parameters["required"] == ["a", "b"]
    assert call_tool(server(), "multiply", {"a": 6, "b": 7}) == "42"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_real_mcp_server_over_streamable_http_is_listed_and_called():
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "normal", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP server did not start listening"
                time.sleep(0.2)
        remote = McpServer("web", url=f"http://127.0.0.1:{port}/mcp")
        assert {t.name for t in list_tools(remote)} == {"multiply", "secret_word", "page"}
        assert call_tool(remote, "multiply", {"a": 1.5, "b": 4}) == "6"
    finally:
        process.terminate()
        process.wait(timeout=10)
    with pytest.raises(ToolFailed, match="MCP server web .* could not call multiply"):
        call_tool(remote, "multiply", {"a": 1, "b": 2}, timeout=10)


def test_config_file_and_confirmation(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"test": {
        "command": sys.executable, "args": [str(SERVER)]}}}))
    [entry] = read_config(config)
    box = Toolbox()
    box.add_server(entry)
    asked = []
    refuse = box.runner(lambda call, where: asked.append(where) or False)
    with pytest.raises(ToolFailed, match="did not allow"):
        refuse(ToolCall("secret_word", {}))
    assert asked == ["MCP server test"]
    assert box.runner(lambda call, where: True)(ToolCall("secret_word", {})) == "heliotrope"


# the crashing server must start and answer within its timeout to say why it failed
@pytest.mark.parametrize(("mode", "timeout", "message"), [
    ("hang", 1, "did not answer within 1 s"), ("garbage", 1, "did not answer within 1 s"),
    ("crash", 3, "could not call multiply: .* \\(it said: multiply: out of cheese\\)")])
def test_a_failing_server_is_a_clear_error(mode, timeout, message):
    start = time.monotonic()
    with pytest.raises(ToolFailed, match=message):
        call_tool(server(mode), "multiply", {"a": 1, "b": 2}, timeout=timeout)
    assert time.monotonic() - start < 20


def test_a_server_that_cannot_start_is_a_clear_error():
    missing = McpServer("gone", command="/nonexistent/lantern-mcp")
    with pytest.raises(ToolFailed, match="MCP server gone .* could not list its tools"):
        list_tools(missing, timeout=10)


# -- the demo model ---------------------------------------------------------------------

# without it the 1.5B coder model calls the calculator again after each result
SYSTEM = ("You are a helpful assistant. When a tool result arrives, answer the user's "
          "question with it in one sentence; never call the same tool twice.")


@pytest.fixture(scope="module")
def model_15b(demo_15b):
    return load_model(demo_15b, num_ctx=2048)


def test_the_15b_model_calls_the_calculator_and_the_loop_completes(model_15b):
    box = Toolbox()
    box.add_builtins()
    chat = LocalSession(model_15b, Options(temperature=0, num_predict=128), system=SYSTEM,
                       tools=box.tools, run_tool=box.runner())
    events = list(chat.send("What is 12345 * 6789?"))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls and calls[0].name == "calculator" and not calls[0].failed
    assert calls[0].result == "83810205"
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool", "assistant"]
    assert chat.messages[1].tool_calls[0].name == "calculator"
    prompt = model_15b.tokenizer.decode([int(i) for i in chat.last_prompt.ids])
    assert "<tool_response>\n83810205\n</tool_response>" in prompt
    done = [e for e in events if isinstance(e, DoneEvent)]
    assert done[-1].done_reason == "stop"
    assert "83810205" in chat.messages[-1].content.replace(",", "")


def test_the_15b_model_calls_an_mcp_tool_from_the_cli(demo_15b, tmp_path, capsys):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"test": {
        "command": sys.executable, "args": [str(SERVER)]}}}))
    code = main(["run", str(demo_15b), "Call the secret_word tool and tell me the word.",
                 "--system", SYSTEM, "--tools", str(config), "--yes", "--temperature", "0",
                 "--num-predict", "64"])
    out = capsys.readouterr().out
    assert code == 0
    assert "[tool] secret_word({}) -> heliotrope" in out
    assert "heliotrope" in out.split("-> heliotrope", 1)[1]


def test_session_messages_render_as_gos_text_template_does():
    """Messages and Tool records built by the chat core, through engine.prompt's conversion,
    give exactly what Go's text/template gave for the same chat (tests/go oracle)."""
    from engine.chat.messages import Message
    from engine.chat.tools import tool_from_api
    from engine.prompt import api_message

    name = "ollama/qwen2.5-tools/tools"
    cases = json.loads((TEMPLATES / "cases.json").read_text())
    case = next(c for c in cases if c["name"] == name)
    expected = json.loads((TEMPLATES / "expected.json").read_text())[name]["output"]
    messages = []
    for raw in case["data"]["messages"]:
        calls = tuple(call_from_api(c) for c in raw.get("tool_calls") or ())
        messages.append(Message(raw["role"], raw["content"], tool_calls=calls,
                                tool_name=raw.get("tool_name", "")))
    tools = [tool_from_api(t) for t in case["data"]["tools"]]
    text = render_prompt([api_message(m) for m in messages], tools=[t.api() for t in tools],
                         template_layer=(TEMPLATES / "qwen2.5-tools.gotmpl").read_text()).text
    assert text == expected


def test_cli_goes_on_without_a_server_that_cannot_start(tmp_path, capsys):
    from engine.cli.tools_option import attach_tools

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "gone": {"command": "/nonexistent/lantern-mcp"},
        "test": {"command": sys.executable, "args": [str(SERVER)]}}}))

    class Chat:
        tools: list = []
        run_tool = None
    chat = Chat()
    attach_tools(chat, [str(config), "builtin"], [], yes=False)
    assert [t.name for t in chat.tools] == ["multiply", "secret_word", "page", "calculator",
                                            "current_time"]
    assert "MCP server gone" in capsys.readouterr().err
    with pytest.raises(ToolFailed, match="did not allow"):   # no terminal, no --yes
        chat.run_tool(ToolCall("secret_word", {}))
    assert chat.run_tool(ToolCall("calculator", {"expression": "2**10"})) == "1024"
