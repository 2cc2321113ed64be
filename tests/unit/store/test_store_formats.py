"""Models the store holds in a form Lantern does not read (Ollama's MLX-engine models,
cloud models) are listed as what they are, not reported as damaged."""

import pytest

from engine.errors import CorruptModel, Remedy, UnsupportedModel
from engine.store import Store
from engine.store import manifest as mf
from tests.fixtures.stores import StoreBuilder


@pytest.fixture
def builder(tmp_path) -> StoreBuilder:
    return StoreBuilder(tmp_path / "models")


def test_an_mlx_model_is_listed_as_what_it_is(builder):
    path = builder.add_mlx("qwen3-mlx:8b", family="qwen3", quantization="mxfp8")
    builder.add("tiny")
    models, problems = Store.open(builder.root).scan()
    assert [m.name.display for m in models] == ["tiny:latest"]
    (problem,) = problems
    assert problem.unsupported and problem.name == "qwen3-mlx:8b"
    assert problem.message == (
        "qwen3-mlx:8b: an MLX model (qwen3, safetensors weights, mxfp8) that only Ollama's "
        "MLX engine runs; Lantern runs GGUF weights only")
    assert problem.remedy is Remedy.OLLAMA
    assert problem.listing.size == mf.parse_manifest(path.read_bytes(), path).size
    assert len(problem.listing.short_id) == 12
    with pytest.raises(UnsupportedModel, match="an MLX model") as raised:
        Store.open(builder.root).get("qwen3-mlx:8b")
    assert raised.value.remedy is Remedy.OLLAMA


def test_an_mlx_models_family_falls_back_to_its_architecture_or_goes_unnamed(builder):
    path = builder.add_mlx("odd")
    manifest = mf.parse_manifest(path.read_bytes(), path)
    config_json = next(layer for layer in manifest.layers if layer.name == "config.json")
    builder.blob_path(config_json).unlink()         # the family's file is gone
    (problem,) = Store.open(builder.root).scan()[1]
    assert problem.unsupported and "(family not recorded, safetensors weights" in problem.message


def test_a_cloud_model_says_where_it_runs(builder):
    builder.add_cloud("gpt-oss:120b-cloud", "gpt-oss:120b")
    (problem,) = Store.open(builder.root).scan()[1]
    assert problem.unsupported
    assert problem.message.startswith(
        "gpt-oss:120b-cloud: a cloud model (gpt-oss:120b on ollama.com): its "
        "weights are not in the store")


def test_a_manifest_with_no_weights_of_any_kind_is_still_damaged(builder):
    config = builder.blob(b"{}", mf.CONFIG_MEDIA_TYPE)
    builder.write_manifest("empty", mf.Manifest(config=config, layers=()).to_bytes())
    (problem,) = Store.open(builder.root).scan()[1]
    assert not problem.unsupported and "has no model layer" in problem.message
    with pytest.raises(CorruptModel):
        Store.open(builder.root).get("empty")


def test_layer_names_survive_a_round_trip(builder):
    path = builder.add_mlx("qwen3-mlx")
    data = path.read_bytes()
    manifest = mf.parse_manifest(data, path)
    assert {layer.name for layer in manifest.layers} >= {"config.json",
                                                       "model.layers.0.mlp.up_proj.weight"}
    assert manifest.to_bytes() == data        # as Ollama wrote it, "name" after "from"
