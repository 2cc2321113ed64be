"""Qwen3-VL's MoE sizes against HF transformers: a random-weight
Qwen3VLMoeForConditionalGeneration (3 layers, every MLP 8 experts of which each token takes
2) converted by llama.cpp's convert_hf_to_gguf.py into a ``qwen3vlmoe`` text GGUF and a
Qwen3-VL mmproj (tests/fixtures/hf_qwen3vl.py), and the same weights in Ollama's one-file
layout (tower inline, keys under ``qwen3vlmoe.vision.``).

Text: the numpy reference and the exact engine give HF's logits, the engine HF's greedy
tokens. Images and video: the tower's features and DeepStack rows feed the MoE decoder to
HF's logits and greedy tokens (the checks of tests/unit/vision/test_qwen3vl_tower.py and
test_qwen3vl_video.py), from the file pair and from a store through the model list and a
chat.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.gguf import open_model
from engine.native import custom_ops
from engine.reference.text import forward
from engine.reference.weights import ReferenceWeights
from engine.runtime.decoder import DecoderSession
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.preprocess import preprocess_for
from engine.vision.video import prepare_video
from tests.fixtures.hf_qwen3vl import (
    DEEPSTACK,
    EXPERTS,
    SECTIONS,
    USED,
    Qwen3VL,
    qwen3vl,
    write_ollama_layout,
)
from tests.integration.test_engine_vs_hf import EXACT_ATOL
from tests.unit.reference.test_qwen3vl_vs_hf import hf_logits
from tests.unit.vision.test_qwen3vl_tower import (
    hf_inputs,
    image_prompt_checks_and_inspects,
    image_prompt_is_hfs,
    noise,
    store_chat_is_hfs,
)
from tests.unit.vision.test_qwen3vl_video import gif, video_prompt, video_prompt_is_hfs

pytestmark = pytest.mark.skipif(not custom_ops().available,
                                reason="experts run only on Lantern's op library")

GREEDY = 10


@pytest.fixture(scope="module")
def qwen() -> Qwen3VL:
    return qwen3vl(moe=True)


@pytest.fixture(scope="module")
def image(qwen):
    """The processor's minimum makes it 256 x 256 pixels (8 x 8 cells)."""
    return preprocess_for(qwen.paired.config.vision, noise(70, 50))


def test_the_files_read_as_qwen3vl_with_experts(qwen):
    text = qwen.text.config.text
    assert text.architecture == "qwen3vlmoe" and text.qk_norm and not text.qkv_bias
    assert (text.experts, text.experts_used, text.expert_intermediate_size) == (EXPERTS, USED, 48)
    assert text.expert_weights_norm and text.expert_gating == "softmax"
    assert text.mrope_sections == SECTIONS and text.mrope_interleaved
    assert qwen.text.config.vision is None
    vision = qwen.paired.config.vision
    assert (vision.tower, vision.layout, vision.deepstack_layers) == ("qwen3vl", "projector",
                                                                      DEEPSTACK)
    assert qwen.paired.config.text == text


def test_reference_and_exact_engine_give_hfs_logits_and_greedy_tokens(qwen):
    expected = hf_logits(qwen, qwen.prompt)
    assert np.abs(expected).max() > 1.0  # logits big enough to show a wrong step
    np.testing.assert_allclose(forward(qwen.text, qwen.prompt).logits, expected,
                               atol=2e-5, rtol=0)
    session = DecoderSession(qwen.text, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(qwen.prompt).logits
    assert float(np.abs(logits - expected).max()) < EXACT_ATOL
    with torch.no_grad():
        hf_tokens = qwen.hf.generate(torch.tensor([qwen.prompt]), max_new_tokens=GREEDY,
                                     min_new_tokens=GREEDY, do_sample=False)[0]
    tokens, step = [], logits[-1]
    for _ in range(GREEDY):
        tokens.append(int(step.argmax()))
        step = session.forward([tokens[-1]]).logits[-1]
    assert tokens == hf_tokens[len(qwen.prompt):].tolist()


def test_the_chosen_experts_weights_are_renormalised_as_hfs(qwen):
    """HF always renormalises the top-k weights; without it the logits move away."""
    weights = ReferenceWeights(qwen.text)
    weights.config = dataclasses.replace(weights.config, expert_weights_norm=False)
    unnormalised = forward(qwen.text, qwen.prompt, weights=weights).logits
    assert np.abs(unnormalised - hf_logits(qwen, qwen.prompt)).max() > 50 * EXACT_ATOL


def test_image_prompt_logits_and_greedy_tokens_are_hfs(qwen, image):
    image_prompt_is_hfs(qwen, image)


def test_reference_check_and_inside_tab_show_hfs_experts_on_an_image_prompt(qwen, image):
    """The layer-by-layer check passes (fast and exact); the Inside tab shows, per layer,
    the experts the last token took and their weights, as HF's router gives them."""
    inspection = image_prompt_checks_and_inspects(qwen, image)
    with torch.no_grad():
        out = qwen.hf(**hf_inputs(qwen, list(inspection.ids), image),
                      output_router_logits=True)
    assert len(out.router_logits) == len(inspection.experts) == 3
    for choice, router_logits in zip(inspection.experts, out.router_logits, strict=True):
        weights, ids = torch.topk(torch.softmax(router_logits[-1].float(), dim=-1), USED)
        assert choice.ids.tolist() == ids.tolist()
        np.testing.assert_allclose(choice.weights, (weights / weights.sum()).numpy(), atol=1e-5)


def test_video_prompt_logits_and_greedy_tokens_are_hfs(qwen):
    video = prepare_video(qwen.paired.config.vision, gif())
    video_prompt_is_hfs(qwen, video, video_prompt(qwen, video))


def test_ollamas_one_file_layout_reads_alike(qwen, image, tmp_path):
    """Ollama's qwen3vlmoe file (keys under its own name, tower inline): the same text model
    and tower, the same logits and image features."""
    model = open_model(write_ollama_layout(qwen, tmp_path / "ollama-qwen3vlmoe.gguf"))
    assert model.config.text == qwen.text.config.text
    assert model.config.vision == replace(qwen.paired.config.vision, layout="inline")
    np.testing.assert_array_equal(forward(model, qwen.prompt).logits,
                                  forward(qwen.text, qwen.prompt).logits)
    np.testing.assert_allclose(VisionEncoder(model, threads=1).encode(image),
                               VisionEncoder(qwen.paired, threads=1).encode(image),
                               atol=1e-6, rtol=0)


def test_lists_as_runnable_with_vision_and_chats_about_an_image_as_hf(qwen, tmp_path):
    store_chat_is_hfs(qwen, tmp_path)
