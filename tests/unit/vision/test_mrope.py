"""3-D M-RoPE positions against HF's Qwen2_5_VLModel.get_rope_index (transformers 5.x,
which needs mm_token_type_ids: 1 at image pads)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.errors import ImageError
from engine.vision.mrope import mrope_positions
from tests.fixtures.hf_vision import HFVision, tiny_hf_model
from tests.fixtures.synthetic_gguf import vocabulary

_SPECIAL = vocabulary().special
START, END = _SPECIAL["<|vision_start|>"], _SPECIAL["<|vision_end|>"]
PAD = _SPECIAL["<|image_pad|>"]


@pytest.fixture(scope="module")
def hf() -> HFVision:
    return tiny_hf_model()


def prompt(*parts: int | tuple[int, int]) -> tuple[list[int], list[tuple[int, int, int]]]:
    """ints: that many text tokens; (gh, gw): an image of that patch grid."""
    ids: list[int] = []
    grids = []
    for part in parts:
        if isinstance(part, int):
            ids += list(range(10, 10 + part))
        else:
            grids.append((1, *part))
            ids += [START] + [PAD] * (part[0] * part[1] // 4) + [END]
    return ids, grids


CASES = {
    "one image, text after": ((5, (4, 6), 7),),
    "image first": (((8, 8), 3),),
    "two images, text after": ((3, (2, 36), 4, (14, 22), 6),),
    "two images back to back": ((2, (6, 4), (4, 10), 1),),
    "two turns": ((4, (16, 16), 9, 5, (2, 2), 3),),
}


@pytest.mark.parametrize("parts", [c[0] for c in CASES.values()], ids=list(CASES))
def test_positions_match_hf(hf, parts):
    assert hf.model.config.image_token_id == PAD
    assert hf.model.config.vision_start_token_id == START
    ids, grids = prompt(*parts)
    ours = mrope_positions(ids, PAD, grids, merge_size=2)
    input_ids = torch.tensor([ids])
    positions, delta = hf.model.model.get_rope_index(
        input_ids, mm_token_type_ids=(input_ids == PAD).int(),
        image_grid_thw=torch.tensor(grids))
    np.testing.assert_array_equal(ours.positions, positions[:, 0].numpy())
    assert ours.next_position == int(delta) + len(ids)
    assert ours.next_position < len(ids)  # images take fewer positions than tokens


def test_image_block_positions():
    ids, grids = prompt(2, (4, 6), 1)  # merged 2x3 image at running index 3
    pos = mrope_positions(ids, PAD, grids, merge_size=2).positions
    image = pos[:, 3:9]
    np.testing.assert_array_equal(image[0], [3] * 6)
    np.testing.assert_array_equal(image[1], [3, 3, 3, 4, 4, 4])
    np.testing.assert_array_equal(image[2], [3, 4, 5, 3, 4, 5])
    np.testing.assert_array_equal(pos[:, 9], [6, 6, 6])  # vision_end: 3 + max(2, 3)


def test_text_only_is_one_dimensional():
    out = mrope_positions(list(range(10, 17)), PAD, [], merge_size=2)
    np.testing.assert_array_equal(out.positions, np.tile(np.arange(7), (3, 1)))
    assert out.next_position == 7


@pytest.mark.parametrize("grids", [[(1, 4, 4), (1, 4, 4)], [(1, 4, 8)]])
def test_pad_count_mismatch_is_an_image_error(grids):
    ids, _ = prompt(2, (4, 4), 2)
    with pytest.raises(ImageError, match="pad tokens"):
        mrope_positions(ids, PAD, grids, merge_size=2)
