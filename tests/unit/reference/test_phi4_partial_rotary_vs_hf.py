"""Phi-4-mini's partial rotary against HF transformers: a random-weight Phi3ForCausalLM shaped
like Phi-4-mini (partial_rotary_factor 0.75, LongRoPE factors for the turning 3/4, tied
embeddings, GQA), converted by llama.cpp's convert_hf_to_gguf.py in f32.

Only the first R = 48 of each head's 64 dims turn. The reference equals HF inside and past
the original context; exact-mode greedy tokens on the ONNX engine equal HF's; the Inside
tab's attention rows are HF's and the engine passes the reference check; llama.cpp runs
the same file as a second opinion. Pairing the turning dims (2i, 2i+1) instead of
(i, i + R/2) moves the logits far past the tolerance, so the checks see the convention.
ONNX Runtime's attention turns a multiple of 16 dims; other widths are refused by name.
Qwen2- and Gemma 3-layout files with rope.dimension_count below head_dim take the same
path (the ONNX engine against the reference, causal and with two-way image rows);
interleaved pairs (llama) with partial rotary are refused by name, as llama.cpp refuses them.
"""

from __future__ import annotations

import dataclasses

import llama_cpp
import numpy as np
import pytest
import torch

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import CorruptModel, UnsupportedModel
from engine.gguf import open_model
from engine.gguf.model import GGUFModel
from engine.inspect import inspect_context
from engine.reference.text import forward, greedy
from engine.runtime import decoder as runtime_decoder
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from tests.fixtures.greedy_runs import engine_greedy, hf_greedy
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.integration.test_engine_vs_hf import EXACT_ATOL
from tests.unit.reference.test_phi3_longrope_vs_hf import (
    CONTEXT,
    GREEDY,
    ORIGINAL,
    LongRope,
    converted,
    hf_logits,
    phi3_config,
    prompt,
)

HEAD_DIM, ROPE_DIMS = 64, 48
HEADS = 2  # and one kv head
HIDDEN = HEADS * HEAD_DIM
SPEC = TextSpec(hidden=HIDDEN, heads=HEADS, kv_heads=1)


@pytest.fixture(scope="module")
def phi4(tmp_path_factory) -> LongRope:
    rng = np.random.default_rng(1)
    half = ROPE_DIMS // 2
    config = phi3_config(
        tie=True, hidden=HIDDEN, heads=HEADS, partial_rotary_factor=ROPE_DIMS / HEAD_DIM,
        rope_type="longrope", original_max_position_embeddings=ORIGINAL,
        short_factor=(1.0 + rng.random(half)).tolist(),
        long_factor=(1.0 + 8.0 * rng.random(half)).tolist(),
    )
    hf, path = converted(tmp_path_factory.mktemp("phi4-mini"), config)
    return LongRope(hf, open_model(path))


def with_text(model: GGUFModel, **changes: object) -> GGUFModel:
    """The same weights under a changed text config."""
    text = dataclasses.replace(model.config.text, **changes)
    return dataclasses.replace(model, config=dataclasses.replace(model.config, text=text))


