"""A Go text/template interpreter, faithful to Go where Ollama's chat templates reach.

Ollama stores a model's prompt format as Go text/template source (the `template`
layer) and executes it with ``Option("missingkey=zero")`` and a few extra functions;
rendering it any other way changes the prompt the model sees. See values.py for how
Python values stand in for Go's.
"""

from typing import Any

from engine.prompt.gotemplate.executor import execute
from engine.prompt.gotemplate.parser import Tree, parse

__all__ = ["Tree", "parse", "render", "execute"]


def render(source: str, data: Any, *, missing_key: str = "zero") -> str:
    """Parse and execute ``source`` on ``data``; TemplateError names line and column.

    ``missing_key`` is Go's missingkey option: "zero" (Ollama's), "default" or "error".
    """
    return execute(parse(source), data, missing_key)
