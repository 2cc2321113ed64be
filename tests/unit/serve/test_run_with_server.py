"""`lantern run MODEL` sends the chat to a `lantern serve` of the same store when one
answers at $LANTERN_HOST, with the output it prints in-process; without one, or with
--no-server, it loads the model itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from engine.catalog.importer import import_gguf
from engine.launch import EngineChoices
from engine.serve.server import LanternServer
from engine.store import Store
from tests.fixtures.synthetic_gguf import write_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
NOTE = "answered by the Lantern server"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("run-serve")
    store = Store.open(root / "models")
    import_gguf(store, write_model(root / "tiny.gguf", "qwen2", seed=11), "tiny")
    server = LanternServer(("127.0.0.1", 0), store, EngineChoices())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def lantern_run(server: LanternServer, host: str, *flags: str, model: str = "tiny",
                check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "LANTERN_HOST": host, "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", model, "Hello", "--temperature", "0",
         "--num-predict", "6", "--models-dir", str(server.store.root), *flags],
        capture_output=True, text=True, env=env, timeout=300, check=check)


def test_run_uses_a_running_server_and_prints_what_it_prints_in_process(served):
    host = "{}:{}".format(*served.server_address[:2])
    remote = lantern_run(served, host, "--verbose")
    assert NOTE in remote.stderr and "eval count:           6 token(s)" in remote.stderr
    assert served.keeper.loads == 1
    here = lantern_run(served, host, "--no-server", "--verbose")
    assert NOTE not in here.stderr and served.keeper.loads == 1
    assert here.stdout == remote.stdout and remote.stdout.strip()
    remote_lines = lantern_run(served, host, "--format", "jsonl", "--top-logprobs", "3")
    here_lines = lantern_run(served, host, "--format", "jsonl", "--top-logprobs", "3",
                             "--no-server")
    remote_tokens = [json.loads(line) for line in remote_lines.stdout.splitlines()][:-1]
    here_tokens = [json.loads(line) for line in here_lines.stdout.splitlines()][:-1]
    assert [t["token"] for t in remote_tokens] == [t["token"] for t in here_tokens]
    assert [t["logprob"] for t in remote_tokens] == pytest.approx(
        [t["logprob"] for t in here_tokens], abs=1e-4)
    assert [[c["token"] for c in t["top_logprobs"]] for t in remote_tokens] == \
        [[c["token"] for c in t["top_logprobs"]] for t in here_tokens]
    assert served.keeper.loads == 1          # every request on the one loaded model


def test_run_loads_in_process_when_no_server_answers(served):
    closed = lantern_run(served, "127.0.0.1:9", "--verbose")
    assert NOTE not in closed.stderr and "eval count:" in closed.stderr
    assert closed.stdout.strip()


def test_a_missing_model_is_the_stores_error_with_or_without_the_server(served):
    host = "{}:{}".format(*served.server_address[:2])
    served_run = lantern_run(served, host, model="nope", check=False)
    here = lantern_run(served, host, "--no-server", model="nope", check=False)
    assert served_run.returncode == here.returncode == 1
    assert served_run.stderr == here.stderr and "nope" in here.stderr


def test_serve_says_when_its_port_is_taken(served, capsys):
    from engine.cli import main

    port = str(served.server_address[1])
    assert main(["serve", "--host", "127.0.0.1", "--port", port,
                 "--models-dir", str(served.store.root)]) == 1
    assert "is in use: is a Lantern server running already?" in capsys.readouterr().err


def test_parsing_lantern_run_and_opening_a_servers_chat_import_no_runtime():
    """What a served `lantern run` imports before its first token: no ONNX Runtime, GGUF
    reader, tokenizer or Pillow (they cost seconds on a busy machine: BENCHMARKS.md,
    '2026-11-25')."""
    probe = ("import sys; from engine.cli import build_parser; "
             "build_parser(('engine.cli.run_command',)); import engine.launch, "
             "engine.remote.lantern_server, engine.remote.session; print(' '.join(sys.modules))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split())
    assert "engine.launch" in loaded and "engine.remote.session" in loaded
    heavy = ("onnxruntime", "onnx", "gguf", "tokenizers", "PIL", "engine.runtime",
             "engine.gguf", "engine.tokenizer", "engine.graph", "engine.vision")
    assert {m for m in loaded if any(m == h or m.startswith(h + ".") for h in heavy)} == set()
