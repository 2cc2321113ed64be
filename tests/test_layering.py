"""The flow is one-way: store -> gguf -> graph -> runtime -> app. engine/ never imports Qt,
and app/ never reaches into ONNX or GGUF internals."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> dict[Path, set[str]]:
    found: dict[Path, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[path] = names
    return found


def test_engine_never_imports_qt():
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in names if n.startswith("PySide"))
        for path, names in _imports("engine").items()
    }
    assert {p: n for p, n in offenders.items() if n} == {}


def test_app_never_touches_onnx_or_gguf_internals():
    forbidden = ("onnx", "onnxruntime", "gguf", "engine.graph", "engine.gguf.repack")
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden)
        )
        for path, names in _imports("app").items()
    }
    assert {p: n for p, n in offenders.items() if n} == {}
