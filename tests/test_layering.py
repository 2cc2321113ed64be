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


def test_lantern_run_imports_no_test_oracles_or_qt():
    """Every `lantern run` pays for its imports before the model loads: the numerical
    oracles (torch, transformers) and Qt must stay out of that path."""
    import subprocess
    import sys

    probe = ("import sys; from engine.cli import build_parser; build_parser(); "
             "import engine.runtime.loader, engine.runtime.chat; "
             "print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split())
    assert "engine" in loaded  # the probe really imported the CLI
    assert loaded & {"torch", "transformers", "accelerate", "PySide6"} == set()


def test_remote_clients_import_no_onnxruntime():
    """A chat that runs on a server needs the chat core and HTTP, not the local engine."""
    import subprocess
    import sys

    probe = ("import sys, engine.remote, engine.remote.session, engine.remote.connection, "
             "engine.remote.http, engine.remote.ollama_api, engine.remote.openai_api; "
             "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split())
    assert "engine.remote.session" in loaded and "engine.chat.events" in loaded
    assert {m for m in loaded if m.split(".")[0] == "onnxruntime"
            or m.startswith(("engine.runtime", "engine.graph"))} == set()
