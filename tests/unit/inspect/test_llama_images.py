"""llama.cpp's two views over an image context, on a tiny random-weight Qwen2.5-VL in
llama.cpp's layout (text GGUF + mmproj projector): libmtmd reads the picture Lantern
encoded, and every block's output, the picture's rows included, agrees with the reference
within the tolerance of the text comparisons; another picture of the same size is named at
block 0; so do Qwen3-VL (DeepStack features) and Gemma 3 (two-way image rows) from llama.cpp's
own converter. The second opinion scores the text rows only. Ollama's one-file Qwen2.5-VL is
re-laid as llama.cpp's pair, tensor for tensor the projector layout's, and agrees alike. A
picture that llama.cpp makes another number of tokens of, or another one-file tower
(Gemma 3), is refused with the reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import Remedy, UnsupportedModel
from engine.gguf import open_model
from engine.inspect import inspect_context
from engine.inspect.inspection import forward_context
from engine.inspect.llama_capture import block_states
from engine.inspect.llama_layers import TOLERANCE, llama_layers, stream_relative
from engine.inspect.llama_pair import llama_pair, llama_text, window_pattern
from engine.inspect.llama_pictures import INSIDE, PicturesUnreadable, llama_pictures
from engine.inspect.second_opinion import second_opinion
from engine.paths import cache_dir
from engine.remote.crosscheck import TOLERANCE as LOGPROB_TOLERANCE
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.gemma3 import preprocess_square
from engine.vision.preprocess import pixels, preprocess_for
from engine.vision.prompt import image_prompt
from tests.fixtures.hf_qwen3vl import qwen3vl
from tests.fixtures.hf_vision import open_layout, tiny_hf_model
from tests.unit.vision.test_gemma3_vision import prompt_for
from tests.unit.vision.test_qwen3vl_tower import image_ids, noise
from tests.unit.vision.test_vision_prompt import FIRST, SECOND, text, turn


@pytest.fixture(scope="module")
def hf():
    return tiny_hf_model(seed=5)


@pytest.fixture(scope="module")
def pair(hf, tmp_path_factory):
    """The model in llama.cpp's layout: text GGUF + projector."""
    return open_layout(hf, "projector", tmp_path_factory.mktemp("projector"))


@pytest.fixture(scope="module")
def context(pair):
    encode = VisionEncoder(pair, threads=1).encode
    return image_prompt(turn(text(2), "img", text(3)), [FIRST], pair.config, encode)


def test_every_block_agrees_over_the_image_rows_too(pair, context):
    pictures = llama_pictures(pair, context, [pixels(FIRST)])
    result = llama_layers(pair.path, pair, list(context.ids), pictures=pictures)
    start = int(context.image_rows[0])
    assert result.pictures == ((start, start + FIRST.n_tokens),) and start > 0
    assert result.ok and result.first_off is None, result.verdict()
    for row in result.rows:
        assert row.delta.relative <= TOLERANCE and row.delta.cosine > 0.999, row
    assert result.result.logits.relative <= TOLERANCE
    assert f"Rows {start}-{start + FIRST.n_tokens - 1} are the picture's" in result.verdict()
    # the picture's rows on their own: llama.cpp's tower and text model over them agree
    theirs = block_states(pair.path, context.ids, pair.config.text.n_layers, pictures=pictures)
    ours = forward_context(pair, context).hidden_states
    relative = stream_relative(ours[1:], theirs.blocks)          # [L, S]
    assert all(len(b) == len(context) for b in theirs.blocks)
    assert relative[:, context.image_rows].max() <= TOLERANCE / 2
    assert json.loads(json.dumps(result.to_json()))["pictures"] == [[start, start + 77]]


def test_another_picture_of_the_same_size_is_named_at_block_0(pair, context):
    """The mutation the comparison must catch: llama.cpp fed a picture Lantern did not read."""
    other = 255 - pixels(FIRST)
    result = llama_layers(pair.path, pair, list(context.ids),
                          pictures=llama_pictures(pair, context, [other]))
    assert not result.ok and result.first_off == 0, result.verdict()


def test_the_second_opinion_scores_the_text_rows(pair, context):
    inspection = inspect_context(pair, context, str)
    opinion = second_opinion(pair.path, inspection, str,
                             pictures=llama_pictures(pair, context, [pixels(FIRST)]))
    start, stop = int(context.image_rows[0]), int(context.image_rows[-1]) + 1
    assert opinion.picture_rows == tuple(range(start - 1, stop - 1))
    delta = opinion.delta
    assert np.isnan(delta[start - 1:stop - 1]).all()
    assert np.isfinite(delta[opinion.text_rows]).all() and len(opinion.text_rows) == \
        len(context) - 1 - FIRST.n_tokens
    worst, row, _ = opinion.largest()
    assert worst < LOGPROB_TOLERANCE and row not in opinion.picture_rows
    assert opinion.same_top1, (opinion.ours, opinion.theirs)
    out = json.loads(json.dumps(opinion.to_json(), allow_nan=False))
    assert out["delta_logprob"][start - 1] is None and out["max_delta_logprob"] == worst


