"""Built-in tools that need no server: arithmetic, the time, a file the user picked.

The calculator walks the expression's syntax tree and allows numbers and arithmetic
operators only (no names, calls or attributes), so a model cannot run code through it.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from engine.chat.tools import Tool, ToolFailed

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_POWER = 10_000      # 9**9**9 would hang the worker
_READ_LIMIT = 100_000    # characters of a file returned to the model

CALCULATOR = Tool("calculator", "Evaluate an arithmetic expression (+ - * / // % ** and "
                  "parentheses) and return the exact result.",
                  {"type": "object", "properties": {"expression": {
                      "type": "string", "description": "the expression, in Python syntax"}},
                   "required": ["expression"]})
CURRENT_TIME = Tool("current_time", "The current local date and time (ISO 8601).",
                    {"type": "object", "properties": {}})
READ_FILE = Tool("read_file", "Read a text file the user has shared with you.",
                 {"type": "object", "properties": {"path": {
                     "type": "string", "description": "the file's path as the user gave it"}},
                  "required": ["path"]})


def calculate(expression: str) -> str:
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolFailed(f"not an arithmetic expression: {expression!r}") from None
    try:
        value = _evaluate(tree.body)
    except ZeroDivisionError:
        raise ToolFailed("division by zero") from None
    except OverflowError:
        raise ToolFailed("the result is too large") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return str(value)


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER:
            raise ToolFailed(f"the exponent {right} is too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ToolFailed("only numbers, + - * / // % ** and parentheses are allowed")


def current_time() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


class FileReader:
    """read_file limited to the files the user picked (command line or file dialog)."""

    def __init__(self, paths: Iterable[str | Path] = ()) -> None:
        self.allowed = {Path(p).resolve() for p in paths}

    def allow(self, path: str | Path) -> None:
        self.allowed.add(Path(path).resolve())

    def read(self, path: str) -> str:
        resolved = Path(path).resolve()
        if resolved not in self.allowed:
            names = ", ".join(sorted(str(p) for p in self.allowed)) or "none"
            raise ToolFailed(f"{path} was not shared by the user (shared files: {names})")
        try:
            text = resolved.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise ToolFailed(f"cannot read {path}: {error.strerror}") from None
        return text[:_READ_LIMIT]
