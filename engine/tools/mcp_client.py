"""MCP servers' tools through the official `mcp` SDK, over stdio or streamable HTTP.

Each listing or call opens its own connection (a stdio server is started and stopped
around it): a server that crashed, hung or answered garbage last time is simply started
again next time, and nothing is left running between answers. Every failure becomes a
ToolFailed in neutral words, so the chat goes on with the failure as the tool's result.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from engine.chat.tools import Tool, ToolFailed

_T = TypeVar("_T")
TIMEOUT = 30.0   # seconds for a whole listing or call, the server's start included


@dataclass(frozen=True)
class McpServer:
    """One entry of the common ``{"mcpServers": {name: {...}}}`` configuration."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    ask: bool = True            # confirm each call with the user ("always allow": False)

    @property
    def where(self) -> str:
        return self.url or " ".join([self.command or "", *self.args])


def read_config(path: str | Path) -> list[McpServer]:
    """Servers from an mcpServers JSON file (Claude Desktop's, Cursor's, LM Studio's shape)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ToolFailed(f"cannot read {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ToolFailed(f"{path} is not JSON (line {error.lineno}: {error.msg})") from None
    servers = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(servers, dict):
        raise ToolFailed(f'{path} has no "mcpServers" object')
    return [server_from_entry(name, entry, source=str(path)) for name, entry in servers.items()]


def server_from_entry(name: str, entry: Any, source: str = "the configuration") -> McpServer:
    if not isinstance(entry, dict) or not (entry.get("command") or entry.get("url")):
        raise ToolFailed(f'MCP server "{name}" in {source} needs a "command" or a "url"')
    return McpServer(name, command=entry.get("command"),
                     args=tuple(str(a) for a in entry.get("args") or ()),
                     env={str(k): str(v) for k, v in (entry.get("env") or {}).items()},
                     url=entry.get("url"), ask=not entry.get("alwaysAllow", False))


def list_tools(server: McpServer, timeout: float = TIMEOUT) -> list[Tool]:
    async def work(client) -> list[Tool]:
        result = await client.list_tools()
        return [Tool(t.name, t.description or "", dict(t.input_schema)) for t in result.tools]
    return _run(server, work, timeout, "list its tools")


def call_tool(server: McpServer, name: str, arguments: dict,
              timeout: float = TIMEOUT) -> str:
    """The call's result as text for the model; a tool's own error is a ToolFailed too."""
    async def work(client) -> str:
        result = await client.call_tool(name, arguments)
        text = "\n".join(_block_text(block) for block in result.content)
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        if result.is_error:
            raise ToolFailed(f"{name} on {server.name} failed: {text or 'no reason given'}")
        return text
    return _run(server, work, timeout, f"call {name}")


def _block_text(block: Any) -> str:
    text = getattr(block, "text", None)
    return text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]"


def _run(server: McpServer, work: Callable[[Any], Awaitable[_T]], timeout: float,
         doing: str) -> _T:
    """A stdio server's stderr goes to a file of its own (the app may have no console);
    its last line joins the message when the server fails."""
    from mcp import Client, StdioServerParameters  # the SDK loads only when tools are used
    from mcp.client.stdio import stdio_client

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        async def session() -> _T:
            with anyio.fail_after(timeout):
                target: Any = server.url or stdio_client(StdioServerParameters(
                    command=server.command or "", args=list(server.args),
                    env={**os.environ, **server.env}), errlog=errlog)
                async with Client(target, raise_exceptions=True) as client:
                    return await work(client)

        try:
            return anyio.run(session)
        except ToolFailed:
            raise
        except TimeoutError:
            raise ToolFailed(f"MCP server {server.name} did not answer within {timeout:g} s "
                             f"when asked to {doing}") from None
        except Exception as error:  # noqa: BLE001 - a server's failure is reported, never fatal
            said = _last_line(errlog)
            raise ToolFailed(f"MCP server {server.name} ({server.where}) could not {doing}: "
                             f"{_reason(error)}" + (f" (it said: {said})" if said else "")
                             ) from None


def _last_line(log) -> str:
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _reason(error: BaseException) -> str:
    """The innermost cause in a few words (task groups wrap errors in groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
