"""Causal tracing of image prompts against HF transformers: each hidden state of the
corrupted run, an image's patch group at once, restored by a hook on HF's decoder layers,
gives our logit difference at every layer and column, with the word changed before the
image so that the image's states differ. Tiny random-weight models: Qwen2.5-VL in both
GGUF layouts (M-RoPE, patches in 2 x 2 groups), Gemma 3 (an image's rows see each other
both ways: a restored patch changes the ones before it) and Qwen3-VL (DeepStack features
added after the first blocks). A word changed after the image leaves the image's columns at
nothing restored; the same question over a noised picture (ROME's corruption of a
subject) traces through the patches, DeepStack features included; prompts holding the image
at other tokens are refused; a two-way image's restart at its first row equals full re-runs
of the reference."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import torch

from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import open_model
from engine.inspect import image_grids
from engine.inspect.occlusion import hidden_units
from engine.inspect.tracing import Trace, TraceError, noised, trace
from engine.reference import ReferenceWeights, forward
from engine.reference.text import blocks, rms_norm, rope_tables
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.gemma3 import preprocess_square, soft_token_prompt
from engine.vision.prompt import image_prompt
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.unit.inspect.test_inspect_hf import hf_vl, vl_model  # noqa: F401 (fixtures)
from tests.unit.vision.test_gemma3_vision import hf_pixels, reference_encode  # noqa: F401
from tests.unit.vision.test_qwen3vl_tower import hf_inputs, image, image_ids, qwen  # noqa: F401
from tests.unit.vision.test_vision_prompt import FIRST, PAD, text, turn

# minutes of HF runs (a trace is a forward pass per layer and position): the full suite's
pytestmark = pytest.mark.slow

Run = Callable[[], torch.Tensor]   # an HF forward of one prompt -> logits [1, S, V]


def hidden_of(args, kwargs) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def hf_diff(layers, run: Run, direction: np.ndarray, restore=None) -> float:
    """HF's logit difference at the last position, with hidden state ``layer`` of the
    positions ``unit`` replaced by ``state`` [len(unit), H]: the input of decoder layer
    ``layer`` (after the DeepStack features Qwen3-VL adds to the one before), or the last
    layer's output."""
    hooks = []
    if restore is not None:
        layer, unit, state = restore
        index = torch.tensor(unit)

        def before(_module, args, kwargs):
            hidden = hidden_of(args, kwargs).clone()
            hidden[0, index] = state
            return ((hidden, *args[1:]), kwargs) if args else \
                (args, kwargs | {"hidden_states": hidden})

        def after(_module, _args, out):
            (out[0] if isinstance(out, tuple) else out)[0, index] = state
            return out
        hooks.append(layers[layer].register_forward_pre_hook(before, with_kwargs=True)
                     if layer < len(layers) else layers[-1].register_forward_hook(after))
    try:
        with torch.no_grad():
            return float(run()[0, -1].double().numpy() @ direction)
    finally:
        for hook in hooks:
            hook.remove()


def hf_states(layers, run: Run) -> list[torch.Tensor]:
    """Every decoder layer's input and the last one's output [S, H] of one HF run: the
    residual stream as HF's output_hidden_states holds it (where hf_diff puts them back)."""
    states = []
    hooks = [layer.register_forward_pre_hook(
        lambda _m, args, kwargs: states.append(hidden_of(args, kwargs)[0].clone()),
        with_kwargs=True) for layer in layers]
    hooks.append(layers[-1].register_forward_hook(
        lambda _m, _a, out: states.append((out[0] if isinstance(out, tuple) else out)[0].clone())))
    try:
        with torch.no_grad():
            run()
    finally:
        for hook in hooks:
            hook.remove()
    return states


def assert_equals_hf(got: Trace, layers, clean: Run, corrupt: Run, vocab: int) -> None:
    direction = np.zeros(vocab)
    direction[got.answer], direction[got.rival] = 1.0, -1.0
    assert got.clean_diff == pytest.approx(hf_diff(layers, clean, direction), abs=1e-4)
    assert got.corrupt_diff == pytest.approx(hf_diff(layers, corrupt, direction), abs=1e-4)
    states = hf_states(layers, clean)
    expected = np.array([[hf_diff(layers, corrupt, direction, (layer, unit, states[layer][unit,]))
                          for unit in got.units] for layer in range(len(states))])
    np.testing.assert_allclose(got.diff, expected, atol=2e-4, rtol=0)
    columns = [n for n in range(len(got.units)) if got.patch_block(n) is not None]
    assert columns and np.abs(got.restored[1:, columns]).max() > 1e-3   # it saw the change


