"""Layer by layer against llama.cpp (llama-cpp-python's eval callback) on tiny random-weight
models: a sound reference agrees within the tolerance, a reference broken on purpose (one
block's weight scaled, a wrong rope theta) is named at that block; the CLI's table and JSON;
cancel stops llama.cpp's graph. The verdict's rule: an attention sink whose huge activation a
block cancels is not judged (the 1.5B demo model's blk.26 false alarm), a real divergence
at another position still is."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading

import numpy as np
import pytest

from engine.cli import main
from engine.gguf import open_model
from engine.inspect.llama_capture import LlamaRunCancelled, block_states
from engine.inspect.llama_layers import TOLERANCE, judged, llama_layers
from engine.inspect.second_opinion import INSTALL_HINT
from engine.prompt import render_prompt
from engine.reference import ReferenceWeights
from engine.reference.against import ROPE_GQA, against
from engine.reference.dump import Dump
from engine.reference.text import output_logits
from engine.tokenizer import load_tokenizer
from tests.fixtures.synthetic_gguf import T, TextSpec
from tests.hf_oracle import PROMPTS

LAYERS = 4
TEXT = "Hello world, the tokens are read in one batch; the first layer is the embeddings"


@pytest.fixture(scope="module")
def tiny(synthetic_gguf):
    """Q8_0 weights: llama.cpp quantizes activations to 8 bits for them, as for the demo
    models' K-quants."""
    return synthetic_gguf("qwen2", TextSpec(layers=LAYERS), default_type=T.Q8_0, seed=5)


@pytest.fixture(scope="module")
def ids(tiny) -> list[int]:
    return load_tokenizer(tiny).encode(TEXT)


class ScaledBlock(ReferenceWeights):
    """The reference with one block's ffn_down weight scaled: a broken block on purpose."""

    def __init__(self, model, block: int, factor: float) -> None:
        super().__init__(model)
        self.block, self.factor = block, factor

    def layer(self, i: int):
        weights = super().layer(i)
        if i != self.block:
            return weights
        return dataclasses.replace(weights, ffn_down=weights.ffn_down * self.factor)


def test_llama_cpp_blocks_agree_with_the_reference(tiny, ids):
    model = open_model(tiny)
    stages = []
    result = llama_layers(tiny, model, ids, progress=lambda stage, f: stages.append(f))
    assert result.ok and result.first_off is None, result.verdict()
    assert [r.delta.label for r in result.rows] == [f"layer {i + 1} (blk.{i})"
                                                    for i in range(LAYERS)]
    for row in result.rows:
        assert row.delta.relative <= TOLERANCE and row.delta.cosine > 0.999, row
        assert row.delta.max_abs > 0      # llama.cpp's own numbers, not the reference's
        assert abs(row.ours[0] - row.theirs[0]) < 0.05 * row.ours[1]
        np.testing.assert_allclose(row.theirs[1], row.ours[1], rtol=0.05)
    assert result.result.logits.relative <= TOLERANCE and result.result.logits.cosine > 0.999
    assert stages[-1] == 1.0 and stages == sorted(stages) and len(stages) >= 2 * LAYERS
    # the captured last block is what llama.cpp's head reads: through the reference's final
    # norm and lm_head it gives llama.cpp's logits (up to its int8 activations)
    states = block_states(tiny, ids, LAYERS)
    assert [s.shape for s in states.blocks] == [(len(ids), 64)] * LAYERS
    head = output_logits(states.blocks[-1], ReferenceWeights(model))     # [S, V]
    assert states.logits.shape == head.shape == (len(ids), model.config.text.vocab_size)
    assert np.abs(head - states.logits).max() < 0.02 * np.abs(head).max()


def test_a_broken_block_in_the_reference_is_named_first(tiny, ids):
    model = open_model(tiny)
    result = llama_layers(tiny, model, ids, weights=ScaledBlock(model, 2, 1.5))
    assert not result.ok and result.first_off == 2, result.verdict()
    assert result.verdict().startswith("layer 3 (blk.2) is the first off")
    assert all(r.delta.relative <= TOLERANCE for r in result.rows[:2])
    assert result.rows[2].delta.relative > 2 * TOLERANCE


def test_a_wrong_rope_theta_is_named_at_block_0_with_its_suspect(tiny, ids):
    model = open_model(tiny)
    weights = ReferenceWeights(model)
    weights.config = dataclasses.replace(weights.config, rope_theta=100.0)   # file: 1e6
    result = llama_layers(tiny, model, ids, weights=weights)
    assert result.first_off == 0, result.verdict()
    assert result.result.suspects == (ROPE_GQA,)   # position 0 agrees, later ones do not


def test_cancel_stops_llama_cpp(tiny, ids):
    cancel, seen = threading.Event(), []

    def on_block(layer: int) -> None:
        seen.append(layer)
        cancel.set()

    with pytest.raises(LlamaRunCancelled):
        block_states(tiny, ids, LAYERS, on_block=on_block, cancel=cancel)
    assert seen == [0]           # the graph stopped after the first block's output


