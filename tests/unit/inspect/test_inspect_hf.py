"""The logit lens and attention maps in exact mode against HF transformers (eager
attention, output_hidden_states / output_attentions): the real 0.5B demo model through
`lantern inspect --json`, and a random-weight Qwen2.5-VL with images in both GGUF layouts.
"""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest
import torch

from engine.cli import main
from engine.gguf import GGUFModel
from engine.inspect import image_grids, inspect_context
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.prompt import image_prompt
from tests.fixtures.hf_gguf import hf_model
from tests.fixtures.hf_vision import LAYOUTS, HFVision, open_layout, tiny_hf_model
from tests.unit.vision.test_vision_prompt import FIRST, PAD, SECOND, text, turn

PROMPT = "Name three prime numbers."


def hf_lens(model: torch.nn.Module, hidden: tuple, logits: torch.Tensor, row: int) -> np.ndarray:
    """HF's lens logits [L + 1, V] at ``row``: its hidden states (the last one is already
    normed) through the final norm and lm_head, the last row its own logits."""
    norm, head = model.model.language_model.norm if hasattr(model.model, "language_model") \
        else model.model.norm, model.lm_head
    with torch.no_grad():
        rows = [head(norm(h[0, row])) for h in hidden[:-1]] + [logits[0, row]]
    return torch.stack(rows).numpy()


def assert_lens_matches(lens: list[dict], expected: np.ndarray, atol: float) -> None:
    assert len(lens) == len(expected)
    for layer, (row, want) in enumerate(zip(lens, expected, strict=True)):
        top = row["top"]
        assert len(top) >= 5
        logits = [t["logit"] for t in top]
        assert logits == sorted(logits, reverse=True)
        ids = [t["id"] for t in top]
        np.testing.assert_allclose(logits, want[ids], atol=atol, rtol=0,
                                   err_msg=f"lens row {layer}")
        assert want[ids[0]] >= np.sort(want)[-2] - atol, f"lens row {layer}: top-1 differs"
        probs = np.exp(want - want.max()) / np.exp(want - want.max()).sum()
        np.testing.assert_allclose([t["prob"] for t in top], probs[ids], atol=1e-4)


def run_json(capsys, *args: str) -> dict:
    assert main(["inspect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow  # the demo models, asked for by name
@pytest.mark.parametrize("which", ["demo_05b", "demo_15b"])
def test_inspect_json_equals_hf_on_the_demo_models(which, request, capsys):
    demo = request.getfixturevalue(which)
    last = run_json(capsys, str(demo), PROMPT, "--exact")
    middle = run_json(capsys, str(demo), PROMPT, "--exact", "--position", "20")
    ids = [t["id"] for t in last["tokens"]]
    assert middle["position"] == 20 and [t["id"] for t in middle["tokens"]] == ids[:21]
    hf = hf_model(demo, attn_implementation="eager")
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
        cfg = hf.config
        for result in (last, middle):
            row = result["position"]
            attention = np.array(result["attention"])
            assert attention.shape == (cfg.num_hidden_layers, cfg.num_attention_heads, row + 1)
            expected = np.stack([a[0, :, row, : row + 1].numpy() for a in out.attentions])
            np.testing.assert_allclose(attention, expected, atol=2e-4, rtol=0)
            np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
            assert_lens_matches(result["lens"], hf_lens(hf, out.hidden_states, out.logits, row),
                                atol=2e-3)
    finally:
        del hf
        gc.collect()


def test_inspect_text_output_and_bad_position(demo_05b, capsys):
    assert main(["inspect", str(demo_05b), PROMPT, "--position", "3"]) == 0
    out = capsys.readouterr().out
    assert "position 3" in out and "numpy fp32 reference" in out and out.count("\n") >= 26
    assert main(["inspect", str(demo_05b), PROMPT, "--position", "9999"]) == 1
    assert "position 9999 is outside the context" in capsys.readouterr().err


# -- a random-weight Qwen2.5-VL with images, both layouts ------------------------------------

@pytest.fixture(scope="module")
def hf_vl() -> HFVision:
    hf = tiny_hf_model(seed=5)
    hf.model.set_attn_implementation("eager")
    return hf


@pytest.fixture(scope="module", params=LAYOUTS)
def vl_model(request, hf_vl, tmp_path_factory) -> GGUFModel:
    return open_layout(hf_vl, request.param, tmp_path_factory.mktemp(request.param))


@pytest.mark.parametrize("position", [-1, 30])
def test_lens_and_attention_over_images_equal_hf(hf_vl, vl_model, position):
    images = [FIRST, SECOND]
    ids = turn(text(3), "img", text(2), "img", text(4))
    prompt = image_prompt(ids, images, vl_model.config, VisionEncoder(vl_model, threads=1).encode)
    row = len(prompt) - 1 if position < 0 else position
    got = inspect_context(vl_model, prompt, str, row)

    grids = image_grids(prompt)
    merge = vl_model.config.vision.spatial_merge_size
    assert [(g.height, g.width) for g in grids] == [
        (i.grid[1] // merge, i.grid[2] // merge) for i in images]
    assert all((prompt.ids[g.start:g.stop] == PAD).all() for g in grids)
    assert got.images == tuple(g for g in grids if g.stop <= row + 1)

    input_ids = torch.from_numpy(prompt.ids)[None]
    with torch.no_grad():
        out = hf_vl.model(
            input_ids=input_ids, mm_token_type_ids=(input_ids == PAD).int(),
            pixel_values=torch.from_numpy(np.concatenate([i.pixel_values for i in images])),
            image_grid_thw=torch.tensor([i.grid for i in images]),
            output_hidden_states=True, output_attentions=True)
    expected = np.stack([a[0, :, row, : row + 1].numpy() for a in out.attentions])
    assert got.attention.shape == expected.shape
    np.testing.assert_allclose(got.attention, expected, atol=2e-4, rtol=0)
    assert_lens_matches([r.to_json() for r in got.lens],
                        hf_lens(hf_vl.model, out.hidden_states, out.logits, row), atol=2e-3)
    if got.images:   # the image's share laid out on its patch grid, as the app draws it
        grid = got.images[0]
        laid = grid.lay_out(got.attention_mean)
        assert laid.shape == (len(got.attention), grid.height, grid.width)
        np.testing.assert_allclose(laid.reshape(len(laid), -1),
                                   expected.mean(1)[:, grid.start:grid.stop], atol=2e-4)
