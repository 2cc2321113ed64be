"""The flow is one-way, layer by layer (LAYERS); no module takes part in an import circle;
engine/ never imports Qt, and app/ never reaches into ONNX, GGUF or the decoder."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Bottom first: a module imports from its own package or from a lower layer, never up or
# sideways. The chat core sits below the local runtime and the servers' clients.
LAYERS = (
    {"engine", "engine.errors", "engine.paths", "engine.gojson", "engine.cpu", "engine.heap",
     "engine.native"},
    {"engine.store"},
    {"engine.chat", "engine.gguf", "engine.prompt"},
    {"engine.tokenizer", "engine.modelmath", "engine.vision", "engine.tools"},
    {"engine.graph", "engine.reference", "engine.catalog"},
    {"engine.runtime", "engine.inspect"},
    {"engine.remote"},          # above runtime only for remote.crosscheck (Lantern vs a server)
    {"engine.launch"},
    {"engine.serve"},           # `lantern serve`: keeps models loaded, Ollama's API
    {"engine.cli"},
    {"app"},
)
# engine.reference is the oracle: the engine's own code must not share it, or the check
# could not catch a bug in what they share (that lives in engine.modelmath). The in-app
# check against the reference is its one user in the runtime.
ORACLE_USERS = {"engine.runtime.check"}


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
             "import engine.runtime.loader, engine.runtime.session; "
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


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("engine", "app"):
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of engine/ and app/ it imports anywhere: at the top, inside
    functions (lazy imports) and under TYPE_CHECKING alike."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = module.split(".")
                    package = package[:len(package) - node.level + (path.name == "__init__.py")]
                    base = ".".join(package + ([node.module] if node.module else []))
                targets.update(known(f"{base}.{alias.name}") for alias in node.names)
        graph[module] = {t for t in targets if t and t != module}
    return graph


def _package(module: str) -> str:
    return "app" if module.startswith("app") else ".".join(module.split(".")[:2])


def _layer(module: str) -> int:
    package = _package(module)
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected sets of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            circle = []
            while not circle or circle[-1] != module:
                circle.append(stack.pop())
            if len(circle) > 1:
                circles.append(sorted(circle))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_the_import_graph_is_read_whole():
    graph = _import_graph()
    assert "engine.runtime.decoder" in graph["engine.runtime.generate"]
    assert "engine.chat.messages" in graph["engine.remote.session"]
    assert "engine.launch" in graph["engine.cli.run_command"]  # imported inside a function
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_engine_or_app():
    assert _circles(_import_graph()) == []


def test_every_package_has_a_layer():
    assert {p for p in map(_package, _import_graph()) if not any(p in l for l in LAYERS)} == set()


def test_no_arrow_up_or_sideways_between_layers():
    arrows = sorted(
        f"{module} -> {target}"
        for module, targets in _import_graph().items() for target in targets
        if _package(module) != _package(target) and _layer(module) <= _layer(target)
    )
    assert arrows == []


def test_only_the_check_imports_the_reference_oracle():
    users = {
        module for module, targets in _import_graph().items()
        if _package(module) in {"engine.runtime", "engine.graph"}
        and any(_package(t) == "engine.reference" for t in targets)
    }
    assert users <= ORACLE_USERS


# attributes that belong to the engine's inside: the app reads the loaded model's facade
DECODER_INSIDES = {"decoder", "_session", "_binding", "_kv_buffers", "_generator"}


def test_app_never_reaches_into_the_decoder():
    offenders = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}"
        for path in (ROOT / "app").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in DECODER_INSIDES
    )
    assert offenders == []


def test_no_product_function_over_80_lines():
    """A function a newcomer must read at once stays short enough to be read at once."""
    long = []
    for package in ("engine", "app"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 80:
                        long.append(f"{path.relative_to(ROOT)}:{node.name} ({lines} lines)")
    assert long == []


def test_unit_tests_mirror_the_packages():
    """A package's tests are found where its name says: tests/unit/<package> for engine's,
    tests/unit/app/<package> for the app's."""
    missing = [f"{side}/{package.name}" for side, tests in (("engine", "tests/unit"),
                                                            ("app", "tests/unit/app"))
               for package in sorted((ROOT / side).iterdir())
               if list(package.glob("*.py"))
               and not list((ROOT / tests / package.name).glob("test_*.py"))]
    assert missing == []
