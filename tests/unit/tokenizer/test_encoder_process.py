"""The tokenizer's child process: it builds the pipeline (the first time from the GGUF file)
and encodes as the pipeline does, ends with its tokenizer, and a child that died or could
not build the pipeline is named, not waited for."""

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tokenizers

from engine.errors import CorruptModel, UnsupportedModel
from engine.tokenizer import encoder_process, load_tokenizer
from engine.tokenizer.encoder_process import EncoderGone
from engine.tokenizer.load import cache_entry
from tests.unit.tokenizer.test_tokenizer_synthetic import ID, write_vocab_gguf

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="children are found in /proc")
ROOT = Path(__file__).resolve().parents[3]


def _children() -> set[int]:
    """This process's children, running or not yet reaped (a zombie counts as left over)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    """The process has ended and been reaped (no zombie left)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _new_tokenizer(tmp_path):
    before = _children()
    tokenizer = load_tokenizer(write_vocab_gguf(tmp_path / "m.gguf"))
    (pid,) = _children() - before
    return tokenizer, pid


def test_each_tokenizer_has_a_child_that_ends_when_it_is_dropped(tmp_path):
    tokenizer, pid = _new_tokenizer(tmp_path)
    assert tokenizer.encode("hello world") == [ID["hello"], ID["Ġworld"]]
    del tokenizer
    gc.collect()
    assert _gone(pid)


def test_the_first_build_runs_in_the_child(tmp_path, monkeypatch):
    """Building and serializing a pipeline each hold the GIL for a whole vocabulary: the
    loading process (the window's) leaves even the first build to the child."""
    def here(*_):
        raise AssertionError("built in the loading process")

    monkeypatch.setattr(tokenizers.models, "BPE", here)
    monkeypatch.setattr(tokenizers.Tokenizer, "to_str", here)
    tokenizer, _ = _new_tokenizer(tmp_path)
    assert cache_entry(tmp_path / "m.gguf").exists()
    assert tokenizer.encode("hello world") == [ID["hello"], ID["Ġworld"]]
    assert tokenizer.id_to_piece(ID["Ġworld"]) == " world"


def test_a_file_the_child_refuses_is_named_and_leaves_no_child(tmp_path):
    before = _children()
    with pytest.raises(UnsupportedModel, match="'t5'"):
        load_tokenizer(write_vocab_gguf(tmp_path / "t5.gguf", model="t5"))
    with pytest.raises(CorruptModel, match="gone.gguf: file does not exist"):
        load_tokenizer(tmp_path / "gone.gguf")
    deadline = time.monotonic() + 10
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _children() - before


def test_close_ends_the_child_and_later_calls_say_so(tmp_path):
    tokenizer, pid = _new_tokenizer(tmp_path)
    tokenizer.close()
    assert _gone(pid)
    with pytest.raises(EncoderGone, match="tokenizer's process ended"):
        tokenizer.encode("hello")
    assert tokenizer.id_to_piece(ID["Ġworld"]) == " world"  # lookups need no child


def test_a_killed_child_is_named_with_what_to_do(tmp_path):
    tokenizer, pid = _new_tokenizer(tmp_path)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(EncoderGone, match=r"ended \(exit code -9\).*loaded again"):
        tokenizer.encode("hello")
    assert _gone(pid)


def test_an_entry_the_child_cannot_build_is_rebuilt(tmp_path):
    path = write_vocab_gguf(tmp_path / "m.gguf")
    expected = load_tokenizer(path).encode("hello world")
    entry = cache_entry(path)
    head, *rest = entry.read_bytes().split(b"\n")
    damaged = json.loads(head)
    damaged["pipeline"]["model"]["type"] = "WordPiece"  # the tables read; the child refuses
    entry.write_bytes(b"\n".join([json.dumps(damaged).encode(), *rest]))
    assert load_tokenizer(path).encode("hello world") == expected
    assert json.loads(entry.read_bytes().split(b"\n")[0])["pipeline"]["model"]["type"] == "BPE"


PLAIN_SCRIPT = """\
import sys
from engine.tokenizer import load_tokenizer

tokenizer = load_tokenizer(sys.argv[1])
print(tokenizer.encode("hello world"))
"""


def test_a_plain_script_without_a_main_guard_loads_and_encodes(tmp_path):
    """The child is a program of its own: nothing re-runs the caller's main module, so a
    script's top level runs once, from the GGUF file and again from the cache."""
    path = write_vocab_gguf(tmp_path / "m.gguf")
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LANTERN_CACHE_DIR": str(tmp_path / "cache")}
    for _ in ("built", "cached"):
        run = subprocess.run([sys.executable, str(script), str(path)], capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=120)
        assert (run.returncode, run.stdout, run.stderr) == (
            0, f"{[ID['hello'], ID['Ġworld']]}\n", "")
    assert len(list((tmp_path / "cache" / "tokenizers").glob("*.json"))) == 1


def test_a_child_that_cannot_start_is_named_and_the_entry_is_not_blamed(tmp_path, monkeypatch,
                                                                         caplog):
    path = write_vocab_gguf(tmp_path / "m.gguf")
    load_tokenizer(path).close()
    entry = cache_entry(path).read_bytes()
    before = _children()
    monkeypatch.setattr(encoder_process, "_child_command",
                        lambda: [sys.executable, "-c", "raise SystemExit(3)"])
    for cached in (True, False):
        with pytest.raises(EncoderGone, match=r"ended before it answered \(exit code 3\)"):
            load_tokenizer(path)
        if cached:                 # neither called unreadable nor rewritten: not its fault
            assert "unreadable" not in caplog.text
            assert cache_entry(path).read_bytes() == entry
            cache_entry(path).unlink()
    deadline = time.monotonic() + 10
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _children() - before


def test_a_frozen_bundle_starts_its_own_program_as_the_child(tmp_path, monkeypatch):
    """A bundle has no interpreter to run ``-m`` with: its program (packaging/
    lantern_entry.py) turns into the child when given the child's flag."""
    program = tmp_path / "lantern"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" '
                       f'"{ROOT / "packaging" / "lantern_entry.py"}" "$@"\n')
    program.chmod(0o755)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(program))
    for _ in ("built", "cached"):
        tokenizer, pid = _new_tokenizer(tmp_path)
        assert tokenizer.encode("hello world") == [ID["hello"], ID["Ġworld"]]
        tokenizer.close()
        assert _gone(pid)
