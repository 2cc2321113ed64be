"""Tools through remote engines: the request carries the tools, the conversation's calls
and results in each API's shape, and the server's parsed calls are read back (Ollama: an
object per call; OpenAI: streamed in pieces by index, arguments as a JSON string)."""

import json

from engine.chat.options import Options
from engine.chat.tools import Tool, ToolCall
from engine.remote import ollama_api, openai_api
from engine.remote.records import Delta, Finish

TOOL = Tool("multiply", "Multiply.", {"type": "object", "properties": {
    "a": {"type": "number"}, "b": {"type": "number"}}})
CALL = ToolCall("multiply", {"a": 6, "b": 7})
MESSAGES = [{"role": "user", "content": "6*7?"},
            {"role": "assistant", "content": "", "tool_calls": (CALL,)},
            {"role": "tool", "content": "42", "tool_name": "multiply"}]


def test_ollama_request_and_streamed_calls():
    body = ollama_api.chat_body("m", MESSAGES, Options(), 0, tools=[TOOL.api()])
    assert body["tools"] == [TOOL.api()]
    assert body["messages"][1]["tool_calls"] == [
        {"function": {"name": "multiply", "arguments": {"a": 6, "b": 7}}}]
    assert body["messages"][2] == {"role": "tool", "content": "42", "tool_name": "multiply"}
    lines = [json.dumps({"message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "multiply", "arguments": {"a": 2, "b": 3}}}]},
                "done": False}).encode(),
             json.dumps({"message": {"content": ""}, "done": True,
                         "done_reason": "stop"}).encode()]
    items = list(ollama_api.parse_stream(lines, "h"))
    assert items[0] == Delta("", (), (ToolCall("multiply", {"a": 2, "b": 3}),))
    assert isinstance(items[1], Finish)


def test_openai_request_and_streamed_call_pieces():
    body = openai_api.chat_body("m", MESSAGES, Options(), 0, tools=[TOOL.api()])
    assert body["tools"] == [TOOL.api()]
    call = body["messages"][1]["tool_calls"][0]
    assert call["id"] == "call_0" and json.loads(call["function"]["arguments"]) == CALL.arguments
    assert body["messages"][2]["tool_call_id"] == "call_0"
    pieces = [{"index": 0, "id": "x", "function": {"name": "multiply", "arguments": '{"a": 2'}},
              {"index": 0, "function": {"arguments": ', "b": 3}'}}]
    lines = [b"data: " + json.dumps({"choices": [{"delta": {"tool_calls": [p]},
                                                  "finish_reason": None}]}).encode()
             for p in pieces]
    lines += [b'data: {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}',
              b"data: [DONE]"]
    items = list(openai_api.parse_stream(lines, "h"))
    assert items[0].tool_calls == (ToolCall("multiply", {"a": 2, "b": 3}),)
    assert items[-1].reason == "tool_calls"
