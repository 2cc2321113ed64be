"""Steering in the engine: a steered step equals the reference with the same vectors added
(exact mode), speculation keeps a steered answer token for token (fast mode to the bit),
a strength change needs no new graph but empties the cache it made stale, and a chat says
which answers were steered."""

from __future__ import annotations

import numpy as np
import pytest

from engine.chat.events import DoneEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.errors import ControlVectorMismatch
from engine.gguf import open_model
from engine.gguf.control_vector import Steering, write_control_vector
from engine.graph.kernels import kernels_for
from engine.launch import open_chat, steer
from engine.reference import forward
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model
from tests.unit.runtime.test_speculation import (
    MIXED,
    Fixed,
    Recording,
    eager,
    repetitive,
    run,
    verify_and_steps,
)

SPEC = TextSpec(vocab=400, layers=3)
IDS = [5, 17, 42, 8, 99, 3, 250, 7]


def random_table(model, scale: float, seed: int = 0) -> np.ndarray:
    """[n_layers, H], row 0 zero as llama.cpp's numbering leaves it."""
    cfg = model.config.text
    table = np.random.default_rng(seed).standard_normal((cfg.n_layers, cfg.hidden_size))
    table[0] = 0
    return (scale * table).astype(np.float32)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("steer") / "q.gguf", "qwen2", SPEC, seed=5)


def test_steered_exact_engine_equals_the_reference_with_the_vectors(tiny):
    model = open_model(tiny)
    table = random_table(model, 2.0)
    decoder = DecoderSession(model, exact=True, max_cache_len=32, all_logits=True)
    decoder.steer(table)
    got = decoder.forward(input_ids=IDS).logits                       # [S, V]
    expected = forward(model, IDS, steering=table).logits
    plain = forward(model, IDS).logits
    assert np.abs(expected - plain).max() > 0.5      # the vectors do move the logits
    np.testing.assert_allclose(got, expected, atol=2e-4, rtol=1e-4)
    report = check_against_reference(model, PromptTokens.text(IDS), str, exact=True,
                                     steering=table)
    assert report.ok, report.verdict
    plain_report = check_against_reference(model, PromptTokens.text(IDS), str, exact=True)
    assert plain_report.ok
    assert report.rows[1].reference_stats == plain_report.rows[1].reference_stats  # block 0
    assert report.rows[2].reference_stats != plain_report.rows[2].reference_stats  # steered


@pytest.mark.parametrize("default, types", [(T.Q8_0, MIXED), (T.F16, {})], ids=["q", "f16"])
def test_a_steered_verify_step_equals_one_token_steps_to_the_bit_in_fast_mode(tmp_path, default,
                                                                              types):
    """The steering add is per row, so a steered graph keeps this CPU's row invariance
    (test_speculation's to-the-bit test, here with vectors in every layer)."""
    spec = TextSpec(vocab=400, hidden=1024, heads=16, kv_heads=4, ffn=2816, layers=2)
    path = write_model(tmp_path / "q.gguf", "qwen2", spec, default_type=default, types=types,
                       seed=4)
    model = open_model(path)
    decoder = DecoderSession(model, max_cache_len=64, cache=False, kernels=kernels_for())
    assert decoder.row_invariant
    decoder.steer(random_table(model, 1.5))
    for k in (1, 3, 6):
        decoder.reset()
        batch, single = verify_and_steps(decoder, [99, 3, 250, 7, 11, 40][:k])
        np.testing.assert_array_equal(batch, single)


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "fast"])
def test_a_steered_answer_is_the_same_with_and_without_speculation(tiny, exact):
    model = load_model(tiny, num_ctx=256, exact=exact)
    prompt = repetitive(model)
    options = Options(temperature=0, num_predict=30)
    unsteered, _ = run(model, prompt, options)
    model.decoder.steer(random_table(model.gguf, 3.0, seed=2))
    plain, _ = run(model, prompt, options)
    assert [e.id for e in plain] != [e.id for e in unsteered]  # steering changed the answer
    for drafter in (Recording(eager()), Recording(Fixed([7, 8, 9, 10]))):
        tokens, done = run(model, prompt, options, drafter)
        assert [e.id for e in tokens] == [e.id for e in plain]
        assert done.draft_count > 0


def test_a_strength_change_keeps_the_graph_and_empties_the_stale_cache(tiny):
    model = open_model(tiny)
    decoder = DecoderSession(model, max_cache_len=32, cache=False)
    session = decoder._session
    plain = decoder.forward(input_ids=IDS).logits
    table = random_table(model, 1.0)
    decoder.steer(np.zeros_like(table))       # zeros: nothing changes, the cache stays
    assert decoder.cache_len == len(IDS)
    decoder.steer(table)
    assert decoder.cache_len == 0 and decoder._session is session
    steered = decoder.forward(input_ids=IDS).logits
    decoder.steer(2 * table)                   # a slider moved: the same graph, fresh cache
    assert decoder.cache_len == 0
    stronger = decoder.forward(input_ids=IDS).logits
    decoder.steer(None)
    again = decoder.forward(input_ids=IDS).logits
    np.testing.assert_array_equal(again, plain)  # unsteered: the very same numbers
    assert not np.allclose(steered, plain) and not np.allclose(stronger, steered)


def test_a_chat_marks_its_steered_answers_and_refuses_another_models_vector(tiny, tmp_path):
    model = load_model(tiny, num_ctx=128, exact=True)
    cfg = model.gguf.config.text
    rng = np.random.default_rng(1)
    write_control_vector(tmp_path / "calm.gguf", {n: 3 * rng.standard_normal(cfg.hidden_size)
                                                  for n in (1, 2)}, "qwen2")
    chat = open_chat(model, Options(temperature=0, num_predict=8))
    [plain] = [e for e in chat.send("Hello world") if isinstance(e, DoneEvent)]
    assert plain.steering == ""
    steer(chat, Steering.load([(tmp_path / "calm.gguf", 0.8)]))
    [steered] = [e for e in chat.regenerate() if isinstance(e, DoneEvent)]
    assert steered.steering == "calm x0.8"
    assert steered.text != plain.text
    write_control_vector(tmp_path / "wide.gguf", {1: np.ones(2 * cfg.hidden_size)}, "qwen2")
    with pytest.raises(ControlVectorMismatch, match="values per layer"):
        steer(chat, Steering.load([(tmp_path / "wide.gguf", 1.0)]))
    assert chat.steering.label == "calm x0.8"   # the chat keeps what steered it
