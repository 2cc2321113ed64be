"""The engine-vs-reference check: passes on a sound engine, names the first layer off on a
broken one, and `lantern debug` prints the table and exits non-zero on disagreement."""

from __future__ import annotations

import numpy as np
import pytest

import engine.runtime.decoder as runtime_decoder
from engine.chat.events import DoneEvent
from engine.chat.options import Options
from engine.cli import main
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from tests.fixtures.synthetic_gguf import T, TextSpec


@pytest.fixture(scope="module")
def tiny(synthetic_gguf):
    return synthetic_gguf("qwen2", TextSpec(vocab=400), default_type=T.Q8_0, seed=11)


def ask(chat: LocalSession, text: str) -> DoneEvent:
    *_, done = chat.send(text)
    return done


@pytest.mark.parametrize("exact", [True, False])
def test_sound_engine_matches_reference(tiny, exact):
    model = load_model(tiny, exact=exact, layer_stats=True, num_ctx=256)
    chat = LocalSession(model, Options(temperature=0, num_predict=3))
    ask(chat, "Hello world")
    report = chat.check_against_reference()
    assert report.ok, report.verdict
    assert len(report.rows) == model.gguf.config.text.n_layers + 1
    assert report.rows[0].label == "embeddings"
    assert report.engine_top[0].id == report.reference_top[0].id
    # the chat goes on after the check (its cache was re-filled from scratch)
    done = ask(chat, "the thing")
    assert done.prompt_eval_count == len(chat.last_prompt)


def test_broken_rotary_is_caught_at_the_first_layer(tiny, monkeypatch):
    model = load_model(tiny, exact=True, layer_stats=True, num_ctx=256)
    chat = LocalSession(model, Options(temperature=0, num_predict=2))
    ask(chat, "Hello world")
    original = runtime_decoder.text_rope_angles

    def restarted_positions(positions, *args, **kwargs):  # the classic bug: positions restart
        return original(np.zeros_like(positions), *args, **kwargs)

    monkeypatch.setattr(runtime_decoder, "text_rope_angles", restarted_positions)
    report = chat.check_against_reference()
    assert not report.ok
    assert report.first_off == 1, report.verdict      # embeddings fine, blk.0 off
    assert "layer 1 (blk.0) is the first layer off" in report.verdict


def test_debug_command_prints_the_table(tiny, capsys):
    assert main(["debug", str(tiny), "Hello world", "--exact"]) == 0
    out = capsys.readouterr().out
    assert "max |Δ|" in out and "layer 1 (blk.0)" in out
    assert "Engine matches the numpy reference (exact mode" in out


def test_debug_command_exits_non_zero_on_disagreement(tiny, capsys, monkeypatch):
    original = runtime_decoder.text_rope_angles
    monkeypatch.setattr(runtime_decoder, "text_rope_angles",
                        lambda positions, *a, **k: original(np.zeros_like(positions), *a, **k))
    assert main(["debug", str(tiny), "Hello world", "--exact"]) == 1
    assert "first layer off" in capsys.readouterr().out


@pytest.mark.slow
def test_debug_command_on_the_real_model_in_fast_mode(demo_05b, capsys):
    assert main(["debug", str(demo_05b), "Write a haiku about lanterns."]) == 0
    out = capsys.readouterr().out
    assert "layer 24 (blk.23)" in out
    assert "Engine matches the numpy reference (fast mode" in out
