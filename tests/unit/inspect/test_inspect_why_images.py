"""Direct contributions and occlusion over an image prompt (a tiny random-weight
Qwen2.5-VL in both GGUF layouts): HF's per-head and MLP outputs, captured by hooks, give
our parts; occlusion with the prefix keys and values reused (M-RoPE positions) equals full
re-runs of the reference with the key hidden, and lays out on each image's patch grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.inspect import image_grids, inspect_context
from engine.inspect.occlusion import fitting_patch_group, hidden_units, occlusion
from engine.reference import forward
from engine.reference.text import AttentionProbe
from engine.reference.weights import ReferenceWeights
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.prompt import image_prompt
from tests.unit.inspect.test_inspect_hf import hf_vl, vl_model  # noqa: F401 (fixtures)
from tests.unit.vision.test_vision_prompt import FIRST, PAD, text, turn


@pytest.fixture(scope="module")
def prompt(vl_model):  # noqa: F811
    ids = turn(text(2), "img", text(3))
    return image_prompt(ids, [FIRST], vl_model.config, VisionEncoder(vl_model, threads=1).encode)


def test_contributions_over_an_image_equal_hf(hf_vl, vl_model, prompt):  # noqa: F811
    row = len(prompt) - 1
    got = inspect_context(vl_model, prompt, str, row).contributions
    language = hf_vl.model.model.language_model
    n_heads = language.config.num_attention_heads
    heads, mlps, hooks = [], [], []
    for layer in language.layers:
        o_proj = layer.self_attn.o_proj

        def before_o_proj(_module, args, o_proj=o_proj):
            w = o_proj.weight.reshape(o_proj.weight.shape[0], n_heads, -1)
            heads.append(torch.einsum("nd,hnd->nh", args[0][0, row].reshape(n_heads, -1), w))

        hooks.append(o_proj.register_forward_pre_hook(before_o_proj))
        hooks.append(layer.mlp.register_forward_hook(
            lambda _m, _a, out: mlps.append(out[0, row])))
    input_ids = torch.from_numpy(prompt.ids)[None]
    try:
        with torch.no_grad():
            out = hf_vl.model(input_ids=input_ids, mm_token_type_ids=(input_ids == PAD).int(),
                              pixel_values=torch.from_numpy(FIRST.pixel_values),
                              image_grid_thw=torch.tensor([FIRST.grid]),
                              output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    heads = torch.stack(heads).double().numpy()
    mlps = torch.stack(mlps).double().numpy()
    embedding = out.hidden_states[0][0, row].double().numpy()
    final = embedding + heads.sum(axis=(0, 1)) + mlps.sum(axis=0)   # the residual stream
    scale = np.sqrt(np.mean(final ** 2) + language.config.rms_norm_eps)
    d = (hf_vl.model.lm_head.weight[got.token].detach().double().numpy()
         * language.norm.weight.detach().double().numpy() / scale)
    np.testing.assert_allclose(got.logit.attention, heads @ d, atol=1e-4, rtol=0)
    np.testing.assert_allclose(got.logit.mlp, mlps @ d, atol=1e-4, rtol=0)
    assert got.logit.embedding == pytest.approx(embedding @ d, abs=1e-4)
    assert got.logit.total == pytest.approx(float(out.logits[0, row, got.token]), abs=1e-4)
    assert abs(got.logit.bias) < 1e-4


@pytest.mark.parametrize("group", [1, 2])
def test_occlusion_over_an_image_equals_full_reruns(vl_model, prompt, group):  # noqa: F811
    row = len(prompt) - 1
    got = occlusion(vl_model, prompt, row, patch_group=group)
    weights = ReferenceWeights(vl_model)
    embeds = weights.embed(prompt.ids)
    embeds[prompt.image_rows] = prompt.image_embeds

    def logprob(hidden: np.ndarray | None) -> float:
        probe = AttentionProbe(np.zeros(0, dtype=np.int64), hidden_keys=hidden)
        logits = forward(vl_model, None, prompt.positions, embeds, weights=weights,
                         probe=probe).logits[row].astype(np.float64)
        return float(logits[got.token] - logits.max()
                     - np.log(np.exp(logits - logits.max()).sum()))

    clean = logprob(None)
    assert got.logprob == pytest.approx(clean, abs=1e-5)
    [grid] = image_grids(prompt)
    units = hidden_units(prompt, row, group)
    expected = np.zeros(row)
    for unit in units:
        expected[unit] = logprob(unit) - clean
    np.testing.assert_allclose(got.delta, expected, atol=1e-5)
    laid = grid.lay_out(np.append(got.delta, 0.0))    # the heatmap over the picture
    assert laid.shape == (grid.height, grid.width) and np.abs(laid).max() > 0
    blocks = -(-grid.height // group) * -(-grid.width // group)
    assert len(units) == row - grid.height * grid.width + blocks
    np.testing.assert_allclose(got.spread[grid.start:grid.stop].sum(),
                               sum(got.delta[u[0]] for u in units if u[0] >= grid.start
                                   and u[0] < grid.stop))
    if group == 2:   # a 2 x 2 block of patches shares one value
        assert len({float(v) for v in laid[:2, :2].ravel()}) == 1
        assert sorted(np.concatenate(units).tolist()) == list(range(row))
        patches = grid.height * grid.width
        assert fitting_patch_group(prompt, row, patches) == 1
        assert fitting_patch_group(prompt, row, -(-patches // 4)) == 2
        assert fitting_patch_group(prompt, grid.start, 1) == 1     # no image before it
