"""The tool-calling loop both chat sessions run: answer; while the answer calls tools, run
each through the front end's callback, add its result as a "tool" message (cut to the
room the context has left, engine.chat.tool_results), answer again."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import replace

from engine.chat.events import DoneEvent, Event, NoticeEvent, ToolCallEvent
from engine.chat.messages import Message
from engine.chat.tool_results import FitResult, ToolResult
from engine.chat.tools import Tool, ToolCall, ToolFailed, parse_tool_calls

RunTool = Callable[[ToolCall], str]


def answer_with_tools(answer: Callable[[], Generator[Event, None, DoneEvent | None]],
                      messages: list[Message], tools: list[Tool], run_tool: RunTool | None,
                      max_rounds: int, fit: FitResult | None = None) -> Iterator[Event]:
    """``answer`` yields one answer's events, appends it to ``messages`` and returns its
    DoneEvent; a server's parsed calls may already be on that message. ``fit`` cuts a
    result to what the context has room for."""
    for _ in range(max_rounds + 1):
        done = yield from answer()
        finished = done is not None and done.done_reason in ("stop", "tool_calls")  # OpenAI's
        calls = take_tool_calls(messages, tools) if finished else []
        if not calls:
            return
        for call in calls:
            yield run_call(call, messages, run_tool, fit)
    yield NoticeEvent(f"stopped after {max_rounds} rounds of tool calls")


def take_tool_calls(messages: list[Message], tools: list[Tool]) -> list[ToolCall]:
    """The last answer's tool calls, recorded on its message (content before them kept)."""
    if not tools or not messages or messages[-1].role != "assistant":
        return []
    if messages[-1].tool_calls:
        return list(messages[-1].tool_calls)
    content, calls = parse_tool_calls(messages[-1].content, {tool.name for tool in tools})
    if calls:
        messages[-1] = replace(messages[-1], content=content, tool_calls=tuple(calls))
    return calls


def run_call(call: ToolCall, messages: list[Message], run_tool: RunTool | None,
             fit: FitResult | None = None) -> ToolCallEvent:
    failed = False
    if run_tool is None:
        result, failed = f"tool {call.name} is not available here", True
    else:
        try:
            result = run_tool(call)
        except ToolFailed as error:
            result, failed = f"error: {error}", True
    message = Message("tool", result, tool_name=call.name)
    fitted = fit(message) if fit is not None else ToolResult(result, 0, 0)
    messages.append(replace(message, content=fitted.text))
    return ToolCallEvent(call.name, call.arguments, fitted.text, failed,
                         fitted.shown, fitted.total)
