"""Control vectors in llama.cpp's GGUF format: what `write_control_vector` writes, read
back by gguf-py's own reader (not ours); llama.cpp's layer numbering (direction N joins
block N's output, none joins the embeddings); the weighted sum of several vectors; and a
vector made for another model refused with a reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader

from engine.errors import ControlVectorMismatch, CorruptModel
from engine.gguf.control_vector import (
    Steering,
    parse_spec,
    read_control_vector,
    write_control_vector,
)
from tests.fixtures.synthetic_gguf import write_model

H = 8


def directions(seed: int, layers=(1, 2, 3)) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(H).astype(np.float32) for n in layers}


def test_written_file_is_llama_cpps_layout(tmp_path):
    dirs = directions(0)
    path = tmp_path / "calm.gguf"
    write_control_vector(path, dirs, "qwen2")
    reader = GGUFReader(path)

    def value(key: str):
        field = reader.fields[key]
        return field.contents()

    assert value("general.architecture") == "controlvector"
    assert value("controlvector.model_hint") == "qwen2"
    assert value("controlvector.layer_count") == 3
    assert reader.fields["controlvector.layer_count"].types[0].name == "INT32"
    assert sorted(t.name for t in reader.tensors) == ["direction.1", "direction.2", "direction.3"]
    for tensor in reader.tensors:
        assert tensor.tensor_type == GGMLQuantizationType.F32
        assert list(tensor.shape) == [H]  # 1-D, n_embd values
        np.testing.assert_array_equal(tensor.data, dirs[int(tensor.name.split(".")[1])])
    back = read_control_vector(path)
    assert back.model_hint == "qwen2" and back.n_embd == H and back.name == "calm"
    assert sorted(back.directions) == [1, 2, 3]


def test_direction_n_joins_block_n_and_vectors_add_up_with_their_strengths(tmp_path):
    a, b = directions(1), directions(2, layers=(2, 3))
    write_control_vector(tmp_path / "a.gguf", a, "qwen2")
    write_control_vector(tmp_path / "b.gguf", b, "qwen2")
    steering = Steering.load([(tmp_path / "a.gguf", 0.5), (tmp_path / "b.gguf", -2.0)])
    table = steering.table("qwen2", 4, H)
    assert table.shape == (4, H) and table.dtype == np.float32
    np.testing.assert_array_equal(table[0], 0)  # the embeddings / block 0: never steered
    np.testing.assert_allclose(table[1], 0.5 * a[1])
    np.testing.assert_allclose(table[3], 0.5 * a[3] - 2.0 * b[3], rtol=1e-6)
    assert steering.label == "a x0.5 + b x-2"
    assert not Steering.load([(tmp_path / "a.gguf", 0.0)])  # strength 0 steers nothing
    assert steering.with_strength(1, 0).label == "a x0.5"


@pytest.mark.parametrize(("arch", "layers", "width", "message"), [
    ("llama", 4, H, "made for a qwen2 model, this one is llama"),
    ("qwen2", 4, 16, "8 values per layer, this model's residual stream 16"),
    ("qwen2", 3, H, "steers layer 3, this model has layers 1..2"),
])
def test_a_vector_for_another_model_is_refused(tmp_path, arch, layers, width, message):
    write_control_vector(tmp_path / "v.gguf", directions(3), "qwen2")
    with pytest.raises(ControlVectorMismatch, match=message):
        Steering.load([(tmp_path / "v.gguf", 1.0)]).table(arch, layers, width)


def test_a_model_file_or_a_direction_0_is_not_a_control_vector(tmp_path):
    model = write_model(tmp_path / "m.gguf", "qwen2")
    with pytest.raises(CorruptModel, match="not a control vector"):
        read_control_vector(model)
    write_control_vector(tmp_path / "zero.gguf", {0: np.ones(H, np.float32)}, "qwen2")
    with pytest.raises(CorruptModel, match="direction.N with N >= 1"):
        read_control_vector(tmp_path / "zero.gguf")


def test_file_and_strength_as_llama_cpp_spells_them():
    assert parse_spec("calm.gguf") == (Path("calm.gguf"), 1.0)
    assert parse_spec("calm.gguf:-0.5") == (Path("calm.gguf"), -0.5)
    assert parse_spec("C:/v/calm.gguf") == (Path("C:/v/calm.gguf"), 1.0)
