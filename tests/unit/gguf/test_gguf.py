"""engine.gguf on synthetic models of every layout and on the real 0.5B demo model."""


import gguf
import numpy as np
import pytest

from engine.errors import UnsupportedModel
from engine.gguf import GGUFModel, TensorInfo, open_model
from engine.gguf.labels import human_number
from engine.gguf.reader import read_gguf
from tests.fixtures.synthetic_gguf import (
    T,
    TextSpec,
    VisionSpec,
    bytes_to_unicode,
    vocabulary,
    write_model,
    write_projector,
    write_qwen2vl_pair,
)


@pytest.mark.parametrize(
    ("arch", "bias", "qk_norm", "interleaved"),
    [("qwen2", True, False, False), ("qwen3", False, True, False), ("llama", False, False, True)],
)
def test_text_layouts(tmp_path, arch, bias, qk_norm, interleaved):
    spec = TextSpec(hidden=64, heads=4, kv_heads=2, layers=3, ffn=96, rope_theta=5e5)
    model = open_model(write_model(tmp_path / "m.gguf", arch, spec))
    text = model.config.text
    assert (text.architecture, text.n_layers, text.hidden_size) == (arch, 3, 64)
    assert (text.n_heads, text.n_kv_heads, text.head_dim, text.intermediate_size) == (4, 2, 16, 96)
    assert text.vocab_size == len(vocabulary().tokens)
    assert (text.qkv_bias, text.qk_norm, text.rope_interleaved) == (bias, qk_norm, interleaved)
    assert text.rope_theta == 5e5 and text.mrope_sections is None
    assert not text.tie_embeddings and model.config.vision is None
    assert ("blk.2.attn_q.bias" in model.tensors) == bias
    assert ("blk.2.attn_k_norm.weight" in model.tensors) == qk_norm
    assert model.config.assumed == ()


def test_head_dim_from_key_length_and_tied_embeddings(tmp_path):
    spec = TextSpec(hidden=64, heads=4, head_dim=32, tie_embeddings=True)
    model = open_model(write_model(tmp_path / "m.gguf", "qwen3", spec))
    assert model.config.text.head_dim == 32
    assert model.tensors["blk.0.attn_q.weight"].shape == (128, 64)
    assert model.config.text.tie_embeddings and "output.weight" not in model.tensors


def test_special_tokens_from_vocabulary(tmp_path):
    model = open_model(write_model(tmp_path / "m.gguf"))
    ids = vocabulary().special
    special = model.config.special
    assert special.eos == ids["<|im_end|>"] and special.pad == ids["<|endoftext|>"]
    assert special.image_pad == ids["<|image_pad|>"]
    assert special.vision_start == ids["<|vision_start|>"]
    assert special.vision_end == ids["<|vision_end|>"]
    assert special.add_bos is False
    assert model.config.chat_template.startswith("{% for message in messages %}")


def test_metadata_matches_gguf_reader(tmp_path):
    path = write_model(tmp_path / "m.gguf", "qwen25vl")
    model = open_model(path)
    reference = gguf.GGUFReader(path)
    keys = [k for k in reference.fields if not k.startswith("GGUF.")]
    assert list(model.metadata) == keys
    for key in keys:
        assert model.metadata[key] == reference.fields[key].contents(), key
    types = model.array("tokenizer.ggml.token_type")
    assert isinstance(types, np.ndarray) and types.dtype == np.int32
    assert model.array("tokenizer.ggml.tokens") == vocabulary().tokens
    nihao = "".join(bytes_to_unicode()[b] for b in "你好".encode())   # byte-level form
    assert model.metadata.string_index("tokenizer.ggml.tokens", nihao) is not None
    assert model.metadata.string_index("tokenizer.ggml.tokens", "no such token") is None


def test_tensor_views_match_gguf_reader(tmp_path):
    path = write_model(tmp_path / "m.gguf", default_type=T.Q8_0, types={"ffn_up": T.F16})
    tensors = read_gguf(path).tensors
    for ref in gguf.GGUFReader(path).tensors:
        mine = tensors[ref.name]
        assert mine.shape == tuple(int(d) for d in reversed(ref.shape))
        assert mine.raw.dtype == np.uint8 and not mine.raw.flags.writeable
        assert np.array_equal(mine.raw.reshape(-1), ref.data.reshape(-1).view(np.uint8))