def test_a_picture_of_another_token_count_is_refused(pair, context):
    other = pixels(SECOND)          # 37 x 513 resized: another grid than FIRST's 7 x 11
    with pytest.raises(PicturesUnreadable,
                       match=r"image 1 is 77 tokens \(7 x 11\) in this context but llama.cpp "
                             r"makes \d+ \(\d+ x \d+\)"):
        llama_layers(pair.path, pair, list(context.ids),
                     pictures=llama_pictures(pair, context, [other]))


def test_another_one_file_tower_is_refused(gemma):  # noqa: F811
    inline = gemma.models["inline"]
    context = prompt_for(gemma, inline, VisionEncoder(inline).encode)
    with pytest.raises(PicturesUnreadable, match=re.escape(INSIDE)) as refused:
        llama_pictures(inline, context, [gemma.picture])
    assert refused.value.remedy is Remedy.PROJECTOR
    assert llama_pictures(inline, PromptTokens.text(context.ids[:5]), []) is None


@pytest.fixture(scope="module")
def inline(hf, tmp_path_factory):
    """The same weights in Ollama's one-file layout."""
    return open_layout(hf, "inline", tmp_path_factory.mktemp("inline"))


def test_the_one_file_tower_becomes_the_projector_layouts_mmproj(inline, pair):
    text, projector = llama_pair(inline)
    ours, theirs = GGUFReader(projector), GGUFReader(pair.projector_path)
    mine = {t.name: t for t in ours.tensors}
    assert sorted(mine) == sorted(t.name for t in theirs.tensors)
    assert "v.patch_embd.weight.1" in mine and "mm.0.weight" in mine
    for tensor in theirs.tensors:
        made = mine[tensor.name]
        assert (made.tensor_type, list(made.shape)) == (tensor.tensor_type, list(tensor.shape))
        assert np.array_equal(np.asarray(made.data), np.asarray(tensor.data)), tensor.name
    assert clip_keys(ours) == clip_keys(theirs) and len(clip_keys(ours)) == 14
    relaid = open_model(text, projector)
    assert relaid.config.vision == pair.config.vision
    assert relaid.config.text == pair.config.text
    assert llama_pair(inline) == (text, projector)          # reused from the cache
    assert cache_dir() in text.parents and inline.path.parent not in text.parents


def test_only_every_nth_full_attention_block_is_stated():
    assert window_pattern((7, 15, 23, 31), Path("m")) == 8
    with pytest.raises(UnsupportedModel, match=r"\[1, 2\] are not every n-th block"):
        window_pattern((1, 2), Path("m"))


def clip_keys(reader: GGUFReader) -> dict[str, object]:
    """The keys libmtmd reads, with their values."""
    return {k: f.contents() for k, f in reader.fields.items() if k.startswith("clip.")}


def test_the_one_file_models_text_prompt_agrees_too(inline, pair):
    """llama.cpp cannot load the one-file model itself: it runs the re-laid text file."""
    assert llama_text(pair) == pair.path and llama_text(inline) == llama_pair(inline)[0]
    result = llama_layers(llama_text(inline), inline, text(8))
    assert result.ok and result.first_off is None and result.pictures == (), result.verdict()


def test_the_one_file_model_agrees_block_by_block(inline):
    encode = VisionEncoder(inline, threads=1).encode
    context = image_prompt(turn(text(2), "img", text(3)), [FIRST], inline.config, encode)
    agrees_block_by_block(inline, context, FIRST)


def agrees_block_by_block(model, context, picture) -> None:
    """llama.cpp over ``context`` with ``picture`` agrees with the reference, its rows too."""
    result = llama_layers(llama_text(model), model, list(context.ids),
                          pictures=llama_pictures(model, context, [pixels(picture)]))
    assert result.ok and result.first_off is None, result.verdict()
    assert result.pictures == ((int(context.image_rows[0]), int(context.image_rows[-1]) + 1),)
    other = llama_layers(llama_text(model), model, list(context.ids),
                         pictures=llama_pictures(model, context, [255 - pixels(picture)]))
    assert not other.ok and other.first_off == 0, other.verdict()


def test_qwen3vl_deepstack_rows_agree():
    """llama.cpp's Qwen3-VL takes the tower's rows with their DeepStack features."""
    qwen = qwen3vl()
    image = preprocess_for(qwen.paired.config.vision, noise(70, 50))
    context = image_prompt(image_ids(qwen), [image], qwen.paired.config,
                           VisionEncoder(qwen.paired, threads=1).encode)
    agrees_block_by_block(qwen.paired, context, image)


def test_gemma3_two_way_image_rows_agree(gemma):  # noqa: F811
    """llama.cpp runs Gemma 3's picture with causal attention off, as the reference."""
    paired = gemma.models["projector"]
    context = prompt_for(gemma, paired, VisionEncoder(paired).encode)
    agrees_block_by_block(paired, context, preprocess_square(gemma.picture,
                                                             paired.config.vision))
