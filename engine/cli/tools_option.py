"""`lantern run --tools builtin|mcp.json`: the tools offered, each call printed, and a
y/n on a terminal for calls that touch the outside world (refused without one unless --yes)."""

from __future__ import annotations

import json
import sys

from engine.chat.events import ToolCallEvent
from engine.chat.tool_results import cut_note
from engine.chat.tools import ToolCall, ToolFailed
from engine.tools.mcp_client import read_config
from engine.tools.toolbox import Toolbox

PREVIEW = 300   # characters of a result printed (a fetched page can be megabytes)
HELP = ("offer tools: 'builtin' (calculator, time, the --file/--share files) or an "
        "mcpServers JSON file (repeatable)")


def attach_tools(chat, specs: list[str], shared: list[str], yes: bool) -> Toolbox:
    box = Toolbox()
    for spec in specs:
        if spec == "builtin":
            box.add_builtins(shared)
            continue
        for server in read_config(spec):
            try:
                box.add_server(server)
            except ToolFailed as error:   # the others' tools are still offered
                print(f"note: {error}; its tools are left out", file=sys.stderr)
    chat.tools = box.tools
    if yes:
        chat.run_tool = box.runner(lambda call, where: True)
    else:
        chat.run_tool = box.runner(_ask if sys.stdin.isatty() else None)
    return box


def _ask(call: ToolCall, where: str) -> bool:
    print(f"\nallow {call.name}({json.dumps(call.arguments, ensure_ascii=False)}) on {where}? "
          "[y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def print_tool_call(event: ToolCallEvent) -> None:
    """The call and a preview of its result; a cut one says how much the model read."""
    status = "failed" if event.failed else "->"
    result = event.result
    if event.cut:
        result = result[:PREVIEW] + f"… {cut_note(event.shown_tokens, event.total_tokens)}"
    elif len(result) > PREVIEW:
        result = result[:PREVIEW] + f"… ({len(result)} characters)"
    print(f"\n[tool] {event.name}({json.dumps(event.arguments, ensure_ascii=False)}) "
          f"{status} {result}", flush=True)