def qwen25_prompts(model, before: bool):
    """A clean and a corrupted prompt with FIRST between text; the word changed ``before``
    the image or after it."""
    ids = turn(text(2), "img", text(3))
    changed = list(ids)
    changed[3 if before else len(ids) - 7] += 1
    encode = VisionEncoder(model, threads=1).encode
    return (image_prompt(ids, [FIRST], model.config, encode),
            image_prompt(changed, [FIRST], model.config, encode))


def qwen25_run(hf, prompt, picture=FIRST) -> Run:
    input_ids = torch.from_numpy(prompt.ids)[None]
    return lambda: hf.model(input_ids=input_ids, mm_token_type_ids=(input_ids == PAD).int(),
                            pixel_values=torch.from_numpy(picture.pixel_values),
                            image_grid_thw=torch.tensor([picture.grid])).logits


def test_qwen25vl_trace_equals_hf(hf_vl, vl_model):  # noqa: F811
    clean, corrupt = qwen25_prompts(vl_model, before=True)
    got = trace(vl_model, clean, corrupt, patch_group=2)
    [grid] = image_grids(clean)
    assert got.images == (grid,) and got.patch_group == 2
    assert [list(u) for u in got.units] == [u.tolist() for u in hidden_units(clean, len(clean), 2)]
    assert len(got.units) < len(clean)          # the image's patches restored in 2 x 2 groups
    assert_equals_hf(got, hf_vl.model.model.language_model.layers, qwen25_run(hf_vl, clean),
                     qwen25_run(hf_vl, corrupt), hf_vl.model.config.text_config.vocab_size)
    columns = [n for n in range(len(got.units)) if got.patch_block(n) is not None]
    assert len(columns) == -(-grid.height // 2) * -(-grid.width // 2)
    block = got.patch_block(columns[-1])
    assert block.image == 0 and block.rows.stop == grid.height and block.columns.stop == grid.width


def test_gemma3_trace_restarts_at_the_images_first_row_as_hf(gemma):  # noqa: F811
    model, sp = gemma.models["inline"], gemma.sp
    boi, soft = sp.piece_to_id("<start_of_image>"), sp.piece_to_id("<image_soft_token>")
    words = sp.encode("Describe")
    picture = preprocess_square(gemma.picture, model.config.vision)

    def prompt(last: int):   # the image within the sliding window of the change and the end
        ids = [sp.bos_id(), *words[:-1], last, boi, *sp.encode(" it")]
        return soft_token_prompt(ids, [picture], model.config, reference_encode(model),
                                 around=sp.encode("\n\n"))

    def run(p) -> Run:
        ids = torch.from_numpy(p.ids)[None]
        return lambda: gemma.hf(input_ids=ids, pixel_values=hf_pixels(gemma),
                                token_type_ids=(ids == soft).long()).logits

    clean, corrupt = prompt(words[-1]), prompt(sp.encode(" please")[-1])
    assert clean.image_groups() is not None
    got = trace(model, clean, corrupt)
    assert len(got.units) == len(clean)         # one patch at a time
    assert_equals_hf(got, gemma.hf.model.language_model.layers, run(clean), run(corrupt),
                     gemma.hf.config.text_config.vocab_size)


def test_qwen3vl_trace_with_deepstack_equals_hf(qwen, image):  # noqa: F811
    model, encode = qwen.paired, VisionEncoder(qwen.paired, threads=1).encode
    ids = image_ids(qwen)
    changed = list(ids)
    changed[3] = ids[10]
    clean, corrupt = (image_prompt(i, [image], model.config, encode) for i in (ids, changed))
    assert clean.image_deepstack is not None
    got = trace(model, clean, corrupt, patch_group=2)

    def run(p) -> Run:
        return lambda: qwen.hf(**hf_inputs(qwen, p.ids.tolist(), image)).logits

    assert_equals_hf(got, qwen.hf.model.language_model.layers, run(clean), run(corrupt),
                     qwen.hf.config.text_config.vocab_size)


def test_a_noised_picture_traces_through_its_patches_as_hf(hf_vl, vl_model):  # noqa: F811
    ids = turn(text(2), "img", text(3))
    encode = VisionEncoder(vl_model, threads=1).encode
    noise = noised(FIRST)
    assert noise.digest != FIRST.digest and noise.pixel_values.shape == FIRST.pixel_values.shape
    clean, corrupt = (image_prompt(ids, [p], vl_model.config, encode) for p in (FIRST, noise))
    got = trace(vl_model, clean, corrupt, patch_group=2)
    assert not any(got.changed(n) for n in range(len(got.units)))   # the same words
    assert_equals_hf(got, hf_vl.model.model.language_model.layers, qwen25_run(hf_vl, clean),
                     qwen25_run(hf_vl, corrupt, noise),
                     hf_vl.model.config.text_config.vocab_size)
    text_before = [n for n in range(len(got.units)) if got.units[n][0] < got.images[0].start]
    np.testing.assert_array_equal(got.restored[:, text_before], 0.0)  # nothing differs there


def test_a_noised_picture_with_deepstack_equals_hf(qwen, image):  # noqa: F811
    model, encode = qwen.paired, VisionEncoder(qwen.paired, threads=1).encode
    ids, noise = image_ids(qwen), noised(image)
    clean, corrupt = (image_prompt(ids, [p], model.config, encode) for p in (image, noise))
    assert not np.array_equal(clean.image_deepstack, corrupt.image_deepstack)
    got = trace(model, clean, corrupt, patch_group=2)
    assert_equals_hf(got, qwen.hf.model.language_model.layers,
                     lambda: qwen.hf(**hf_inputs(qwen, clean.ids.tolist(), image)).logits,
                     lambda: qwen.hf(**hf_inputs(qwen, corrupt.ids.tolist(), noise)).logits,
                     qwen.hf.config.text_config.vocab_size)


def test_the_same_words_and_pictures_are_refused(vl_model):  # noqa: F811
    clean, _ = qwen25_prompts(vl_model, before=True)
    with pytest.raises(TraceError, match="are the same"):
        trace(vl_model, clean, clean)


def test_a_word_after_the_image_leaves_it_unrestored(vl_model):  # noqa: F811
    clean, corrupt = qwen25_prompts(vl_model, before=False)
    got = trace(vl_model, clean, corrupt, patch_group=3)
    columns = [n for n in range(len(got.units)) if got.patch_block(n) is not None]
    changed = [n for n in range(len(got.units)) if got.changed(n)]
    assert columns and changed and changed[0] > columns[-1]
    np.testing.assert_array_equal(got.restored[:, :changed[0]], 0.0)
    assert got.restored[0, changed[0]] == pytest.approx(1.0, abs=1e-5)


def test_prompts_with_the_image_elsewhere_are_refused(vl_model):  # noqa: F811
    clean, _ = qwen25_prompts(vl_model, before=True)
    encode = VisionEncoder(vl_model, threads=1).encode
    moved = image_prompt(turn(text(1), "img", text(4)), [FIRST], vl_model.config, encode)
    assert len(moved) == len(clean)
    with pytest.raises(TraceError, match="images at different tokens"):
        trace(vl_model, clean, moved)


def test_a_two_way_image_restarts_at_its_first_row_as_full_reruns(tmp_path):
    """Three Gemma 3 blocks (a window over the whole prompt), an image whose rows see each
    other both ways: restoring a patch inside it changes the patches before it from the
    next block on; every cell equals a run of all rows from the restored layer on (no keys
    reused), steered as the answer was. The HF Gemma 3 above has too few blocks and too
    short a window to show the restart."""
    model = open_model(write_model(tmp_path / "g.gguf", "gemma3", TextSpec(layers=3), std=0.3,
                                   overrides={"gemma3.attention.sliding_window": 16}))
    rng = np.random.default_rng(4)
    ids = rng.integers(5, 200, 10)
    rows = np.arange(3, 7)
    clean = PromptTokens(ids, np.arange(10), tuple(ids.tolist()), 10, rows,
                         rng.normal(0, 1, (4, 64)).astype(np.float32),
                         bidirectional_images=True)
    changed = ids.copy()
    changed[2] += 1
    corrupt = dataclasses.replace(clean, ids=changed)
    steering = rng.normal(0, 0.5, (3, 64)).astype(np.float32)   # the answer's control vectors
    got = trace(model, clean, corrupt, steering=steering)
    weights = ReferenceWeights(model)
    embeds = weights.embed(ids), weights.embed(changed)
    for e in embeds:
        e[rows] = clean.image_embeds
    groups = clean.image_groups()
    states = [forward(model, None, clean.positions, e, weights=weights, image_groups=groups,
                      steering=steering).hidden_states for e in embeds]
    head = weights.lm_head()[got.answer] - weights.lm_head()[got.rival]
    tables = rope_tables(clean.positions, weights.config)
    for layer in range(4):
        for n, unit in enumerate(got.units):
            x = states[1][layer].copy()
            x[list(unit)] = states[0][layer][list(unit)]
            out = blocks(x, weights, tables, first=layer, groups=groups, steering=steering)
            last = (out[-1] if out else x)[-1]
            expected = rms_norm(last, weights.output_norm(), weights.config.rms_eps) @ head
            assert got.diff[layer, n] == pytest.approx(float(expected), abs=1e-5)
    assert np.abs(got.restored[1:3, 3:6]).max() > 1e-3     # patches before the last matter
