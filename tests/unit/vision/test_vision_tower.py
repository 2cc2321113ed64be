"""The vision tower (numpy reference and ONNX graph) against HF transformers'
Qwen2.5-VL, with the same weights read from both GGUF layouts, on images whose grids
leave partial windows; and the window / position arithmetic against HF's own."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.vision_utils import get_vision_position_ids, get_vision_window_index

from engine.errors import ImageError
from engine.gguf import GGUFModel
from engine.modelmath import vision_grid
from engine.reference import vision_tower as reference
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision import ImageInput, preprocess
from tests.fixtures.hf_vision import LAYOUTS, HFVision, open_layout, tiny_hf_model

RTOL = 1e-4  # max |ours - HF| / max |HF|
SIZES = [(37, 513), (300, 200), (448, 448)]  # (width, height): 1x18, 7x11 and 16x16 merged


def image(width: int, height: int, seed: int = 0) -> ImageInput:
    rng = np.random.default_rng(seed)
    return preprocess(Image.fromarray(rng.integers(0, 256, (height, width, 3), np.uint8)))


def hf_embeds(hf: HFVision, img: ImageInput) -> np.ndarray:
    with torch.no_grad():
        out = hf.model.model.visual(torch.from_numpy(img.pixel_values),
                                    grid_thw=torch.tensor([img.grid]))
    return out.pooler_output.numpy()


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    assert actual.shape == expected.shape
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


@pytest.fixture(scope="module")
def hf() -> HFVision:
    return tiny_hf_model()


@pytest.fixture(scope="module", params=LAYOUTS)
def model(request, hf, tmp_path_factory) -> GGUFModel:
    return open_layout(hf, request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def encoder(model) -> VisionEncoder:
    return VisionEncoder(model, threads=1)


def test_layout_is_the_one_asked_for(model, hf):
    vision = model.config.vision
    assert vision.layout in ("inline", "projector")
    assert (vision.n_layers, vision.hidden_size, vision.intermediate_size) == (4, 64, 100)
    assert vision.fullatt_block_indexes == hf.vision.fullatt_blocks


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_reference_matches_hf(model, hf, size, dtype):
    img = image(*size)
    out = reference.forward(model, img.pixel_values, img.grid, dtype=dtype)
    assert out.embeds.dtype == dtype
    assert relative_error(out.embeds, hf_embeds(hf, img)) < RTOL
    assert len(out.hidden_states) == model.config.vision.n_layers + 1


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_graph_matches_hf(encoder, hf, size):
    img = image(*size)
    embeds = encoder.encode(img)
    assert embeds.dtype == np.float32 and embeds.shape == (img.n_tokens, 64)
    assert relative_error(embeds, hf_embeds(hf, img)) < RTOL


def test_windows_matter(model, hf):
    """The same tower with full attention everywhere is far from HF: the window test
    above could not pass with the windows wired wrong."""
    img = image(300, 200)
    everywhere = tuple(range(model.config.vision.n_layers))
    vision = dataclasses.replace(model.config.vision, fullatt_block_indexes=everywhere)
    wrong = dataclasses.replace(model, config=dataclasses.replace(model.config, vision=vision))
    out = reference.forward(wrong, img.pixel_values, img.grid, dtype=np.float64)
    assert relative_error(out.embeds, hf_embeds(hf, img)) > 1e-2


def test_encoder_caches_by_digest(encoder):
    first, other = image(300, 200, seed=1), image(300, 200, seed=2)
    embeds = encoder.encode(first)
    assert encoder.encode(first) is embeds
    assert not embeds.flags.writeable
    assert not np.array_equal(encoder.encode(other), embeds)


def test_bad_grid_is_an_image_error(model):
    with pytest.raises(ImageError, match="grid"):
        reference.forward(model, np.zeros((6, 1176), np.float32), (1, 2, 3))


GRIDS = [(2, 36), (14, 22), (32, 32), (16, 16), (74, 54), (8, 8), (6, 30)]


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_window_layout_matches_hf(model, grid):
    vision = model.config.vision
    layout = vision_grid.window_layout(*grid, vision)
    window_index, cu_seqlens = get_vision_window_index(
        torch.tensor([(1, *grid)]), spatial_merge_size=vision.spatial_merge_size,
        window_size=vision.window_size, patch_size=vision.patch_size)
    np.testing.assert_array_equal(layout.cell_order, window_index.numpy())
    np.testing.assert_array_equal(layout.bounds, cu_seqlens.numpy())
    np.testing.assert_array_equal(layout.restore, torch.argsort(window_index).numpy())
    assert sorted(layout.patch_order) == list(range(grid[0] * grid[1]))


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_patch_positions_match_hf(grid):
    expected = get_vision_position_ids(torch.tensor([(1, *grid)]), 2)
    np.testing.assert_array_equal(vision_grid.patch_positions(*grid, 2), expected.numpy())
