"""Small pieces of inspection: the picture back from pixel rows, a reply appended at the
positions generation gave it, and a bad position named."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import GenerationError
from engine.gguf import open_model
from engine.inspect import continued, inspect_context
from engine.vision.preprocess import pixels, preprocess, smart_resize
from tests.fixtures.synthetic_gguf import TextSpec, write_model


def test_pixels_undo_the_patch_layout_exactly():
    rng = np.random.default_rng(0)
    picture = rng.integers(0, 256, (200, 300, 3), np.uint8)
    height, width = smart_resize(200, 300, 28, 56 * 56, 2_097_152)
    resized = np.asarray(Image.fromarray(picture).resize((width, height),
                                                         Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(pixels(preprocess(Image.fromarray(picture))), resized)


def test_continued_puts_the_reply_after_the_prompt():
    text = PromptTokens.text([5, 6, 7])
    more = continued(text, [8, 9])
    assert more.ids.tolist() == [5, 6, 7, 8, 9] and more.positions.tolist() == [0, 1, 2, 3, 4]
    mrope = PromptTokens(np.array([1, 2, 2, 3]), np.array([[0, 1, 1, 3]] * 3), (1, 2, 2, 3), 4)
    assert continued(mrope, [4]).positions[:, -1].tolist() == [4, 4, 4]
    assert continued(text, []) is text


def test_a_position_outside_the_context_is_named(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_model(path, "qwen2", TextSpec())
    with pytest.raises(GenerationError, match="position 3 is outside the context of 3 tokens"):
        inspect_context(open_model(path), PromptTokens.text([1, 2, 3]), str, 3)
