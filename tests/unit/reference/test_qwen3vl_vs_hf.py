"""Qwen3-VL's text model against HF transformers: a random-weight
Qwen3VLForConditionalGeneration (tiny sizes) converted by llama.cpp's convert_hf_to_gguf.py
(tests/fixtures/hf_qwen3vl.py), and the same weights in Ollama's one-file layout
(``mrope_sections``, tower inline).

Text prompts: reference = HF, exact-mode logits within the demo models' tolerance and
greedy tokens = HF's. Prompts with image pad tokens (their token embeddings kept, the tower
aside): the 3-D positions are HF's get_rope_index, and the interleaved M-RoPE (the t, h, w
streams taking turns) gives HF's logits, where Qwen2-VL's chunked sections would not.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from engine.gguf import open_model
from engine.modelmath.rope import mrope_streams
from engine.reference.text import forward
from engine.reference.weights import ReferenceWeights
from engine.runtime.decoder import DecoderSession
from engine.tokenizer import load_tokenizer
from engine.vision.mrope import mrope_positions
from tests.fixtures.hf_qwen3vl import SECTIONS, Qwen3VL, qwen3vl, write_ollama_layout
from tests.fixtures.sentencepiece_models import corpus_lines
from tests.integration.test_engine_vs_hf import EXACT_ATOL

GREEDY = 12


@pytest.fixture(scope="module")
def qwen() -> Qwen3VL:
    return qwen3vl()


@torch.no_grad()
def hf_logits(qwen: Qwen3VL, ids: list[int], positions: np.ndarray | None = None) -> np.ndarray:
    position_ids = None if positions is None else torch.tensor(positions)[:, None, :]
    return qwen.hf(torch.tensor([ids]), position_ids=position_ids).logits[0].numpy()


def pad_prompt(qwen: Qwen3VL) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Text, a 4x6-patch image's 6 pad tokens, text, a 2x8-patch image's 4, text."""
    text, start, end = qwen.prompt, qwen.token("<|vision_start|>"), qwen.token("<|vision_end|>")
    pad = qwen.token("<|image_pad|>")
    ids = (text[:5] + [start] + [pad] * 6 + [end] + text[5:9] + [start] + [pad] * 4 + [end]
           + text[9:14])
    return ids, [(1, 4, 6), (1, 2, 8)]


def test_the_text_file_reads_as_qwen3vl(qwen):
    text = qwen.text.config.text
    assert text.architecture == "qwen3vl" and text.qk_norm and not text.qkv_bias
    assert text.mrope_sections == SECTIONS and text.mrope_interleaved
    assert text.head_dim == 32 and not text.tie_embeddings
    assert qwen.text.config.vision is None


def test_interleaved_streams_are_hfs(qwen):
    """HF's interleaving (recomposition_frequencies) of three position streams told apart
    by their value."""
    rotary = qwen.hf.model.language_model.rotary_emb
    half = sum(SECTIONS)
    freqs = torch.stack([torch.full((1, 1, half), float(k)) for k in range(3)])
    picked = rotary.recomposition_frequencies(freqs)[0, 0, :half].long().tolist()
    assert mrope_streams(SECTIONS, interleaved=True).tolist() == picked
    assert len(set(picked)) == 3


def test_vocabulary_tokenizes_as_sentencepiece(qwen):
    tokenizer = load_tokenizer(qwen.text.path)
    for line in corpus_lines()[::5]:
        assert tokenizer.encode(line) == qwen.sp.encode(line), line


def test_reference_equals_hf_on_text(qwen):
    expected = hf_logits(qwen, qwen.prompt)
    assert np.abs(expected).max() > 1.0  # logits big enough to show a wrong step
    np.testing.assert_allclose(forward(qwen.text, qwen.prompt).logits, expected,
                               atol=2e-5, rtol=0)


def test_exact_engine_logits_and_greedy_tokens_are_hfs(qwen):
    session = DecoderSession(qwen.text, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(qwen.prompt).logits
    assert float(np.abs(logits - hf_logits(qwen, qwen.prompt)).max()) < EXACT_ATOL
    with torch.no_grad():
        hf_tokens = qwen.hf.generate(torch.tensor([qwen.prompt]), max_new_tokens=GREEDY,
                                     min_new_tokens=GREEDY, do_sample=False)[0]
    session = DecoderSession(qwen.text, exact=True, max_cache_len=64)
    step = session.forward(qwen.prompt).logits
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(step.argmax()))
        step = session.forward([tokens[-1]]).logits
    assert tokens == hf_tokens[len(qwen.prompt):].tolist()


def hf_rope_index(qwen: Qwen3VL, ids: list[int], grids) -> tuple[np.ndarray, int]:
    """HF's positions (newer transformers ask which tokens are image tokens, as
    mm_token_type_ids)."""
    input_ids = torch.tensor([ids])
    get_rope_index = qwen.hf.model.get_rope_index
    extra = {}
    if "mm_token_type_ids" in get_rope_index.__code__.co_varnames:
        extra["mm_token_type_ids"] = (input_ids == qwen.token("<|image_pad|>")).int()
    positions, delta = get_rope_index(input_ids, image_grid_thw=torch.tensor(grids), **extra)
    return positions[:, 0].numpy(), int(delta)


def test_image_positions_are_hfs_rope_index(qwen):
    ids, grids = pad_prompt(qwen)
    ours = mrope_positions(ids, qwen.token("<|image_pad|>"), grids, merge_size=2)
    theirs, delta = hf_rope_index(qwen, ids, grids)
    np.testing.assert_array_equal(ours.positions, theirs)
    assert ours.next_position == delta + len(ids) < len(ids)


def test_interleaved_mrope_on_image_positions_is_hfs(qwen):
    """Reference and exact engine equal HF at 3-D positions; the chunked layout would not."""
    ids, grids = pad_prompt(qwen)
    positions = mrope_positions(ids, qwen.token("<|image_pad|>"), grids, 2).positions
    expected = hf_logits(qwen, ids, positions)
    np.testing.assert_allclose(forward(qwen.text, ids, positions=positions).logits, expected,
                               atol=2e-5, rtol=0)
    session = DecoderSession(qwen.text, exact=True, max_cache_len=64, all_logits=True)
    engine = session.forward(ids, positions=positions).logits
    assert float(np.abs(engine - expected).max()) < EXACT_ATOL
    weights = ReferenceWeights(qwen.text)
    weights.config = dataclasses.replace(weights.config, mrope_interleaved=False)
    chunked = forward(qwen.text, ids, positions=positions, weights=weights).logits
    assert np.abs(chunked - expected).max() > 50 * EXACT_ATOL


def test_ollamas_one_file_layout_reads_alike(qwen, tmp_path):
    """Ollama's key for the sections (mrope_sections) and its inline tower: the same text
    model, the same logits."""
    model = open_model(write_ollama_layout(qwen, tmp_path / "ollama-qwen3vl.gguf"))
    assert model.config.text == qwen.text.config.text
    assert model.config.vision is not None and model.config.vision.layout == "inline"
    np.testing.assert_array_equal(forward(model, qwen.prompt).logits,
                                  forward(qwen.text, qwen.prompt).logits)
