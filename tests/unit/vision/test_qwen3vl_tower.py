"""Qwen3-VL images against HF transformers, on the tiny random model llama.cpp's converter
wrote as text GGUF + mmproj (tests/fixtures/hf_qwen3vl.py): the processor's resizing rule
(its 65,536-pixel minimum included), the interpolated position table, the tower (numpy
reference and ONNX graph) with its DeepStack features, and an image prompt's logits and
greedy tokens through the engine in exact mode.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl as hf_pil
from transformers.models.qwen3_vl import modeling_qwen3_vl as hf_modeling

from app.models.list_model import described_entry, listed_entry
from engine.chat.events import TokenEvent
from engine.chat.options import Options
from engine.gguf import open_model
from engine.graph.kernels import kernels_for
from engine.inspect.inspection import Inspection, inspect_context
from engine.modelmath.vision_grid import position_interpolation
from engine.native import ENV
from engine.reference import qwen3vl_tower
from engine.reference.text import forward
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.runtime.vision_encoder import VisionEncoder
from engine.store import Store
from engine.tokenizer import load_tokenizer
from engine.vision.preprocess import MAX_PIXELS, QWEN3VL_MIN_PIXELS, preprocess_for
from engine.vision.prompt import image_prompt
from tests.fixtures.hf_qwen3vl import (
    DEEPSTACK,
    PREPROCESSOR,
    Qwen3VL,
    qwen3vl,
    write_ollama_layout,
)
from tests.fixtures.stores import StoreBuilder
from tests.integration.test_engine_vs_hf import EXACT_ATOL

GREEDY = 10
TEMPLATE = Path(__file__).parents[2] / "data" / "templates" / "qwen2.5vl.gotmpl"


@pytest.fixture(scope="module")
def qwen() -> Qwen3VL:
    return qwen3vl()


@pytest.fixture(scope="module")
def processor():
    """HF's Pillow processor with Qwen3-VL's settings."""
    size = PREPROCESSOR["size"]
    return hf_pil.Qwen2VLImageProcessorPil(
        patch_size=16, merge_size=2, temporal_patch_size=2, image_mean=[0.5] * 3,
        image_std=[0.5] * 3, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"])


def noise(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def image(qwen):
    """A small picture: the processor's minimum makes it 256 x 256 pixels (8 x 8 cells)."""
    return preprocess_for(qwen.paired.config.vision, noise(70, 50))


def test_the_projector_reads_as_qwen3vls_tower(qwen):
    vision = qwen.paired.config.vision
    assert (vision.tower, vision.layout, vision.patch_size) == ("qwen3vl", "projector", 16)
    assert vision.deepstack_layers == DEEPSTACK and vision.position_side == 4
    assert qwen.paired.config.text == qwen.text.config.text


@pytest.mark.parametrize("width, height", [(70, 50), (400, 90), (1000, 700), (33, 900)])
def test_preprocessing_is_hfs_with_its_minimum(qwen, processor, width, height):
    picture = noise(width, height, seed=width + height)
    ours = preprocess_for(qwen.paired.config.vision, picture)
    theirs = processor(picture)
    assert tuple(theirs["image_grid_thw"][0]) == ours.grid
    assert ours.grid[1] * ours.grid[2] * 16 * 16 >= QWEN3VL_MIN_PIXELS
    np.testing.assert_array_equal(ours.pixel_values, theirs["pixel_values"])


@pytest.mark.parametrize("grid", [(1, 4, 6), (1, 8, 4), (1, 2, 2), (1, 16, 10)])
def test_position_table_reads_as_hfs(qwen, grid):
    table = qwen.paired.tensors["v.position_embd.weight"].dequantize()
    rows, weights = position_interpolation(grid[1], grid[2], 4, merge=2)
    ours = (table[rows] * weights[..., None]).sum(axis=0)
    visual = qwen.hf.model.visual
    with torch.no_grad():
        rows, weights = hf_modeling.get_vision_interpolation_indices_and_weights(
            torch.tensor([grid]), num_grid_per_side=visual.num_grid_per_side,
            mode=visual.interpolation_mode, align_corners=visual.interpolation_align_corners,
            spatial_merge_size=2, kwargs={})
        theirs = (visual.pos_embed(rows) * weights[:, :, None]).sum(1)
    np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-6, rtol=0)


@torch.no_grad()
def hf_tower(qwen: Qwen3VL, image) -> tuple[np.ndarray, list[np.ndarray]]:
    out = qwen.hf.model.visual(torch.tensor(image.pixel_values), grid_thw=torch.tensor(
        [image.grid]))
    embeds, deepstack = out if isinstance(out, tuple) else (out.pooler_output,
                                                             out.deepstack_features)
    return embeds.numpy(), [d.numpy() for d in deepstack]


