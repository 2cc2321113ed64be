"""Broken and unsupported files end in one readable LanternError naming what is wrong."""

import pytest

from engine.errors import CorruptModel, UnsupportedModel
from engine.gguf import open_model
from engine.gguf.reader import read_gguf
from tests.fixtures.synthetic_gguf import VisionSpec, write_model, write_projector


@pytest.fixture
def model_bytes(tmp_path) -> bytes:
    return write_model(tmp_path / "good.gguf", "qwen2").read_bytes()


def _truncation_points(data: bytes, data_offset: int) -> dict[str, int]:
    return {
        "magic": 2,
        "header counts": 12,
        "metadata key": data.index(b"general.architecture") + 5,
        "string array": data.index(b"tokenizer.ggml.merges") + 60,
        "tensor info": data.index(b"blk.1.ffn_up.weight") + 3,
        "tensor data": data_offset + 100,
        "last byte": len(data) - 1,
    }


@pytest.mark.parametrize(
    "where",
    ["magic", "header counts", "metadata key", "string array", "tensor info", "tensor data",
     "last byte"],
)
def test_truncated_file(tmp_path, model_bytes, where):
    data_offset = read_gguf(tmp_path / "good.gguf").data_offset
    cut = _truncation_points(model_bytes, data_offset)[where]
    path = tmp_path / "cut.gguf"
    path.write_bytes(model_bytes[:cut])
    with pytest.raises(CorruptModel) as error:
        open_model(path)
    message = str(error.value)
    assert str(path) in message
    assert f"file ends at byte {cut}" in message or "not a GGUF file" in message
    if where in ("tensor data", "last byte"):
        assert "tensor " in message and "needs bytes" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"", "empty"), (b"hello, I am not a model\n" * 4, "not a GGUF file"),
     (b"GGUF", "file ends at byte 4")],
)
def test_not_a_gguf(tmp_path, content, expected):
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(CorruptModel, match=expected):
        open_model(path)


def test_missing_file(tmp_path):
    with pytest.raises(CorruptModel, match="does not exist"):
        open_model(tmp_path / "nope.gguf")


def test_unsupported_architecture_names_it_and_the_known_ones(tmp_path):
    path = write_model(tmp_path / "m.gguf", overrides={"general.architecture": "mamba"})
    with pytest.raises(UnsupportedModel) as error:
        open_model(path)
    message = str(error.value)
    assert "'mamba'" in message
    for known in ("llama", "qwen2", "qwen25vl", "qwen2vl", "qwen3"):
        assert known in message


def test_missing_required_key(tmp_path):
    path = write_model(tmp_path / "m.gguf", overrides={"qwen2.feed_forward_length": None})
    with pytest.raises(CorruptModel, match="'qwen2.feed_forward_length' is missing"):
        open_model(path)


def test_key_of_wrong_type(tmp_path):
    path = write_model(tmp_path / "m.gguf", overrides={"qwen2.block_count": "two"})
    with pytest.raises(CorruptModel, match="qwen2.block_count is 'two', expected an integer"):
        open_model(path)


def test_wrong_shape_names_tensor_and_both_shapes(tmp_path):
    path = write_model(tmp_path / "m.gguf", overrides={"qwen2.feed_forward_length": 160})
    with pytest.raises(CorruptModel) as error:
        open_model(path)
    assert "tensor blk.0.ffn_down.weight has shape (64, 128), expected (64, 160)" in str(
        error.value
    )


def test_missing_tensor(tmp_path):
    path = write_model(tmp_path / "m.gguf", drop_tensors={"blk.1.attn_k.bias"})
    with pytest.raises(CorruptModel, match=r"tensor blk.1.attn_k.bias \(32,\) is missing"):
        open_model(path)


def test_missing_vision_tensor_in_projector(tmp_path):
    text = write_model(tmp_path / "t.gguf", "qwen2vl")
    mmproj = write_projector(tmp_path / "mm.gguf", drop_tensors={"mm.2.bias"})
    with pytest.raises(CorruptModel, match=r"v.merger.mlp.2.bias \(64,\) is missing"):
        open_model(text, mmproj)


def test_unexpected_tensor_is_not_silently_ignored(tmp_path):
    """A qwen3 file relabelled llama carries q/k norms that llama would silently skip."""
    path = write_model(tmp_path / "m.gguf", "qwen3")
    data = path.read_bytes().replace(b"qwen3", b"llama")  # same length: offsets stay valid
    path.write_bytes(data)
    with pytest.raises(UnsupportedModel, match=r"blk.0.attn_k_norm.weight"):
        open_model(path)


def test_bad_mrope_sections(tmp_path):
    path = write_model(tmp_path / "vl.gguf", "qwen25vl",
                       overrides={"qwen25vl.rope.mrope_section": [4, 4, 4]})
    with pytest.raises(CorruptModel, match="mrope_section"):
        open_model(path)


def test_full_attention_block_out_of_range(tmp_path):
    path = write_model(tmp_path / "vl.gguf", "qwen25vl", vision=VisionSpec(layers=4),
                       overrides={"qwen25vl.vision.fullatt_block_indexes": [1, 7]})
    with pytest.raises(CorruptModel, match=r"\[7\]"):
        open_model(path)


def test_vision_model_needs_vision_tokens(tmp_path):
    good = write_model(tmp_path / "vl.gguf", "qwen25vl").read_bytes()
    path = tmp_path / "no-pad.gguf"
    path.write_bytes(good.replace(b"<|image_pad|>", b"<|image_pud|>"))
    with pytest.raises(CorruptModel, match=r"<\|image_pad\|>"):
        open_model(path)
