"""The tools one chat offers and how a call reaches them: built-ins run here, MCP tools
on their server. Whether a call needs the user's yes is said here; asking is the front
end's (a y/n prompt, a dialog), passed in as ``confirm``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine.chat.tools import Tool, ToolCall, ToolFailed
from engine.tools import builtin, mcp_client
from engine.tools.mcp_client import McpServer

Confirm = Callable[[ToolCall, str], bool]   # (call, where it runs) -> allowed?


@dataclass
class Toolbox:
    tools: list[Tool] = field(default_factory=list)
    files: builtin.FileReader = field(default_factory=builtin.FileReader)
    _servers: dict[str, McpServer] = field(default_factory=dict)   # tool name -> its server
    _local: dict[str, Callable[[dict], str]] = field(default_factory=dict)

    def add_builtins(self, files: Iterable[str] = ()) -> None:
        """Calculator and time always; read_file when the user shared files."""
        for path in files:
            self.files.allow(path)
        self._add(builtin.CALCULATOR, lambda a: builtin.calculate(str(a.get("expression", ""))))
        self._add(builtin.CURRENT_TIME, lambda a: builtin.current_time())
        if self.files.allowed:
            self._add(builtin.READ_FILE, lambda a: self.files.read(str(a.get("path", ""))))

    def add_server(self, server: McpServer, timeout: float = mcp_client.TIMEOUT) -> list[Tool]:
        """List a server's tools and offer them; raises ToolFailed when it cannot list."""
        tools = mcp_client.list_tools(server, timeout)
        for tool in tools:
            if tool.name not in self._servers and tool.name not in self._local:
                self.tools.append(tool)
                self._servers[tool.name] = server
        return tools

    def _add(self, tool: Tool, run: Callable[[dict], str]) -> None:
        if tool.name not in self._local:
            self.tools.append(tool)
            self._local[tool.name] = run

    def needs_confirmation(self, call: ToolCall) -> bool:
        """MCP tools touch the outside world unless their server is always allowed."""
        server = self._servers.get(call.name)
        return server is not None and server.ask

    def where(self, call: ToolCall) -> str:
        server = self._servers.get(call.name)
        return f"MCP server {server.name}" if server else "built in"

    def runner(self, confirm: Confirm | None = None,
               timeout: float = mcp_client.TIMEOUT) -> Callable[[ToolCall], str]:
        """LocalSession.run_tool: a call needing confirmation is refused without a yes."""
        def run(call: ToolCall) -> str:
            if self.needs_confirmation(call) and not (confirm and confirm(call, self.where(call))):
                raise ToolFailed(f"the user did not allow {call.name}")
            if call.name in self._local:
                return self._local[call.name](call.arguments)
            if call.name in self._servers:
                return mcp_client.call_tool(self._servers[call.name], call.name,
                                            call.arguments, timeout)
            raise ToolFailed(f"there is no tool named {call.name}")
        return run
