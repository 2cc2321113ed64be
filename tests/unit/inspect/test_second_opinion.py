"""llama.cpp's second opinion on the same GGUF and ids (llama-cpp-python, optional), and
the message that says how to get it when it is not installed."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from engine.chat.prompt_tokens import PromptTokens
from engine.cli import main
from engine.gguf import open_model
from engine.inspect import inspect_context
from engine.inspect.second_opinion import (
    INSTALL_HINT,
    SecondOpinionUnavailable,
    _probe_import,
    llama_build,
    missing,
    second_opinion,
)
from engine.tokenizer import load_tokenizer

TEXT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"


def test_llama_cpp_agrees_with_the_reference_on_the_demo_model(demo_05b):
    assert llama_build().problem is None, llama_build().problem
    model, tokenizer = open_model(demo_05b), load_tokenizer(demo_05b)
    prompt = PromptTokens.text(tokenizer.encode(TEXT))
    inspection = inspect_context(model, prompt, tokenizer.id_to_piece)
    opinion = second_opinion(demo_05b, inspection, tokenizer.id_to_piece)
    assert len(opinion.ours) == len(opinion.theirs) == 5
    assert opinion.same_top1, (opinion.ours, opinion.theirs)
    assert opinion.delta.shape == (len(prompt) - 1,)
    # the same Q4_K_M weights: llama.cpp's int8 dot products drift a little, no more
    assert opinion.delta.max() < 0.5 and opinion.delta.mean() < 0.1
    assert np.isfinite(opinion.theirs_logprob).all() and (opinion.theirs_logprob <= 0).all()
    for a, b in zip(opinion.ours, opinion.theirs, strict=True):
        if a.id == b.id:
            assert abs(a.logit - b.logit) < 0.5
    out = opinion.to_json()
    assert out["engine"].startswith("llama-cpp-python ") and len(out["delta_logprob"]) == len(
        prompt) - 1


def test_without_llama_cpp_the_cli_says_how_to_get_it(demo_05b, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)   # hidden, as if not installed
    assert missing() == INSTALL_HINT
    assert "pip install 'lantern[llama]'" in INSTALL_HINT
    with pytest.raises(SecondOpinionUnavailable, match=r"lantern\[llama\]"):
        second_opinion(demo_05b, None, str)
    assert main(["inspect", str(demo_05b), "Hi", "--raw", "--llama"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'lantern[llama]'" in err and err.count("\n") == 1


def test_a_llama_cpp_built_for_another_processor_is_named_not_run(tmp_path, monkeypatch):
    """An import that dies of SIGILL (a wheel built elsewhere) would kill the app: the probe
    runs it in a child and the second opinion says what is wrong instead."""
    fake = tmp_path / "llama_cpp"
    fake.mkdir()
    (fake / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    _probe_import.cache_clear()
    try:
        build = llama_build()
        assert build.features is None and "built for another processor" in build.problem
        with pytest.raises(SecondOpinionUnavailable, match="another processor"):
            second_opinion(tmp_path / "model.gguf", None, str)
    finally:
        monkeypatch.undo()
        _probe_import.cache_clear()
    assert "AVX" in llama_build().features or "NEON" in llama_build().features
