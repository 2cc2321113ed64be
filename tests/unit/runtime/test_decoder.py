"""DecoderSession on tiny random GGUFs of every family, against the numpy reference.

Exact mode (fp32 activations, float-exact weights) must match the reference within ~1e-3
through prefill, single-token decode, multi-token continuation, truncation, M-RoPE and
embedding input; fast mode (int8 activations) must stay close and pick the same token.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from engine import heap
from engine.gguf import open_model
from engine.modelmath.stats import layer_stats
from engine.reference import forward
from engine.runtime.decoder import SPIN_WAIT, DecoderSession
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model

ATOL = 1e-3
FAMILIES = ("qwen2", "qwen3", "qwen25vl", "qwen2vl", "llama")
PROMPT = [5, 71, 300, 12, 99, 250, 3]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoder")
    paths = {arch: write_model(root / f"{arch}.gguf", arch, seed=i)
             for i, arch in enumerate(FAMILIES)}
    return {arch: open_model(path) for arch, path in paths.items()}


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str, atol: float = ATOL):
    diff = float(np.abs(actual - expected).max())
    scale = float(np.abs(expected).max())
    assert diff < atol, f"{what}: max |delta| {diff:.3g} >= {atol} (scale {scale:.3g})"


@pytest.mark.parametrize("arch", FAMILIES)
def test_exact_prefill_and_layer_stats_match_reference(models, arch):
    model = models[arch]
    session = DecoderSession(model, exact=True, max_cache_len=64, layer_stats=True)
    step = session.forward(input_ids=PROMPT)
    ref = forward(model, PROMPT)
    assert step.logits.shape == (model.config.text.vocab_size,)
    assert_close(step.logits, ref.logits[-1], f"{arch} logits")
    assert step.layer_stats.shape == (model.config.text.n_layers + 1, 4)
    assert_close(step.layer_stats, layer_stats(ref.hidden_states), f"{arch} layer stats")
    assert session.cache_len == len(PROMPT)


@pytest.mark.parametrize("arch", ("qwen2", "qwen3", "llama"))
def test_decode_continuation_and_truncate_follow_the_full_sequence(models, arch):
    model = models[arch]
    session = DecoderSession(model, exact=True, max_cache_len=32)
    tokens = PROMPT + [17, 42, 8, 200, 150, 33]
    full = forward(model, tokens).logits  # [S, V]
    session.forward(input_ids=tokens[:4])
    for i in range(4, 7):  # one token at a time
        assert_close(session.forward(input_ids=tokens[i:i + 1]).logits, full[i], f"decode {i}")
    step = session.forward(input_ids=tokens[7:])  # several tokens on an existing cache
    assert_close(step.logits, full[-1], "continuation")
    assert session.cache_len == len(tokens)

    session.truncate(5)  # keep a common prefix, then take another branch
    branch = tokens[:5] + [77, 78, 79]
    step = session.forward(input_ids=branch[5:])
    assert_close(step.logits, forward(model, branch).logits[-1], "after truncate")
    session.reset()
    assert_close(session.forward(input_ids=PROMPT).logits, full[len(PROMPT) - 1], "after reset")


@pytest.mark.parametrize("arch", ("qwen25vl", "qwen2vl"))
def test_mrope_positions_and_image_embeddings(models, arch):
    """An 'image' of 2x3 merged cells: its rows take (t, h, w) = (p, p+row, p+col), and its
    embeddings come in as inputs_embeds; text resumes at p + max(2, 3)."""
    model = models[arch]
    hidden = model.config.text.hidden_size
    p = 2
    rows, cols = np.divmod(np.arange(6), 3)
    image = np.stack([np.full(6, p), p + rows, p + cols])  # [3, 6]
    text_before = np.tile(np.arange(p), (3, 1))
    text_after = np.tile(np.arange(p + 3, p + 6), (3, 1))
    positions = np.concatenate([text_before, image, text_after], axis=1)  # [3, 11]
    rng = np.random.default_rng(0)
    session = DecoderSession(model, exact=True, max_cache_len=32, all_logits=True)
    embeds = session.embed([1, 2] + [9] * 6 + [3, 4, 5])
    embeds[2:8] = rng.standard_normal((6, hidden)).astype(np.float32) * 0.1
    step = session.forward(inputs_embeds=embeds[:9], positions=positions[:, :9])
    ref = forward(model, inputs_embeds=embeds, positions=positions).logits
    assert step.logits.shape == (9, model.config.text.vocab_size)
    assert_close(step.logits, ref[:9], "M-RoPE prefill, all positions")
    step = session.forward(inputs_embeds=embeds[9:], positions=positions[:, 9:])
    assert_close(step.logits, ref[9:], "M-RoPE continuation")
    flat = forward(model, inputs_embeds=embeds).logits  # 1-D positions give other logits
    assert np.abs(flat[-1] - ref[-1]).max() > 10 * ATOL


@pytest.mark.parametrize("native", ["on", "off"])
def test_embed_reads_the_gguf_rows(models, monkeypatch, native):
    """Gathered by the op library, or by gguf-py where it is absent: the same rows."""
    monkeypatch.setenv("LANTERN_NATIVE", native)
    model = models["qwen2"]
    session = DecoderSession(model, exact=True, max_cache_len=8)
    expected = model.tensors["token_embd.weight"].dequantize()[[3, 0, 3]]
    np.testing.assert_array_equal(session.embed([3, 0, 3]), expected)


@pytest.mark.parametrize("qtype", [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1,
                                   T.Q4_K, T.Q5_K, T.Q6_K])
def test_each_weight_type_exact_and_fast(tmp_path, qtype):
    """Every linear weight in ``qtype`` (k-quants need rows of 256: hidden 256)."""
    spec = TextSpec(hidden=256, heads=4, kv_heads=2, ffn=256, layers=2)
    model = open_model(write_model(tmp_path / "m.gguf", "qwen2", spec, default_type=qtype))
    expected = forward(model, PROMPT).logits[-1]
    exact = DecoderSession(model, exact=True, max_cache_len=16).forward(input_ids=PROMPT)
    assert_close(exact.logits, expected, f"{qtype.name} exact")
    fast = DecoderSession(model, max_cache_len=16).forward(input_ids=PROMPT).logits
    # int8 activations: close in relative terms, and the same winner unless the reference's
    # two best are closer than that drift
    scale = np.abs(expected).max()
    drift = np.abs(fast - expected).max()
    assert drift < 0.05 * scale, f"{qtype.name} fast drifted"
    assert expected[fast.argmax()] >= expected.max() - 2 * drift


def test_tied_embeddings_use_token_embd_as_lm_head(tmp_path):
    spec = TextSpec(tie_embeddings=True)
    model = open_model(write_model(tmp_path / "tied.gguf", "qwen2", spec, default_type=T.Q8_0))
    assert model.config.text.tie_embeddings
    step = DecoderSession(model, exact=True, max_cache_len=16).forward(input_ids=PROMPT)
    assert_close(step.logits, forward(model, PROMPT).logits[-1], "tied lm_head")


def test_cache_overflow_is_a_generation_error(models):
    from engine.errors import GenerationError

    session = DecoderSession(models["qwen2"], max_cache_len=8)
    session.forward(input_ids=PROMPT)
    with pytest.raises(GenerationError, match="KV cache of 8"):
        session.forward(input_ids=[1, 2])
    assert session.cache_len == len(PROMPT)


def test_a_dropped_decoder_gives_back_its_sessions_memory_once_the_session_is_gone(
        models, monkeypatch):
    """glibc would unmap the heaps a session emptied inside some later small free, with
    the GIL held; the decoder's teardown ends the session, then trims (off the GIL)."""
    gc.collect()  # sessions other tests left behind would trim in the collection below
    session = DecoderSession(models["qwen2"], exact=True, max_cache_len=16)
    ended = weakref.ref(session._session)
    trims: list[bool] = []
    monkeypatch.setattr(heap, "_trim", lambda: lambda pad: trims.append(ended() is None))
    del session
    gc.collect()
    assert trims == [True]


@pytest.mark.parametrize(("setting", "spins"), [(None, "1"), ("0", "0"), ("1", "1")])
def test_a_steps_threads_spin_unless_told_not_to_and_never_between_steps(
        models, monkeypatch, setting, spins):
    """By default a step's threads spin-wait between its ops; LANTERN_SPIN_WAIT=0 (a busy
    machine) puts them to sleep instead; either way they stop when the step returns. The
    tokens are the same: spinning changes when a thread runs, not what it computes."""
    if setting is None:
        monkeypatch.delenv(SPIN_WAIT, raising=False)
    else:
        monkeypatch.setenv(SPIN_WAIT, setting)
    session = DecoderSession(models["qwen2"], max_cache_len=32)
    options = session._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == spins
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    assert session.spin_wait == (spins == "1")
    monkeypatch.setenv(SPIN_WAIT, "0" if spins == "1" else "1")
    other = DecoderSession(models["qwen2"], max_cache_len=32)
    np.testing.assert_array_equal(session.forward(input_ids=PROMPT).logits,
                                  other.forward(input_ids=PROMPT).logits)
