"""Tools the chat offers a model: safe built-ins and MCP servers' tools (engine.tools.toolbox)."""
