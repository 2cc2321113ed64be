"""load_model: progress by stage, cancel at any stage boundary, the tokenizer and the ONNX
session made side by side (a failure of either reaches the caller), and the same model as
building each piece alone."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.errors import CorruptModel
from engine.gguf import open_model
from engine.prompt.jinja import compile_template
from engine.prompt.ollama import parse_ollama
from engine.runtime import loader
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import LoadCancelled, load_model
from engine.tokenizer import load_tokenizer
from tests.fixtures.synthetic_gguf import TextSpec


@pytest.fixture(scope="module")
def tiny(synthetic_gguf):
    return synthetic_gguf("qwen2", TextSpec(vocab=400), seed=5)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANTERN_CACHE_DIR", str(tmp_path / "cache"))


def test_progress_runs_in_order_and_the_model_matches_its_pieces(tiny):
    stages = []
    model = load_model(tiny, num_ctx=64, progress=lambda stage, f: stages.append((stage, f)))
    assert [f for _, f in stages] == sorted(f for _, f in stages)
    assert stages[0][1] == 0.0 and stages[-1] == ("Ready", 1.0)
    assert len(stages) == 4 and model.load_duration > 0
    ids = model.tokenizer.encode("hello world")
    assert ids == load_tokenizer(tiny).encode("hello world")
    alone = DecoderSession(open_model(tiny), max_cache_len=64)
    np.testing.assert_array_equal(model.decoder.forward(input_ids=ids).logits,
                                  alone.forward(input_ids=ids).logits)


@pytest.mark.parametrize("at_stage", [0, 1, 2])  # cancelled while reporting that stage
def test_cancel_at_each_stage_raises_and_leaves_no_thread(tiny, at_stage):
    cancel = threading.Event()
    seen = []

    def progress(stage: str, fraction: float) -> None:
        seen.append(stage)
        if len(seen) == at_stage + 1:
            cancel.set()

    before = set(threading.enumerate())  # threads of earlier tests may end meanwhile
    with pytest.raises(LoadCancelled):
        load_model(tiny, num_ctx=64, progress=progress, cancel=cancel)
    assert len(seen) == at_stage + 1
    # the session thread was joined (a dropped tokenizer's child is reaped on a thread
    # of its own, which ends by itself: engine/tokenizer/encoder_process.py)
    left = {t for t in set(threading.enumerate()) - before if t.name != "lantern-tokenizer-reaper"}
    assert left == set()


def test_a_session_failure_reaches_the_caller(tiny, monkeypatch):
    def broken(*args, **kwargs):
        raise CorruptModel("tiny.gguf: the weights are broken")

    monkeypatch.setattr(loader, "DecoderSession", broken)
    with pytest.raises(CorruptModel, match="weights are broken"):
        load_model(tiny, num_ctx=64)


def test_a_tokenizer_failure_reaches_the_caller_after_the_session_ends(tiny, monkeypatch):
    made = []

    def session(*args, **kwargs):
        made.append(DecoderSession(*args, **kwargs))
        return made[-1]

    def broken(path):
        raise CorruptModel(f"{path}: no vocabulary")

    monkeypatch.setattr(loader, "DecoderSession", session)
    monkeypatch.setattr(loader, "load_tokenizer", broken)
    with pytest.raises(CorruptModel, match="no vocabulary"):
        load_model(tiny, num_ctx=64)
    assert len(made) <= 1  # started at most once, and finished before the error came out


def test_the_tokenizer_is_built_while_the_session_is_made(tiny, monkeypatch):
    """Side by side, not one after the other: the tokenizer waits for the session to have
    started (one after the other, it would wait in vain)."""
    session_started = threading.Event()

    def session(*args, **kwargs):
        session_started.set()
        return DecoderSession(*args, **kwargs)

    def tokenizer(path):
        assert session_started.wait(timeout=30), "the session had not started"
        return load_tokenizer(path)

    monkeypatch.setattr(loader, "DecoderSession", session)
    monkeypatch.setattr(loader, "load_tokenizer", tokenizer)
    model = load_model(tiny, num_ctx=64)
    assert model.tokenizer.encode("hello") == load_tokenizer(tiny).encode("hello")


def test_the_template_is_made_at_load_not_by_the_first_chat(tiny):
    """Parsing or compiling the model's template is the load's work: the first chat's
    render finds it made (a Jinja compile is milliseconds of Python that the window's
    first answer would otherwise share the GIL with)."""
    compile_template.cache_clear()
    parse_ollama.cache_clear()
    model = load_model(tiny, num_ctx=64)
    assert compile_template.cache_info().currsize + parse_ollama.cache_info().currsize == 1
    misses = (compile_template.cache_info().misses, parse_ollama.cache_info().misses)
    model.chat_prompt().render([{"role": "user", "content": "hi"}])
    assert (compile_template.cache_info().misses, parse_ollama.cache_info().misses) == misses
