"""Shared test set-up: Lantern's own dirs point into a temp folder, Qt runs offscreen,
and the real demo models are fetched once into a cache (see tests/fixtures/demo_models.py).
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_SESSION_DIRS = tempfile.mkdtemp(prefix="lantern-tests-")
for _var, _sub in (
    ("LANTERN_CACHE_DIR", "cache"),
    ("LANTERN_DATA_DIR", "data"),
    ("LANTERN_CONFIG_DIR", "config"),
    ("LANTERN_LOG_DIR", "log"),
):
    os.environ[_var] = str(Path(_SESSION_DIRS) / _sub)
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# two test processes share the cores: a decode step's threads sleep between ops rather
# than spin in each other's way (engine.runtime.decoder.spin_wait; its own test sets it)
os.environ.setdefault("LANTERN_SPIN_WAIT", "0")
os.environ.pop("OLLAMA_MODELS", None)


def pytest_report_header(config) -> list[str]:
    """Free disk first: the suite writes a few gigabytes, and a full disk fails tests far
    from the cause (a pull refused for space, a graph not cached). Then what llama.cpp was
    built for: the README's command builds it for this processor, and a wheel that pip
    cached on another one dies of SIGILL (the tests that use it then fail saying so)."""
    from engine.inspect.second_opinion import llama_build

    temp = Path(tempfile.gettempdir())
    build = llama_build()
    return [f"free disk: {shutil.disk_usage(temp).free / 2**30:.1f} GiB in {temp}",
            f"llama.cpp: {build.features or build.problem}"]


# What makes a test slow: a real demo model (hundreds of MB, minutes of decoding), a real
# registry or server process; everything under tests/integration is; a test that judges
# a time (marked `timing`: a busy machine stretches it); and a module that marks itself
# (minutes of HF reference runs). `pytest -m "not slow"` is the inner loop (README).
SLOW_FIXTURES = {"demo_05b", "demo_15b", "registry"}
INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if (SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
                or INTEGRATION in Path(item.fspath).parents
                or item.get_closest_marker("timing")):
            item.add_marker(pytest.mark.slow)


def pytest_unconfigure(config) -> None:
    """The session's dirs hold gigabytes of built graphs: leave the disk as it was."""
    shutil.rmtree(_SESSION_DIRS, ignore_errors=True)


@pytest.fixture(scope="session")
def synthetic_gguf(tmp_path_factory):
    """Factory of tiny synthetic models: ``synthetic_gguf(arch, text, **write_model_args)``
    is the path of that model, written once per session, so modules that test the same
    tiny model share one file (tests/fixtures/synthetic_gguf.py, ``write_model``)."""
    from tests.fixtures.synthetic_gguf import TextSpec, write_model

    made: dict[str, Path] = {}

    def make(arch: str = "qwen2", text: TextSpec | None = None, **kwargs) -> Path:
        text = text or TextSpec()
        key = repr((arch, text, sorted(kwargs.items())))
        if key not in made:
            made[key] = write_model(tmp_path_factory.mktemp("synthetic") / "tiny.gguf",
                                    arch, text, **kwargs)
        return made[key]

    return make


@pytest.fixture(scope="session")
def demo_05b() -> Path:
    """Path of the verified real Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF."""
    from tests.fixtures.demo_models import QWEN_05B, fetch

    return fetch(QWEN_05B)


@pytest.fixture(scope="session")
def demo_15b() -> Path:
    """Path of the verified real Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF."""
    from tests.fixtures.demo_models import QWEN_15B, fetch

    return fetch(QWEN_15B)


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """A real docker-registry (distribution 2.8) on a free loopback port, stopped at the end.
    Missing binary: the tests fail and say how to install it (they are not skipped)."""
    from tests.fixtures.registry import LocalRegistry

    try:
        local = LocalRegistry.start(tmp_path_factory.mktemp("registry"))
    except RuntimeError as error:
        pytest.fail(str(error))
    yield local
    local.stop()