def test_cli_prints_every_block_and_json(tiny, capsys):
    assert main(["debug", str(tiny), "Hello world", "--raw", "--llama-layers"]) == 0
    out = capsys.readouterr().out
    assert "llama-cpp-python" in out and "cosine" in out
    assert all(f"layer {i + 1} (blk.{i})" in out for i in range(LAYERS))
    assert "no layer is off" in out
    assert main(["debug", str(tiny), "Hello world", "--raw", "--llama-layers", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"engine", "tokens", "steered", "tolerance", "layers", "logits",
                         "first_off", "verdict", "sinks", "pictures", "suspects"}
    assert data["pictures"] == []
    assert data["steered"] is False
    assert data["tokens"] == len(load_tokenizer(tiny).encode("Hello world"))
    assert data["tolerance"] == TOLERANCE and data["first_off"] is None
    assert len(data["layers"]) == LAYERS
    layer = data["layers"][0]
    assert set(layer) == {"label", "ours", "theirs", "max_abs_delta", "relative", "cosine"}
    assert set(layer["ours"]) == set(layer["theirs"]) == {"mean", "std"}
    assert 0.999 < layer["cosine"] <= 1.0 + 1e-9
    assert set(data["logits"]) == {"max_abs_delta", "relative", "cosine"}


def test_cli_without_llama_cpp_says_how_to_get_it(tiny, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)   # hidden, as if not installed
    assert main(["debug", str(tiny), "Hi", "--llama-layers"]) == 1
    err = capsys.readouterr().err
    assert INSTALL_HINT.split(": ", 1)[1] in err and err.count("\n") == 1
    assert main(["debug", str(tiny), "Hi", "--json"]) == 2
    assert "--llama-layers" in capsys.readouterr().err


def test_the_demo_model_agrees_block_by_block(demo_05b):
    """The real Q4_K_M weights: llama.cpp's drift stays within the tolerance at every depth."""
    tokenizer = load_tokenizer(demo_05b)
    ids = tokenizer.encode("def fibonacci(n):\n    if n < 2:\n        return n\n    return")
    result = llama_layers(demo_05b, open_model(demo_05b), ids)
    assert result.ok, result.verdict()
    assert len(result.rows) == 24
    assert all(r.delta.cosine > 0.9995 for r in result.rows), result.rows
    assert max(r.delta.relative for r in result.rows) < TOLERANCE / 1.5


def sink_dumps() -> tuple[Dump, Dump]:
    """Four states of 6 positions: position 0 carries 4000 in channel 0 until the last block
    cancels it to 300; llama.cpp's side drifts 1% everywhere and keeps 12% of the cancelled
    4000 at position 0 (what blk.26 of the 1.5B demo model does)."""
    rng = np.random.default_rng(3)
    states = [5 * rng.standard_normal((6, 8)) for _ in range(4)]
    for state, sink in zip(states, (4.0, 4000.0, 4000.0, 300.0), strict=True):
        state[0, 0] = sink
    logits = rng.standard_normal((6, 20))
    theirs = [h + 0.01 * np.abs(h).max(axis=-1, keepdims=True) * rng.standard_normal(h.shape)
              for h in states]
    theirs[0] = states[0]
    theirs[3][0, 0] += 0.12 * 4000
    ids = np.arange(6)
    return Dump("reference", ids, states, logits), Dump("llama.cpp", ids, theirs, logits + 0.01)


def test_a_cancelled_sink_is_not_judged_a_real_divergence_is():
    ours, theirs = sink_dumps()
    assert against(ours, theirs, TOLERANCE).first_off == 3       # the old rule's false alarm
    result, sinks, (drift, block) = judged(ours, theirs, TOLERANCE)
    assert result.ok and sinks == (0,), result.verdict()
    assert block == 2 and 0.11 < drift < 0.13          # 480 of the 4000 the stream carried
    theirs.hidden_states[2][3] *= 1.3                  # a block truly off at position 3
    result, _, _ = judged(ours, theirs, TOLERANCE)
    assert result.first_off == 2 and result.rows[2].relative > 2 * TOLERANCE, result.verdict()
    theirs.hidden_states[2][3] /= 1.3
    theirs.logits[4] *= 1.5                            # a head truly off: the logits named
    assert judged(ours, theirs, TOLERANCE)[0].first_off == 4


def test_the_15b_demo_model_agrees_its_first_token_not_judged(demo_15b):
    """blk.26 cancels the first token's huge activation; llama.cpp keeps 12% of it there.
    No block is named, and the verdict says how far the sink drifted."""
    model, tokenizer = open_model(demo_15b), load_tokenizer(demo_15b)
    ids = tokenizer.encode_prompt(render_prompt([{"role": "user", "content": PROMPTS[0].text}],
                                                chat_template=model.config.chat_template).segments)
    result = llama_layers(demo_15b, model, ids)
    assert result.ok and result.sinks == (0,), result.verdict()
    assert max(r.delta.relative for r in result.rows) < TOLERANCE
    assert result.sink_drift[0] > TOLERANCE and result.sink_drift[1] == 26
    assert "not judged: position 0" in result.verdict() and "blk.26" in result.verdict()
    assert result.to_json()["sinks"] == [0]