def test_the_file_reads_as_phi4_mini(phi4):
    text = phi4.model.config.text
    assert (text.head_dim, text.rope_dims) == (HEAD_DIM, ROPE_DIMS)
    assert text.tie_embeddings and text.n_kv_heads < text.n_heads
    assert len(text.rope_factors_short) == len(text.rope_factors_long) == ROPE_DIMS // 2
    assert phi4.hf.model.rotary_emb.inv_freq.shape == (ROPE_DIMS // 2,)


@pytest.mark.parametrize("length", [ORIGINAL - 8, ORIGINAL + 24])
def test_reference_equals_hf_inside_and_past_the_original_context(phi4, length):
    ids = prompt(length)
    expected = hf_logits(phi4, ids)
    np.testing.assert_allclose(forward(phi4.model, ids).logits, expected, atol=2e-5, rtol=0)
    paired = forward(with_text(phi4.model, rope_interleaved=True), ids).logits
    assert np.abs(paired - expected).max() > 100 * EXACT_ATOL


def test_exact_greedy_tokens_are_hfs(phi4):
    long_ids = prompt(ORIGINAL + 24)
    session = DecoderSession(phi4.model, exact=True, max_cache_len=CONTEXT, all_logits=True)
    delta = float(np.abs(session.forward(long_ids).logits - hf_logits(phi4, long_ids)).max())
    assert delta < EXACT_ATOL
    ids = prompt(ORIGINAL - 6)
    tokens = engine_greedy(phi4.model, ids, exact=True, n=GREEDY, max_cache_len=CONTEXT)
    assert tokens == hf_greedy(phi4.hf, ids, GREEDY)
    assert greedy(phi4.model, ids, GREEDY) == tokens


def test_inside_tab_attention_and_the_reference_check(phi4):
    """The Inside tab's attention rows are HF's; its lens' top token is HF's; the engine
    passes the reference check layer by layer."""
    ids = prompt(ORIGINAL + 24)
    context = PromptTokens.text(ids)
    inspection = inspect_context(phi4.model, context, str)
    phi4.hf.set_attn_implementation("eager")  # the implementation that returns attentions
    with torch.no_grad():
        out = phi4.hf(torch.tensor([ids]), output_attentions=True)
    hf_rows = np.stack([layer[0, :, -1, :].numpy() for layer in out.attentions])
    np.testing.assert_allclose(inspection.attention, hf_rows, atol=1e-5, rtol=0)
    assert inspection.lens[-1].top[0].id == int(out.logits[0, -1].argmax())
    report = check_against_reference(phi4.model, context, str, exact=True)
    assert report.ok, report.verdict


def llama_cpp_logits(path: str, ids: list[int]) -> np.ndarray:
    """llama.cpp's teacher-forced logits [S, V]; it turns with LongRoPE's long factors when
    its context is past the original one, as HF does for a sequence that long."""
    f32 = int(llama_cpp.GGML_TYPE_F32)  # its KV cache in f32 too, as HF's and Lantern's
    llm = llama_cpp.Llama(model_path=path, n_ctx=len(ids), logits_all=True, n_threads=1,
                          type_k=f32, type_v=f32, verbose=False)
    try:
        llm.eval(ids)
        return np.array(llm.scores[: len(ids)], dtype=np.float64)
    finally:
        llm.close()


def test_llama_cpp_agrees_on_the_same_file(phi4):
    ids = prompt(ORIGINAL + 24)
    theirs = llama_cpp_logits(str(phi4.model.path), ids)
    expected = hf_logits(phi4, ids)
    assert np.abs(theirs - expected).max() < EXACT_ATOL
    assert (theirs.argmax(axis=1) == expected.argmax(axis=1)).all()


@pytest.fixture(scope="module")
def qwen2_partial(tmp_path_factory) -> GGUFModel:
    path = tmp_path_factory.mktemp("qwen2-partial") / "m.gguf"
    write_model(path, "qwen2", SPEC,
                overrides={"qwen2.rope.dimension_count": ROPE_DIMS})
    return open_model(path)


BYTES = np.random.default_rng(2).integers(0, 256, 40).tolist()  # byte tokens of the vocabulary


def test_a_qwen2_layout_with_partial_rotary_runs_as_the_reference(qwen2_partial):
    """No second engine here: llama.cpp's qwen2 asserts that every dim turns."""
    assert qwen2_partial.config.text.rope_dims == ROPE_DIMS < qwen2_partial.config.text.head_dim
    expected = forward(qwen2_partial, BYTES).logits
    session = DecoderSession(qwen2_partial, exact=True, max_cache_len=64, all_logits=True)
    np.testing.assert_allclose(session.forward(BYTES).logits, expected, atol=EXACT_ATOL, rtol=0)
    every_dim = forward(with_text(qwen2_partial, partial_rope_dims=None), BYTES).logits
    assert np.abs(every_dim - expected).max() > 100 * EXACT_ATOL


def test_two_way_image_rows_turn_the_same_part_of_each_head(tmp_path, monkeypatch):
    """The masked attention Gemma 3 runs with images rotates q itself (RotaryEmbedding), on
    its global and its sliding layers; the image rows are fed as ids here."""
    path = write_model(tmp_path / "m.gguf", "gemma3", dataclasses.replace(SPEC, layers=3),
                       overrides={"gemma3.rope.dimension_count": ROPE_DIMS,
                                  "gemma3.attention.sliding_window": 8,
                                  "gemma3.attention.sliding_window_pattern": 2})
    model = open_model(path)
    assert model.config.text.local_rope and model.config.text.rope_dims == ROPE_DIMS
    monkeypatch.setattr(runtime_decoder, "two_way_images", lambda model: True)
    groups = np.full(len(BYTES), -1)
    groups[10:20] = 0  # ten rows of one image see each other
    expected = forward(model, BYTES, image_groups=groups).logits
    session = DecoderSession(model, exact=True, max_cache_len=64, all_logits=True)
    ours = session.forward(BYTES, image_groups=groups).logits
    np.testing.assert_allclose(ours, expected, atol=EXACT_ATOL, rtol=0)
    assert np.abs(forward(model, BYTES).logits - expected).max() > 100 * EXACT_ATOL


def test_partial_rotary_on_interleaved_pairs_is_refused_by_name(tmp_path):
    path = write_model(tmp_path / "m.gguf", "llama", SPEC,
                       overrides={"llama.rope.dimension_count": ROPE_DIMS})
    with pytest.raises(UnsupportedModel, match=r"partial rotary \(48 of 64 dims\) on interl"):
        open_model(path)


def test_a_rotary_width_onnx_runtime_cannot_turn_is_named(tmp_path):
    """The reference turns any even width; the engine's attention takes multiples of 16."""
    path = write_model(tmp_path / "m.gguf", "qwen2", SPEC,
                       overrides={"qwen2.rope.dimension_count": 40})
    model = open_model(path)
    assert np.isfinite(forward(model, [1, 2, 3]).logits).all()
    with pytest.raises(UnsupportedModel, match="rotary over 40 dims of each head"):
        DecoderSession(model, exact=True, max_cache_len=16)


@pytest.mark.parametrize("dims", [47, 66])
def test_an_odd_or_too_wide_rotary_is_named(tmp_path, dims):
    path = write_model(tmp_path / "m.gguf", "qwen2", SPEC,
                       overrides={"qwen2.rope.dimension_count": dims})
    with pytest.raises(CorruptModel, match=f"rope.dimension_count {dims} is not an even"):
        open_model(path)
