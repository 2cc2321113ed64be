"""Dumps of a context with an image (`lantern debug --dump/--against --image`, the
Reference tab): the dump's embeddings hold the image's rows as the vision tower made them
and every hidden state equals HF transformers' on a tiny random-weight Qwen2.5-VL; read
back against the same context it names no layer; another engine whose image encoder is
off (the image's rows of the embeddings changed) is named at the embeddings; a dump whose
ids are not the image context's is refused, since a dump holds no pictures."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.inspect import image_grids
from engine.inspect.dump_compare import compare_dump, export_dump
from engine.reference.dump import DumpError, read_dump
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.prompt import image_prompt
from tests.unit.inspect.test_inspect_hf import hf_vl, vl_model  # noqa: F401 (fixtures)
from tests.unit.vision.test_vision_prompt import FIRST, PAD, text, turn


@pytest.fixture
def context(vl_model):  # noqa: F811
    encode = VisionEncoder(vl_model, threads=1).encode
    return image_prompt(turn(text(2), "img", text(3)), [FIRST], vl_model.config, encode)


def test_an_image_dump_equals_hf_and_reads_back_clean(hf_vl, vl_model, context,  # noqa: F811
                                                      tmp_path):
    export_dump(vl_model, "tiny-vl", context, tmp_path)
    dump = read_dump(tmp_path)
    [grid] = image_grids(context)
    np.testing.assert_array_equal(dump.ids, context.ids)
    rows = context.image_rows
    np.testing.assert_allclose(dump.hidden_states[0][rows], context.image_embeds, atol=1e-6)
    with torch.no_grad():
        out = hf_vl.model(**qwen25_inputs(context), output_hidden_states=True)
    # HF's last hidden state is after the final norm, a dump's before it: the logits say it
    for n, (ours, theirs) in enumerate(zip(dump.hidden_states[:-1], out.hidden_states[:-1],
                                           strict=True)):
        theirs = theirs[0].double().numpy()
        assert np.abs(ours - theirs).max() <= 2e-4 * np.abs(theirs).max(), f"hidden state {n}"
    np.testing.assert_allclose(dump.logits, out.logits[0].double().numpy(), atol=2e-4)
    assert grid.start > 0 and grid.stop < len(context)     # text on both sides of the image
    comparison = compare_dump(vl_model, "tiny-vl", tmp_path, expected=context)
    assert comparison.result.ok and comparison.differ_at is None


def qwen25_inputs(context) -> dict:
    input_ids = torch.from_numpy(context.ids)[None]
    return {"input_ids": input_ids, "mm_token_type_ids": (input_ids == PAD).int(),
            "pixel_values": torch.from_numpy(FIRST.pixel_values),
            "image_grid_thw": torch.tensor([FIRST.grid])}


def test_an_image_encoder_off_is_named_at_the_embeddings(vl_model, context,  # noqa: F811
                                                         tmp_path):
    export_dump(vl_model, "tiny-vl", context, tmp_path)
    state = np.load(tmp_path / "hidden_000.npy")
    state[context.image_rows] *= 1.5                 # the picture's rows, as another tower
    np.save(tmp_path / "hidden_000.npy", state)
    result = compare_dump(vl_model, "tiny-vl", tmp_path, expected=context).result
    assert not result.ok and result.first_off == 0


def test_a_dump_of_other_ids_is_refused_for_an_image_context(vl_model, context,  # noqa: F811
                                                             tmp_path):
    export_dump(vl_model, "tiny-vl", context, tmp_path)
    ids = np.load(tmp_path / "ids.npy")
    ids[-2] = (ids[-2] + 1) % vl_model.config.text.vocab_size
    np.save(tmp_path / "ids.npy", ids)
    with pytest.raises(DumpError, match=f"differ from the context's from position {len(ids) - 2}"):
        compare_dump(vl_model, "tiny-vl", tmp_path, expected=context)
