"""The numpy reference against HF transformers on tiny synthetic models of each family.

qwen2 / qwen3 / llama: transformers loads the same GGUF itself (its own de-quantizer and,
for llama, its own reverse Q/K permutation). Qwen2.5-VL text: transformers cannot load the
GGUF, so its text model is built from a config we write and the de-quantized weights, and
M-RoPE is checked against its rotary with ``mrope_section``, for text-only and image-like
3-D positions. Each comparison is layer by layer and names the first layer off.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2_5_VLTextConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLTextModel

from engine.gguf import GGUFModel, open_model
from engine.reference import LayerComparison, compare_layers, forward
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model

# Block-32 quant types on different weights, so transformers' de-quantizer (independent of
# gguf-py's) is exercised too; tiny widths rule out the 256-wide K-quants.
TYPES = {"token_embd": T.Q5_0, "attn_q": T.Q4_0, "attn_v": T.Q4_1, "ffn_down": T.Q5_1}
SPECS = {
    "qwen2": TextSpec(layers=3),
    "qwen3": TextSpec(layers=3, heads=2, kv_heads=1, head_dim=128),  # HF's qwen3 GGUF
    #                                      loader ignores key_length: head_dim must be 128
    "llama": TextSpec(layers=3),
}
STD = 0.2  # large enough that attention is far from uniform (rotary errors show)
HF_RTOL = 2e-5  # HF computes GGUF models in fp32; the reference here runs in fp64


def assert_layers_close(
    expected: list[np.ndarray], actual: list[np.ndarray], rtol: float, atol: float = 1e-6
) -> LayerComparison:
    comparison = compare_layers(expected, actual, rtol=rtol, atol=atol)
    if comparison.first_off is not None:
        raise AssertionError(comparison.summary())
    return comparison


def hf_run(model: torch.nn.Module, layers: torch.nn.ModuleList, **inputs: torch.Tensor):
    """Run an HF model; hidden states in the reference's convention (embeddings, then every
    block's output BEFORE the final norm; HF's own last entry is after it) and its output."""
    captured: list[torch.Tensor] = []
    hook = layers[-1].register_forward_hook(
        lambda _module, _args, out: captured.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.no_grad():
            out = model(**inputs, output_hidden_states=True)
    finally:
        hook.remove()
    assert len(out.hidden_states) == len(layers) + 1
    states = [h[0].double().numpy() for h in (*out.hidden_states[:-1], captured[0])]
    return states, out


def perturbed(model: GGUFModel, name: str, factor: float) -> GGUFModel:
    """The same model with one F32 tensor scaled (a weight gone wrong on purpose)."""
    info = model.tensors[name]
    raw = info.raw.copy()
    raw.view(np.float32)[...] *= factor
    tensors = model.tensors | {name: dataclasses.replace(info, raw=raw)}
    return dataclasses.replace(model, tensors=tensors)


def with_text(model: GGUFModel, **changes: object) -> GGUFModel:
    """The same model under a changed text config (to show a wrong config is caught)."""
    text = dataclasses.replace(model.config.text, **changes)
    return dataclasses.replace(model, config=dataclasses.replace(model.config, text=text))


@pytest.fixture(scope="module", params=sorted(SPECS))
def family(request, tmp_path_factory) -> tuple[GGUFModel, torch.nn.Module]:
    arch = request.param
    folder = tmp_path_factory.mktemp(arch)
    path = write_model(folder / f"{arch}.gguf", arch, SPECS[arch], types=TYPES, std=STD)
    hf = AutoModelForCausalLM.from_pretrained(folder, gguf_file=path.name, dtype=torch.float32)
    return open_model(path), hf.eval()


def token_ids(model: GGUFModel, n: int = 12) -> np.ndarray:
    return np.random.default_rng(1).integers(0, model.config.text.vocab_size, n)


def test_family_matches_hf(family):
    model, hf = family
    ids = token_ids(model)
    ref = forward(model, ids, dtype=np.float64)
    states, out = hf_run(hf, hf.model.layers, input_ids=torch.from_numpy(ids)[None])
    assert_layers_close(ref.hidden_states, states, rtol=HF_RTOL)
    logits = out.logits[0].double().numpy()
    assert np.abs(ref.logits - logits).max() <= HF_RTOL * np.abs(logits).max()
    assert (ref.logits.argmax(-1) == logits.argmax(-1)).all()


def test_fp32_reference_close_to_fp64(family):
    model, _ = family
    ids = token_ids(model)
    assert_layers_close(
        forward(model, ids, dtype=np.float64).hidden_states,
        forward(model, ids, dtype=np.float32).hidden_states,
        rtol=1e-5,
    )


def test_wrong_rotary_pairing_is_caught(family):
    """Negative control: NeoX vs interleaved mixed up must fail in the first block."""
    model, hf = family
    ids = token_ids(model)
    wrong = forward(with_text(model, rope_interleaved=not model.config.text.rope_interleaved),
                    ids, dtype=np.float64)
    states, _ = hf_run(hf, hf.model.layers, input_ids=torch.from_numpy(ids)[None])
    assert compare_layers(states, wrong.hidden_states, rtol=HF_RTOL).first_off == 1


def test_perturbed_weight_names_first_layer_off(family):
    """The checking machinery itself: a weight scaled by 1% in blk.1 is reported as layer 2."""
    model, hf = family
    ids = token_ids(model)
    broken = forward(perturbed(model, "blk.1.ffn_norm.weight", 1.01), ids, dtype=np.float64)
    states, _ = hf_run(hf, hf.model.layers, input_ids=torch.from_numpy(ids)[None])
    with pytest.raises(AssertionError, match=r"layer 2 \(blk\.1\) is the first off") as error:
        assert_layers_close(states, broken.hidden_states, rtol=HF_RTOL)
    assert "0: 0/" in str(error.value)  # per-layer figures are part of the message


# --- Qwen2.5-VL text decoder and M-RoPE, against HF's Qwen2.5-VL text model --------------

HF_NAMES = {  # GGUF name under blk.{i}. -> HF name under layers.{i}.
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
VL_SPEC = TextSpec(layers=3, hidden=128, heads=4, kv_heads=2)  # head_dim 32: sections (4, 6, 6)
VL_RTOL = 2e-6  # HF runs in fp64 here but computes RMSNorm and rotary angles in fp32


def hf_text_model(model: GGUFModel) -> Qwen2_5_VLTextModel:
    """HF's Qwen2.5-VL text model in fp64, holding the GGUF's de-quantized weights."""
    cfg = model.config.text
    config = Qwen2_5_VLTextConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads,
        rms_norm_eps=cfg.rms_eps, max_position_embeddings=cfg.context_length,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta,
                         "mrope_section": list(cfg.mrope_sections)},
    )
    config._attn_implementation = "eager"
    state = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}
    for i in range(cfg.n_layers):
        state |= {f"layers.{i}.{hf}": f"blk.{i}.{gguf}" for gguf, hf in HF_NAMES.items()}
    hf = Qwen2_5_VLTextModel(config).to(torch.float64).eval()
    hf.load_state_dict(
        {key: torch.from_numpy(model.tensors[name].dequantize().astype(np.float64))
         for key, name in state.items()},
        strict=True,
    )
    return hf


@pytest.fixture(scope="module")
def vl(tmp_path_factory) -> tuple[GGUFModel, Qwen2_5_VLTextModel, Path]:
    folder = tmp_path_factory.mktemp("qwen25vl")
    path = write_model(folder / "vl.gguf", "qwen25vl", VL_SPEC, types=TYPES, std=STD, seed=3)
    model = open_model(path)
    assert model.config.text.mrope_sections == (4, 6, 6)
    return model, hf_text_model(model), folder


def image_positions(n_text: int, grid: tuple[int, int], n_after: int) -> np.ndarray:
    """[3, S] positions of text, one image of merged grid (rows, cols), then text."""
    rows, cols = grid
    before = np.arange(n_text)
    r, c = np.divmod(np.arange(rows * cols), cols)
    image = np.stack([np.full(rows * cols, n_text), n_text + r, n_text + c])
    after = np.arange(n_after) + n_text + max(rows, cols)
    return np.concatenate([np.stack([before] * 3), image, np.stack([after] * 3)], axis=1)


def vl_compare(vl, ids: np.ndarray, positions: np.ndarray | None) -> None:
    model, hf, _ = vl
    ref = forward(model, ids, positions=positions, dtype=np.float64)
    inputs = {"input_ids": torch.from_numpy(ids)[None]}
    if positions is not None:
        inputs["position_ids"] = torch.tensor(positions)[:, None, :]  # [3, 1, S]
    states, out = hf_run(hf, hf.layers, **inputs)
    assert_layers_close(ref.hidden_states, states, rtol=VL_RTOL)
    logits = out.last_hidden_state[0].numpy() @ model.tensors["output.weight"].dequantize().T
    assert np.abs(ref.logits - logits).max() <= VL_RTOL * np.abs(logits).max()


def test_qwen25vl_text_only_matches_hf(vl):
    ids = token_ids(vl[0], 10)
    vl_compare(vl, ids, None)  # HF's default: arange expanded to (t, h, w)
    one_d = forward(vl[0], ids, dtype=np.float64)
    three_d = forward(vl[0], ids, positions=np.stack([np.arange(10)] * 3), dtype=np.float64)
    np.testing.assert_array_equal(one_d.logits, three_d.logits)  # text-only M-RoPE is 1-D


def test_qwen25vl_image_positions_match_hf(vl):
    positions = image_positions(3, (2, 3), 4)  # S = 3 + 6 + 4 = 13
    ids = token_ids(vl[0], positions.shape[1])
    vl_compare(vl, ids, positions)
    plain = forward(vl[0], ids, dtype=np.float64)  # 1-D positions on the same tokens
    mrope = forward(vl[0], ids, positions=positions, dtype=np.float64)
    assert compare_layers(mrope.hidden_states, plain.hidden_states).first_off == 1


def test_wrong_mrope_sections_are_caught(vl):
    """Negative control: sections in the wrong order must fail against HF in the first block."""
    model, hf, _ = vl
    positions = image_positions(3, (2, 3), 4)
    ids = token_ids(model, positions.shape[1])
    wrong = forward(with_text(model, mrope_sections=(6, 6, 4)), ids, positions=positions,
                    dtype=np.float64)
    states, _ = hf_run(hf, hf.layers, input_ids=torch.from_numpy(ids)[None],
                       position_ids=torch.tensor(positions)[:, None, :])
    assert compare_layers(states, wrong.hidden_states, rtol=VL_RTOL).first_off == 1


def test_qwen2vl_layout_equals_qwen25vl(vl):
    """llama.cpp's two-file layout (sections padded with a 0) runs the same decoder."""
    model, _, folder = vl
    other = open_model(
        write_model(folder / "t.gguf", "qwen2vl", VL_SPEC, types=TYPES, std=STD, seed=3)
    )
    positions = image_positions(2, (3, 2), 2)
    ids = token_ids(model, positions.shape[1])
    np.testing.assert_array_equal(
        forward(model, ids, positions=positions).logits,
        forward(other, ids, positions=positions).logits,
    )
