"""Image prompts end to end: placeholder expansion, cache keys and rows (PromptTokens),
then final logits against HF Qwen2_5_VLForConditionalGeneration for one image, two
images, and a text follow-up turn after an image turn. The decoder is the graph
engineer's DecoderSession in exact mode (inputs_embeds + 3-D positions); the numpy text
reference with M-RoPE is checked alongside."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import ImageError
from engine.gguf import GGUFModel
from engine.reference import forward as reference_forward
from engine.runtime.decoder import DecoderSession
from engine.runtime.generate import Generator
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision import ImageInput, preprocess
from engine.vision.prompt import image_prompt
from tests.fixtures.hf_vision import LAYOUTS, HFVision, open_layout, tiny_hf_model
from tests.fixtures.synthetic_gguf import vocabulary

ATOL = 1e-3
_SPECIAL = vocabulary().special
IM_START, IM_END = _SPECIAL["<|im_start|>"], _SPECIAL["<|im_end|>"]
START, END, PAD = (_SPECIAL[t] for t in ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>"))


def image(width: int, height: int, seed: int) -> ImageInput:
    rng = np.random.default_rng(seed)
    return preprocess(Image.fromarray(rng.integers(0, 256, (height, width, 3), np.uint8)))


def text(n: int, first: int = 40) -> list[int]:
    return list(range(first, first + n))


def turn(*parts: list[int] | str) -> list[int]:
    """A user turn: text lists and "img" placeholders as the chat template writes them."""
    ids = [IM_START, *text(2, 70)]
    for part in parts:
        ids += [START, PAD, END] if part == "img" else part
    return ids + [IM_END, IM_START, *text(2, 80)]


@pytest.fixture(scope="module")
def hf() -> HFVision:
    return tiny_hf_model(seed=3)


@pytest.fixture(scope="module", params=LAYOUTS)
def model(request, hf, tmp_path_factory) -> GGUFModel:
    return open_layout(hf, request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def encoder(model) -> VisionEncoder:
    return VisionEncoder(model, threads=1)


@pytest.fixture(scope="module")
def decoder(model) -> DecoderSession:
    return DecoderSession(model, exact=True, max_cache_len=512, all_logits=True, threads=1)


def hf_logits(hf: HFVision, prompt: PromptTokens, images: list[ImageInput]) -> np.ndarray:
    """HF's logits [S, V] for the expanded prompt; mm_token_type_ids is what makes
    transformers 5.x use 3-D positions at all."""
    ids = torch.from_numpy(prompt.ids)[None]
    inputs = {"input_ids": ids, "mm_token_type_ids": (ids == PAD).int()}
    if images:
        inputs["pixel_values"] = torch.from_numpy(np.concatenate([i.pixel_values for i in images]))
        inputs["image_grid_thw"] = torch.tensor([i.grid for i in images])
    with torch.no_grad():
        return hf.model(**inputs).logits[0].numpy()


def embeds_of(decoder: DecoderSession, prompt: PromptTokens) -> np.ndarray:
    embeds = decoder.embed(prompt.ids)
    embeds[prompt.image_rows] = prompt.image_embeds
    return embeds


FIRST, SECOND = image(300, 200, seed=1), image(37, 513, seed=2)
PROMPTS = {
    "one image": (turn("img", text(5)), [FIRST]),
    "two images": (turn(text(3), "img", text(2), "img", text(4)), [FIRST, SECOND]),
}


@pytest.mark.parametrize("case", list(PROMPTS))
def test_logits_match_hf(hf, model, encoder, decoder, case):
    ids, images = PROMPTS[case]
    prompt = image_prompt(ids, images, model.config, encoder.encode)
    expected = hf_logits(hf, prompt, images)
    decoder.reset()
    step = decoder.forward(inputs_embeds=embeds_of(decoder, prompt), positions=prompt.positions)
    np.testing.assert_allclose(step.logits, expected, atol=ATOL, rtol=0)
    ref = reference_forward(model, inputs_embeds=embeds_of(decoder, prompt),
                            positions=prompt.positions, dtype=np.float64)
    np.testing.assert_allclose(ref.logits, expected, atol=ATOL, rtol=0)


def test_follow_up_turn_reuses_the_cache(hf, model, encoder, decoder):
    """Turn 1 (image + question), the answer, then a text-only turn 2: the second prompt
    is re-expanded whole, the Generator feeds only its new tail, and the logits of that
    tail match HF run over the whole conversation."""
    first_ids = turn("img", text(4))
    answer = [*text(6, 100), IM_END]
    second_ids = first_ids + answer + turn(text(5, 120))
    first = image_prompt(first_ids, [FIRST], model.config, encoder.encode)
    second = image_prompt(second_ids, [FIRST], model.config, encoder.encode)
    assert second.keys[:len(first)] == first.keys
    np.testing.assert_array_equal(second.positions[:, :len(first)], first.positions)
    assert second.positions[0, len(first)] == first.next_position

    decoder.reset()
    generator = Generator(decoder, tokenizer=None)
    generator.prefill(first)
    step, fed = generator.prefill(second)
    assert fed == len(second) - len(first)
    expected = hf_logits(hf, second, [FIRST])
    np.testing.assert_allclose(step.logits, expected[len(first):], atol=ATOL, rtol=0)


def test_hf_needs_mm_token_type_ids(hf, model, encoder):
    """Without mm_token_type_ids transformers 5.x silently uses 1-D positions: the
    comparison above would be meaningless if the two agreed."""
    prompt = image_prompt(turn("img", text(3)), [FIRST], model.config, encoder.encode)
    ids = torch.from_numpy(prompt.ids)[None]
    with torch.no_grad():
        one_d = hf.model(input_ids=ids, pixel_values=torch.from_numpy(FIRST.pixel_values),
                         image_grid_thw=torch.tensor([FIRST.grid])).logits[0].numpy()
    assert np.abs(one_d - hf_logits(hf, prompt, [FIRST])).max() > 10 * ATOL


def test_placeholders_expand_with_keys_and_rows(model):
    fake = {FIRST.digest: np.full((FIRST.n_tokens, 64), 1.0, np.float32),
            SECOND.digest: np.full((SECOND.n_tokens, 64), 2.0, np.float32)}
    ids = [IM_START, 41, PAD, 42, START, PAD, END, 43]  # first placeholder without markers
    prompt = image_prompt(ids, [FIRST, SECOND], model.config, lambda i: fake[i.digest])
    n1, n2 = FIRST.n_tokens, SECOND.n_tokens
    expected = [IM_START, 41, START, *[PAD] * n1, END, 42, START, *[PAD] * n2, END, 43]
    assert prompt.ids.tolist() == expected
    rows = np.flatnonzero(prompt.ids == PAD)
    np.testing.assert_array_equal(prompt.image_rows, rows)
    np.testing.assert_array_equal(prompt.image_embeds[:n1], 1.0)
    np.testing.assert_array_equal(prompt.image_embeds[n1:], 2.0)
    assert prompt.keys[3] == (PAD, FIRST.digest, 0)
    assert prompt.keys[rows[-1]] == (PAD, SECOND.digest, n2 - 1)
    assert prompt.positions.shape == (3, len(expected))
    assert prompt.next_position == prompt.positions.max() + 1


def test_placeholder_count_must_match(model):
    with pytest.raises(ImageError, match="placeholder"):
        image_prompt(turn("img"), [FIRST, SECOND], model.config, lambda i: None)
