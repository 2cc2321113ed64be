"""Two models, one conversation with an image: a tiny random-weight Qwen2.5-VL in F32 (A)
and the same weights quantized (B, Q8_0/Q4_0/F16), each reading the picture through its
own tower; both log-probability rows equal HF transformers' for that model's weights, and
so do a tiny Qwen3-VL's (DeepStack) and Gemma 3's (two-way image rows) in llama.cpp's
and Ollama's layouts. A text-only model
and a picture of another token count or patch size are refused, naming why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.gguf import open_model
from engine.inspect import image_grids
from engine.inspect.compare_images import (
    ComparisonError,
    check_aligned,
    own_images,
    reference_encode,
)
from engine.inspect.model_compare import Candidate, compare_contexts, compare_with
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.gemma3 import preprocess_square
from engine.vision.preprocess import preprocess_for
from engine.vision.prompt import image_prompt
from tests.fixtures.hf_qwen3vl import qwen3vl, write_ollama_layout
from tests.fixtures.hf_vision import TEXT, TYPES, tiny_hf_model, write_inline
from tests.fixtures.synthetic_gguf import write_model
from tests.unit.vision.test_gemma3_vision import hf_logits as gemma_logits
from tests.unit.vision.test_gemma3_vision import (
    prompt_for,
)
from tests.unit.vision.test_qwen3vl_tower import hf_inputs, image_ids, noise
from tests.unit.vision.test_vision_prompt import FIRST, SECOND, hf_logits, text, turn

IDS = turn(text(2), "img", text(3))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(A's HF model, its GGUF), (B's, its GGUF): one set of weights, two quantizations."""
    folder = tmp_path_factory.mktemp("vl-pair")
    made = []
    for name, types in (("f32", {}), ("quantized", TYPES)):
        hf = tiny_hf_model(seed=11)
        made.append((hf, write_inline(hf, folder / f"{name}.gguf", types=types)))
    return made


@pytest.fixture(scope="module")
def context(pair):
    """The prompt as the chat core builds it for A (its engine tower)."""
    a = open_model(pair[0][1])
    return image_prompt(IDS, [FIRST], a.config, VisionEncoder(a, threads=1).encode)


def hf_logprobs(hf, context) -> np.ndarray:
    logits = torch.from_numpy(hf_logits(hf, context, [FIRST])).double()
    ids = context.ids
    return torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), ids[1:]].numpy()


def test_both_rows_equal_hf_over_an_image(pair, context):
    (hf_a, path_a), (hf_b, path_b) = pair
    result = compare_with(open_model(path_a), "a", Candidate("b", path_b), context, str,
                          [FIRST])
    for row, hf in zip(result.logprobs, (hf_a, hf_b), strict=True):
        np.testing.assert_allclose(row, hf_logprobs(hf, context), atol=2e-4, rtol=0)
    [grid] = result.images
    assert (grid.start, grid.height * grid.width) == (image_grids(context)[0].start,
                                                      FIRST.n_tokens)
    text = result.text
    assert not text[grid.start - 1:grid.stop - 1].any() and text.sum() == len(IDS) - 2
    assert np.abs(result.delta[text]).max() > 1e-4          # the quantization shows
    assert all(text[p - 1] for p in result.marked) and len(result.marked) == 5
    out = result.to_json()
    assert [t["image"] for t in out["tokens"]] == (~text).tolist()
    assert out["mean_abs_delta"] == pytest.approx(np.abs(result.delta[text]).mean())


def test_b_reads_the_picture_as_the_chat_core_would(pair, context):
    b = open_model(pair[1][1])
    own = own_images(b, "b", context, [FIRST])
    built = image_prompt(IDS, [FIRST], b.config, reference_encode(b))
    np.testing.assert_array_equal(own.ids, built.ids)
    np.testing.assert_array_equal(own.positions, built.positions)
    np.testing.assert_array_equal(own.image_embeds, built.image_embeds)
    assert np.abs(own.image_embeds - context.image_embeds).max() > 1e-4  # B's, not A's


def test_a_text_model_and_another_token_count_are_refused(pair, context, tmp_path):
    words = open_model(write_model(tmp_path / "text.gguf", "qwen2", TEXT))
    with pytest.raises(ComparisonError, match="words has no vision tower"):
        own_images(words, "words", context, [FIRST])
    a = open_model(pair[0][1])
    other = image_prompt(IDS, [SECOND], a.config, reference_encode(a))
    with pytest.raises(ComparisonError, match=f"image 1 is {FIRST.n_tokens} tokens for a "
                                              f"and {SECOND.n_tokens} for b"):
        check_aligned((context, other), ("a", "b"))
    with pytest.raises(ComparisonError, match="image 1 is"):
        compare_contexts(a, a, (context, other), [str(i) for i in context.ids], ("a", "b"))
    b = open_model(pair[1][1])
    wide = replace(FIRST, patch_size=16)
    with pytest.raises(ComparisonError, match="14-pixel patches"):
        own_images(b, "b", context, [wide])
    t, gh, gw = FIRST.grid
    taller = replace(FIRST, grid=(t, gh + 2, gw))
    with pytest.raises(ComparisonError, match=f"image 1 is {FIRST.n_tokens} tokens in this "
                                              f"context but {taller.n_tokens} for b's"):
        own_images(b, "b", context, [taller])


def test_deepstack_rows_equal_hf_in_both_layouts(tmp_path):
    qwen = qwen3vl()
    inline = write_ollama_layout(qwen, tmp_path / "ollama-qwen3vl.gguf")
    image = preprocess_for(qwen.paired.config.vision, noise(70, 50))
    context = image_prompt(image_ids(qwen), [image], qwen.paired.config,
                           VisionEncoder(qwen.paired, threads=1).encode)
    paired = Candidate("llama.cpp", qwen.paired.path, projector=qwen.projector)
    result = compare_with(open_model(inline), "ollama", paired, context, str, [image])
    ids = context.ids.tolist()
    with torch.no_grad():
        logits = qwen.hf(**hf_inputs(qwen, ids, image)).logits[0].double()
    expected = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), ids[1:]].numpy()
    for row in result.logprobs:
        np.testing.assert_allclose(row, expected, atol=2e-4, rtol=0)
    assert len(result.images) == 1 and (~result.text).sum() == image.n_tokens


def test_two_way_image_rows_equal_hf_in_both_layouts(gemma):  # noqa: F811
    inline, paired = gemma.models["inline"], gemma.models["projector"]
    context = prompt_for(gemma, inline, VisionEncoder(inline).encode)
    picture = preprocess_square(gemma.picture, inline.config.vision)
    contexts = (own_images(inline, "inline", context, [picture]),
                own_images(paired, "projector", context, [picture]))
    result = compare_contexts(inline, paired, contexts, [str(i) for i in context.ids],
                              ("inline", "projector"))
    logits = torch.from_numpy(gemma_logits(gemma, context)).double()
    ids = context.ids.tolist()
    expected = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), ids[1:]].numpy()
    for row in result.logprobs:
        np.testing.assert_allclose(row, expected, atol=2e-4, rtol=0)
    assert context.image_groups() is not None and (~result.text).sum() == picture.n_tokens