def test_reference_tower_and_deepstack_are_hfs(qwen, image):
    ours = qwen3vl_tower.forward(qwen.paired, image.pixel_values, image.grid)
    embeds, deepstack = hf_tower(qwen, image)
    assert ours.embeds.shape == (image.n_tokens, 64) and len(ours.deepstack) == 2
    np.testing.assert_allclose(ours.embeds, embeds, atol=1e-5, rtol=0)
    np.testing.assert_allclose(ours.deepstack, np.stack(deepstack), atol=1e-5, rtol=0)


def test_graph_tower_equals_the_reference(qwen, image):
    encoded = VisionEncoder(qwen.paired, threads=1).encode(image)
    expected = qwen3vl_tower.forward(qwen.paired, image.pixel_values, image.grid)
    assert encoded.shape == (3, image.n_tokens, 64)
    np.testing.assert_allclose(encoded[0], expected.embeds, atol=1e-5, rtol=0)
    np.testing.assert_allclose(encoded[1:], expected.deepstack, atol=1e-5, rtol=0)


def test_ollamas_one_file_tower_encodes_as_the_mmproj(qwen, image, tmp_path):
    """Ollama's inline tower (q|k|v split, the Conv3d whole, DeepStack mergers numbered by
    position) reads into the same config and gives the same features as llama.cpp's."""
    inline = open_model(write_ollama_layout(qwen, tmp_path / "ollama-qwen3vl.gguf"))
    assert inline.config.vision == replace(qwen.paired.config.vision, layout="inline")
    ours = VisionEncoder(inline, threads=1).encode(image)
    np.testing.assert_allclose(ours, VisionEncoder(qwen.paired, threads=1).encode(image),
                               atol=1e-6, rtol=0)


def image_ids(qwen: Qwen3VL) -> list[int]:
    """Text, one image placeholder as the chat template leaves it, text."""
    return (qwen.prompt[:6] + [qwen.token("<|vision_start|>"), qwen.token("<|image_pad|>"),
                               qwen.token("<|vision_end|>")] + qwen.prompt[6:14])


def hf_inputs(qwen: Qwen3VL, ids, image) -> dict:
    input_ids = torch.tensor([ids])
    inputs = {"input_ids": input_ids, "pixel_values": torch.tensor(image.pixel_values),
              "image_grid_thw": torch.tensor([image.grid])}
    if "mm_token_type_ids" in qwen.hf.model.get_rope_index.__code__.co_varnames:
        inputs["mm_token_type_ids"] = (input_ids == qwen.token("<|image_pad|>")).int()
    return inputs


def test_image_prompt_logits_and_greedy_tokens_are_hfs(qwen, image):
    image_prompt_is_hfs(qwen, image)


def image_prompt_is_hfs(qwen: Qwen3VL, image) -> None:
    """An image prompt through the exact engine: HF's logits and greedy tokens; the
    reference's logits, which move away without the DeepStack features (also run on the
    MoE model)."""
    prompt = image_prompt(image_ids(qwen), [image], qwen.paired.config,
                          VisionEncoder(qwen.paired, threads=1).encode)
    assert prompt.image_deepstack is not None and prompt.image_deepstack.shape[0] == 2
    ids = prompt.ids.tolist()
    with torch.no_grad():
        expected = qwen.hf(**hf_inputs(qwen, ids, image)).logits[0].numpy()
        hf_tokens = qwen.hf.generate(**hf_inputs(qwen, ids, image), max_new_tokens=GREEDY,
                                     min_new_tokens=GREEDY, do_sample=False)[0, len(ids):]
    session = DecoderSession(qwen.paired, exact=True, max_cache_len=128, all_logits=True)
    embeds = session.embed(prompt.ids)
    embeds[prompt.image_rows] = prompt.image_embeds
    logits = session.forward(inputs_embeds=embeds, positions=prompt.positions,
                             deepstack=prompt.deepstack()).logits
    assert float(np.abs(logits - expected).max()) < EXACT_ATOL
    reference = forward(qwen.paired, inputs_embeds=embeds, positions=prompt.positions,
                        deepstack=prompt.deepstack()).logits
    np.testing.assert_allclose(reference, expected, atol=1e-4, rtol=0)
    without = forward(qwen.paired, inputs_embeds=embeds, positions=prompt.positions).logits
    assert np.abs(without - expected).max() > 50 * EXACT_ATOL  # DeepStack matters

    tokens, step = [], logits[-1]
    for k in range(GREEDY):
        tokens.append(int(step.argmax()))
        step = session.forward([tokens[-1]], positions=[prompt.next_position + k]).logits[-1]
    assert tokens == hf_tokens.tolist()