@pytest.mark.parametrize(
    "qtype",
    [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K],
)
def test_dequantize_equals_gguf_quants(tmp_path, qtype):
    spec = TextSpec(hidden=256, heads=4, kv_heads=2, ffn=512, layers=1)
    model = open_model(write_model(tmp_path / "m.gguf", text=spec, default_type=qtype))
    tensor = model.tensors["blk.0.ffn_down.weight"]
    assert tensor.ggml_type == qtype
    assert tensor.raw.shape[0] == 256
    values = tensor.dequantize()
    assert values.dtype == np.float32 and values.shape == (256, 512)
    expected = gguf.quants.dequantize(np.array(tensor.raw), qtype).reshape(256, 512)
    np.testing.assert_array_equal(values, expected)
    assert 0.05 < float(values.std()) < 0.2   # random blocks have a sane spread


def test_block_misfit_falls_back_to_f16(tmp_path):
    model = open_model(write_model(tmp_path / "m.gguf", "qwen25vl", default_type=T.Q8_0))
    assert model.tensors["v.blk.0.ffn_down.weight"].ggml_type == T.F16    # rows of 40
    assert model.tensors["v.blk.0.attn_q.weight"].ggml_type == T.Q8_0
    assert model.tensors["blk.0.attn_q.bias"].ggml_type == T.F32


def test_qwen25vl_inline(tmp_path):
    vision = VisionSpec(hidden=32, heads=2, layers=4, ffn=40, fullatt_blocks=(1, 3))
    model = open_model(write_model(tmp_path / "vl.gguf", "qwen25vl", vision=vision))
    v = model.config.vision
    assert v.layout == "inline"
    assert (v.n_layers, v.hidden_size, v.intermediate_size, v.n_heads) == (4, 32, 40, 2)
    assert (v.patch_size, v.spatial_merge_size, v.temporal_patch_size) == (14, 2, 2)
    assert v.fullatt_block_indexes == (1, 3) and v.out_hidden_size == 64
    assert model.config.text.mrope_sections == (2, 3, 3)
    assert model.tensors["v.patch_embd_0.weight"].shape == (32, 3, 14, 14)
    assert model.tensors["v.merger.mlp.0.weight"].shape == (128, 128)
    assert model.projector_path is None


def test_qwen25vl_defaults_are_recorded(tmp_path):
    dropped = {f"qwen25vl.vision.{k}": None for k in ("window_size", "rope.freq_base")}
    path = write_model(tmp_path / "vl.gguf", "qwen25vl", overrides=dropped)
    config = open_model(path).config
    assert config.vision.window_size == 112 and config.vision.rope_theta == 1e4
    assert set(config.assumed) == set(dropped)


def test_qwen2vl_with_projector(tmp_path):
    vision = VisionSpec(hidden=32, heads=2, layers=6, ffn=40, fullatt_blocks=(2, 5))
    text_path, mmproj = write_qwen2vl_pair(tmp_path / "t.gguf", tmp_path / "mmproj.gguf",
                                           vision=vision)
    model = open_model(text_path, mmproj)
    assert model.projector_path == mmproj
    assert model.projector_metadata["clip.projector_type"] == "qwen2.5vl_merger"
    assert model.config.text.mrope_sections == (2, 3, 3)   # [2, 3, 3, 0] with the zero dropped
    v = model.config.vision
    assert v.layout == "projector" and v.fullatt_block_indexes == (2, 5)
    assert (v.n_layers, v.intermediate_size) == (6, 40)
    raw_names = set(read_gguf(mmproj).tensors)
    assert {"v.patch_embd.weight", "v.patch_embd.weight.1", "v.post_ln.weight",
            "mm.0.weight", "mm.2.bias"} <= raw_names
    for canonical, raw in (("v.patch_embd_1.weight", "v.patch_embd.weight.1"),
                           ("v.merger.ln_q.weight", "v.post_ln.weight"),
                           ("v.merger.mlp.2.weight", "mm.2.weight"),
                           ("v.blk.3.attn_out.bias", "v.blk.3.attn_out.bias")):
        assert np.array_equal(model.tensors[canonical].dequantize(),
                              read_gguf(mmproj).tensors[raw].dequantize())
    assert not any(name.startswith("mm.") for name in model.tensors)
    text_only = open_model(text_path)
    assert text_only.config.vision is None and text_only.config.text.mrope_sections == (2, 3, 3)
    assert model.config.parameter_count > text_only.config.parameter_count


