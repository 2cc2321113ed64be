"""Causal tracing of an image prompt against HF transformers (a tiny random-weight
Qwen2.5-VL in both GGUF layouts, M-RoPE positions): each hidden state of the corrupted run,
an image's patch group at once, restored by a hook on HF's decoder layers, gives our
logit difference at every layer and column; a word changed after the image leaves the
image's columns at nothing restored."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.inspect import image_grids
from engine.inspect.occlusion import hidden_units
from engine.inspect.tracing import TraceError, trace
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.prompt import image_prompt
from tests.unit.inspect.test_inspect_hf import hf_vl, vl_model  # noqa: F401 (fixtures)
from tests.unit.vision.test_vision_prompt import FIRST, PAD, text, turn


def prompts(model, before: bool):
    """A clean and a corrupted prompt with FIRST between text; the word changed ``before``
    the image or after it."""
    ids = turn(text(2), "img", text(3))
    changed = list(ids)
    at = 3 if before else len(ids) - 7
    changed[at] += 1
    encode = VisionEncoder(model, threads=1).encode
    return (image_prompt(ids, [FIRST], model.config, encode),
            image_prompt(changed, [FIRST], model.config, encode))


def hf_diff(hf, prompt, direction, restore=None) -> float:
    """HF's logit difference at the last position, with hidden state ``layer`` of the
    positions ``unit`` replaced by ``state`` [len(unit), H] (layer 0: the decoder's input)."""
    language = hf.model.model.language_model
    hooks = []
    if restore is not None:
        layer, unit, state = restore
        index = torch.from_numpy(np.asarray(unit))

        def before(_module, args, kwargs):
            hidden = (args[0] if args else kwargs["hidden_states"]).clone()
            hidden[0, index] = state
            return ((hidden, *args[1:]), kwargs) if args else \
                (args, kwargs | {"hidden_states": hidden})

        def after(_module, _args, out):
            hidden = out[0] if isinstance(out, tuple) else out
            hidden[0, index] = state
            return out
        hooks.append(language.layers[0].register_forward_pre_hook(before, with_kwargs=True)
                     if layer == 0 else language.layers[layer - 1].register_forward_hook(after))
    try:
        return float(hf_logits(hf, prompt)[0, -1].double().numpy() @ direction)
    finally:
        for hook in hooks:
            hook.remove()


def hf_logits(hf, prompt) -> torch.Tensor:
    input_ids = torch.from_numpy(prompt.ids)[None]
    with torch.no_grad():
        return hf.model(input_ids=input_ids, mm_token_type_ids=(input_ids == PAD).int(),
                        pixel_values=torch.from_numpy(FIRST.pixel_values),
                        image_grid_thw=torch.tensor([FIRST.grid])).logits


def hf_states(hf, prompt) -> list[torch.Tensor]:
    """The decoder's input and every layer's output [S, H] of one HF run."""
    language, states = hf.model.model.language_model, []
    hooks = [language.layers[0].register_forward_pre_hook(
        lambda _m, args, kwargs: states.append(
            (args[0] if args else kwargs["hidden_states"])[0].clone()), with_kwargs=True)]
    hooks += [layer.register_forward_hook(
        lambda _m, _a, out: states.append((out[0] if isinstance(out, tuple) else out)[0].clone()))
        for layer in language.layers]
    try:
        hf_logits(hf, prompt)
    finally:
        for hook in hooks:
            hook.remove()
    return states


def test_trace_of_an_image_prompt_equals_hf(hf_vl, vl_model):  # noqa: F811
    clean, corrupt = prompts(vl_model, before=True)
    got = trace(vl_model, clean, corrupt, patch_group=2)
    [grid] = image_grids(clean)
    assert got.images == (grid,) and got.patch_group == 2
    assert [list(u) for u in got.units] == [u.tolist() for u in hidden_units(clean, len(clean), 2)]
    assert len(got.units) < len(clean)          # the image's patches restored in 2 x 2 groups
    direction = np.zeros(hf_vl.model.config.text_config.vocab_size)
    direction[got.answer], direction[got.rival] = 1.0, -1.0
    assert got.clean_diff == pytest.approx(hf_diff(hf_vl, clean, direction), abs=1e-4)
    assert got.corrupt_diff == pytest.approx(hf_diff(hf_vl, corrupt, direction), abs=1e-4)
    states = hf_states(hf_vl, clean)
    expected = np.array([[hf_diff(hf_vl, corrupt, direction, (layer, unit, states[layer][unit,]))
                          for unit in got.units] for layer in range(len(states))])
    np.testing.assert_allclose(got.diff, expected, atol=2e-4, rtol=0)
    image = [n for n, u in enumerate(got.units) if got.patch_block(n) is not None]
    assert len(image) == -(-grid.height // 2) * -(-grid.width // 2)
    assert np.abs(got.restored[1:, image]).max() > 1e-3   # the image saw the changed word
    block = got.patch_block(image[-1])
    assert block.image == 0 and block.rows.stop == grid.height and block.columns.stop == grid.width


def test_a_word_after_the_image_leaves_it_unrestored(vl_model):  # noqa: F811
    clean, corrupt = prompts(vl_model, before=False)
    got = trace(vl_model, clean, corrupt, patch_group=3)
    image = [n for n in range(len(got.units)) if got.patch_block(n) is not None]
    changed = [n for n in range(len(got.units)) if got.changed(n)]
    assert image and changed and changed[0] > image[-1]
    np.testing.assert_array_equal(got.restored[:, :changed[0]], 0.0)
    assert got.restored[0, changed[0]] == pytest.approx(1.0, abs=1e-5)


def test_prompts_with_the_image_elsewhere_are_refused(vl_model):  # noqa: F811
    clean, _ = prompts(vl_model, before=True)
    encode = VisionEncoder(vl_model, threads=1).encode
    moved = image_prompt(turn(text(1), "img", text(4)), [FIRST], vl_model.config, encode)
    assert len(moved) == len(clean)
    with pytest.raises(TraceError, match="images at different tokens"):
        trace(vl_model, clean, moved)