def test_a_last_row_run_apart_keeps_its_deepstack_row(qwen, monkeypatch):
    """Where a many-token forward runs its last row alone (engine.graph.kernels, 3.: the
    MatMulNBits path; the in-place op computes every row alike by construction), that row
    still takes its own DeepStack features: logits as one run's and the reference's,
    unlike the reference's without that row's features."""
    monkeypatch.setenv(ENV, "off")
    model = qwen.paired
    n, k = 6, len(model.config.vision.deepstack_layers)
    ids = np.asarray(qwen.prompt[:n])
    positions = np.broadcast_to(np.arange(n), (3, n))
    features = np.random.default_rng(0).standard_normal(
        (k, n, model.config.text.hidden_size)).astype(np.float32)
    logits = {}
    for apart in ((4, 8), ()):
        session = DecoderSession(model, max_cache_len=16, cache=False,
                                 kernels=replace(kernels_for(), rows_apart_bits=apart))
        assert session.kernels.rows_apart_bits == apart
        logits[apart] = session.forward(input_ids=ids, positions=positions,
                                        deepstack=features).logits
    np.testing.assert_allclose(logits[(4, 8)], logits[()], atol=1e-4, rtol=0)
    reference = forward(model, ids, positions, deepstack=features).logits[-1]
    np.testing.assert_allclose(logits[(4, 8)], reference, atol=1e-3, rtol=0)
    cut = features.copy()
    cut[:, -1] = 0
    without = forward(model, ids, positions, deepstack=cut).logits[-1]
    assert np.abs(without - reference).max() > 0.1  # the last row's features matter


def test_reference_check_and_inside_tab_on_an_image_prompt(qwen, image):
    image_prompt_checks_and_inspects(qwen, image)


def image_prompt_checks_and_inspects(qwen: Qwen3VL, image) -> Inspection:
    """Fast and exact graphs pass the layer-by-layer check with DeepStack fed; the Inside
    tab's lens ends on HF's top-1 and its attention reaches the image rows."""
    prompt = image_prompt(image_ids(qwen), [image], qwen.paired.config,
                          VisionEncoder(qwen.paired, threads=1).encode)
    piece = load_tokenizer(qwen.paired.path).id_to_piece
    for exact in (True, False):
        report = check_against_reference(qwen.paired, prompt, piece, exact=exact)
        assert report.first_off is None, (exact, [(r.label, r.max_abs_diff) for r in report.rows])
    with torch.no_grad():
        expected = qwen.hf(**hf_inputs(qwen, prompt.ids.tolist(), image)).logits[0, -1]
    inspection = inspect_context(qwen.paired, prompt, piece)
    assert inspection.lens[-1].top[0].id == int(expected.argmax())
    assert inspection.attention[:, :, prompt.image_rows].sum() > 0
    return inspection


def test_lists_as_runnable_with_vision_and_chats_about_an_image_as_hf(qwen, tmp_path):
    store_chat_is_hfs(qwen, tmp_path)


def store_chat_is_hfs(qwen: Qwen3VL, tmp_path: Path) -> None:
    """From a store (text GGUF + projector layer, a Qwen-style Go template): the model list
    says runnable with vision, as its family; a chat turn with a picture answers HF's
    greedy tokens."""
    family = qwen.text.config.architecture
    builder = StoreBuilder(tmp_path / "models")
    builder.add("qwen3-vl:tiny", qwen.text.path, projector=qwen.projector,
                template=TEMPLATE.read_text(encoding="utf-8"),
                config={"model_format": "gguf", "model_family": family,
                        "model_type": "1M", "file_type": "F32"})
    [local] = Store.open(tmp_path / "models").list()
    entry = described_entry(listed_entry(local))
    assert entry.runnable and entry.family == family and entry.vision, entry.line
    path = tmp_path / "photo.png"
    noise(90, 60, seed=3).save(path)
    chat = LocalSession(load_model(local, exact=True, num_ctx=256),
                       Options(temperature=0, num_predict=GREEDY))
    image = chat.prepare_image(str(path), MAX_PIXELS)
    assert image.grid == (1, 14, 20)  # 60x90 grown to the processor's 65,536-pixel minimum
    events = list(chat.send("what is this?", (image,)))
    answer = [e.id for e in events if isinstance(e, TokenEvent)]
    ids = chat.last_prompt.ids.tolist()
    with torch.no_grad():
        expected = qwen.hf.generate(**hf_inputs(qwen, ids, image), max_new_tokens=GREEDY,
                                    min_new_tokens=GREEDY, do_sample=False)[0, len(ids):]
    assert answer == expected.tolist()