def test_projector_for_a_text_model_is_refused(tmp_path):
    text = write_model(tmp_path / "t.gguf", "qwen2")
    mmproj = write_projector(tmp_path / "mmproj.gguf")
    with pytest.raises(UnsupportedModel, match="projector"):
        open_model(text, mmproj)


def test_other_projector_types_are_refused(tmp_path):
    text = write_model(tmp_path / "t.gguf", "qwen2vl")
    mmproj = write_projector(tmp_path / "mm.gguf", overrides={"clip.projector_type": "mlp"})
    with pytest.raises(UnsupportedModel, match="'mlp'"):
        open_model(text, mmproj)


def test_labels(tmp_path):
    path = write_model(tmp_path / "m.gguf", default_type=T.Q6_K,
                       text=TextSpec(hidden=256, ffn=512, layers=1))
    config = open_model(path).config
    expected = sum(t.n_elements for t in read_gguf(path).tensors.values())
    assert config.parameter_count == expected
    assert config.quantization == "Q6_K"           # no general.file_type: dominant type
    path = write_model(tmp_path / "f.gguf", file_type=15)
    assert open_model(path).config.quantization == "Q4_K_M"


@pytest.mark.parametrize(
    ("count", "label"),
    [(494_032_768, "494.03M"), (630_167_424, "630.17M"), (1_543_714_304, "1.5B"),
     (8_030_261_248, "8.0B"), (7_000_000_000, "7B"), (3_000_000, "3M"), (113_088, "113K"),
     (999, "999")],
)
def test_human_number_like_ollama(count, label):
    assert human_number(count) == label


def test_demo_05b(demo_05b):
    model = open_model(demo_05b)
    assert isinstance(model, GGUFModel)
    config = model.config
    text = config.text
    assert config.architecture == "qwen2" and config.vision is None
    assert (text.n_layers, text.hidden_size, text.n_heads, text.n_kv_heads) == (24, 896, 14, 2)
    assert (text.intermediate_size, text.vocab_size, text.head_dim) == (4864, 151936, 64)
    assert text.rope_theta == 1e6 and text.rms_eps == pytest.approx(1e-6)
    assert text.qkv_bias and text.mrope_sections is None
    # This file stores its own output.weight (HF's checkpoint ties it), so it is not tied
    # and Ollama counts it: 494.03M tied parameters + 151936 * 896 = 630.17M.
    assert not text.tie_embeddings
    assert config.parameter_count == 630_167_424 and config.parameter_size == "630.17M"
    assert config.quantization == "Q4_K_M" and config.assumed == ()
    types = {t.ggml_type.name for t in model.tensors.values()}
    assert types == {"F32", "Q5_0", "Q8_0", "Q4_K", "Q6_K"}
    special = config.special
    assert (special.eos, special.pad, special.image_pad) == (151645, 151643, 151655)
    assert (special.vision_start, special.vision_end) == (151652, 151653)
    assert model.tensors["token_embd.weight"].shape == (151936, 896)
    q = model.tensors["blk.0.attn_q.weight"]
    assert isinstance(q, TensorInfo) and q.raw.shape == (896, 896 // 32 * 22)  # Q5_0 rows
    tokens = model.array("tokenizer.ggml.tokens")
    assert len(tokens) == 151936 and tokens[151644] == "<|im_start|>"
    assert len(model.metadata["tokenizer.ggml.merges"]) == 151387
