"""gpt-oss's attention block as optional features of any decoder: per-head sinks in the
softmax's denominator (GQA's head_sink), the output projection's bias, and sliding layers
alternating with full ones. The graph equals the numpy reference in exact mode, a prompt at
once and token by token, and in fast mode (its spare row) to the argmax; each feature moves
the logits, so the checks see it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.gguf import GGUFModel, open_model
from engine.reference.text import forward
from engine.runtime.decoder import DecoderSession
from tests.fixtures.synthetic_gguf import TextSpec, write_model

PROMPT = list(range(5, 19))
WINDOW = 4
EXACT_ATOL = 2e-5


def with_text(model: GGUFModel, **changes: object) -> GGUFModel:
    text = dataclasses.replace(model.config.text, **changes)
    return dataclasses.replace(model, config=dataclasses.replace(model.config, text=text))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> GGUFModel:
    path = write_model(tmp_path_factory.mktemp("sinks") / "sinks.gguf", "qwen2",
                       TextSpec(sinks=True), seed=3)
    return open_model(path)


def alternating(model: GGUFModel) -> GGUFModel:
    """gpt-oss's layout: even layers slide, odd ones see every key."""
    layers = model.config.text.n_layers
    return with_text(model, sliding_window=WINDOW,
                     sliding_layers=tuple(i % 2 == 0 for i in range(layers)))


def test_the_file_carries_sinks_and_an_output_bias(model):
    text = model.config.text
    assert text.attention_sinks and text.output_bias
    assert model.tensors["blk.1.attn_sinks.weight"].shape == (text.n_heads,)


@pytest.mark.parametrize("windowed", [False, True], ids=["full", "alternating"])
def test_exact_mode_equals_the_reference(model, windowed):
    model = alternating(model) if windowed else model
    expected = forward(model, PROMPT).logits
    session = DecoderSession(model, exact=True, max_cache_len=32, all_logits=True, cache=False)
    np.testing.assert_allclose(session.forward(PROMPT).logits, expected, atol=EXACT_ATOL, rtol=0)
    stepped = DecoderSession(model, exact=True, max_cache_len=32, cache=False)
    rows = [stepped.forward([token]).logits for token in PROMPT]
    np.testing.assert_allclose(np.stack(rows).reshape(expected.shape), expected,
                               atol=EXACT_ATOL, rtol=0)


def test_fast_mode_keeps_the_argmax(model):
    model = alternating(model)
    expected = forward(model, PROMPT).logits[-1]
    logits = DecoderSession(model, max_cache_len=32, cache=False).forward(PROMPT).logits
    assert np.abs(logits - expected).max() < 0.05 * np.abs(expected).max()
    assert logits.argmax() == expected.argmax()


@pytest.mark.parametrize("feature", ["sinks", "window", "bias"])
def test_each_feature_moves_the_logits(model, feature):
    windowed = alternating(model)
    expected = forward(windowed, PROMPT).logits
    if feature == "window":
        other = model
    elif feature == "sinks":
        other = with_text(windowed, attention_sinks=False)
    else:
        other = with_text(windowed, output_bias=False)
    assert np.abs(forward(other, PROMPT).logits - expected).max() > 100 * EXACT_ATOL
