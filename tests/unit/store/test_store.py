"""Reading synthetic Ollama stores: listing, lookup, layers, sizes, ids, verification."""

import hashlib
import json
from pathlib import Path

import pytest

from engine.errors import CorruptModel, DigestMismatch, MissingBlob, ModelNotFound, Remedy
from engine.gojson import dumps, sorted_map
from engine.store import Store
from engine.store import manifest as mf
from engine.store.params import format_parameters
from engine.store.store import default_root
from tests.fixtures.stores import FAKE_GGUF, StoreBuilder


@pytest.fixture
def builder(tmp_path) -> StoreBuilder:
    return StoreBuilder(tmp_path / "models")


def test_default_root_trims_spaces_and_quotes_like_ollama(monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_MODELS", f"  \"'{tmp_path}'\"  ")
    assert default_root() == tmp_path
    monkeypatch.setenv("OLLAMA_MODELS", "   ")
    assert default_root() == Path.home() / ".ollama" / "models"
    monkeypatch.delenv("OLLAMA_MODELS")
    assert Store.open().root == Path.home() / ".ollama" / "models"


def test_list_reads_every_layer_kind(builder):
    path = builder.add(
        "qwen2.5vl:3b",
        projector=b"GGUF-projector",
        template="{{ .Prompt }}",
        system="Be brief.",
        params={"stop": ["<|im_end|>", "<|endoftext|>"], "temperature": 0.7, "top_k": 40},
        messages=[{"role": "user", "content": "hi"}],
        licenses=("Apache 2.0\nsecond line", "MIT"),
    )
    (model,) = Store.open(builder.root).list()
    data = path.read_bytes()
    assert model.name.display == "qwen2.5vl:3b"
    assert model.manifest_path == path
    assert model.digest == hashlib.sha256(data).hexdigest()
    assert model.short_id == model.digest[:12]
    manifest = json.loads(data)
    assert model.size == manifest["config"]["size"] + sum(x["size"] for x in manifest["layers"])
    assert model.modified.timestamp() == pytest.approx(path.stat().st_mtime)
    assert model.model_path.read_bytes() == FAKE_GGUF
    assert model.projector_path.read_bytes() == b"GGUF-projector"
    assert model.template == "{{ .Prompt }}"
    assert model.system == "Be brief."
    assert model.params == {"stop": ["<|im_end|>", "<|endoftext|>"], "temperature": 0.7,
                            "top_k": 40}
    assert model.messages == [{"role": "user", "content": "hi"}]
    assert model.license == ["Apache 2.0\nsecond line", "MIT"]
    assert model.config["model_family"] == "qwen2"
    assert model.parent_model == "model.gguf"
    assert [layer.media_type for layer in model.layers][:2] == [mf.MEDIA_MODEL, mf.MEDIA_PROJECTOR]


def test_manifest_round_trips_the_real_example_byte_for_byte():
    example = Path("/work/shared/reference/ollama-manifest-example.json")
    if not example.exists():
        pytest.skip("reference example not available")
    parsed = mf.parse_manifest(example.read_bytes(), example)
    assert parsed.size == 567 + 5969233408 + 487 + 28 + 11343 + 23
    again = mf.parse_manifest(parsed.to_bytes(), example)
    assert again == parsed
    assert parsed.to_bytes() == dumps(json.loads(example.read_bytes()))


def test_legacy_colon_blob_names_and_several_hosts(tmp_path):
    legacy = StoreBuilder(tmp_path / "models", legacy_blob_names=True)
    legacy.add("old", model=b"GGUF old store", system="from an old store")
    modern = StoreBuilder(tmp_path / "models")
    modern.add("user/m:t")
    modern.add("example.com:5000/team/m:v1")
    models = {m.name.display: m for m in Store.open(tmp_path / "models").list()}
    assert set(models) == {"old:latest", "user/m:t", "example.com:5000/team/m:v1"}
    assert models["old:latest"].model_path.name.startswith("sha256:")
    assert models["old:latest"].system == "from an old store"
    assert models["example.com:5000/team/m:v1"].manifest_path.parts[-4:] == (
        "example.com:5000", "team", "m", "v1")


def test_list_is_newest_first(builder):
    builder.add("older", mtime=1_000_000_000)
    builder.add("newer", mtime=1_700_000_000)
    assert [m.name.model for m in Store.open(builder.root).list()] == ["newer", "older"]


def test_unreadable_manifests_are_reported_not_fatal(builder):
    builder.add("good")
    truncated = builder.add("truncated")
    truncated.write_bytes(truncated.read_bytes()[:40])
    builder.write_manifest("notjson", b"\x00\xffnot json")
    builder.write_manifest("schema1", json.dumps({"schemaVersion": 1, "layers": []}).encode())
    gone = builder.add("gone", system="deleted blob")
    missing = Store.open(builder.root).get("gone")
    (builder.root / "blobs" / f"sha256-{missing.layers[1].hex}").unlink()
    stray = builder.root / "manifests" / "registry.ollama.ai" / "library" / "x" / ".bad tag"
    stray.parent.mkdir(parents=True)
    stray.write_text("{}")

    models, problems = Store.open(builder.root).scan()
    assert [m.name.model for m in models] == ["good"]
    messages = {p.path.parts[-2]: p.message for p in problems}
    assert "not valid JSON" in messages["truncated"] and str(truncated) in messages["truncated"]
    assert "not valid JSON" in messages["notjson"]
    assert "schemaVersion 1" in messages["schema1"]
    assert missing.layers[1].hex in messages["gone"] and str(gone) in messages["gone"]
    assert "invalid model name" in messages["x"]


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ([], "not a JSON object"),
        ({"schemaVersion": 2, "config": {}, "layers": []}, "config has digest None"),
        ({"schemaVersion": 2, "layers": {}}, "no 'layers' list"),
        ({"schemaVersion": 2, "config": {"digest": "sha256:" + "a" * 64, "size": -1},
          "layers": []}, "size -1"),
    ],
)
def test_wrong_schema_names_the_file(record, says, tmp_path):
    path = tmp_path / "manifest"
    with pytest.raises(CorruptModel) as caught:
        mf.parse_manifest(json.dumps(record).encode(), path)
    assert says in str(caught.value) and str(path) in str(caught.value)


def test_get_matches_case_insensitively(builder):
    builder.add("Qwen2.5VL:3B")
    assert Store.open(builder.root).get("qwen2.5vl:3b").name.model == "Qwen2.5VL"


def test_unknown_model_suggests_close_names(builder):
    builder.add("qwen2.5vl:3b")
    builder.add("llama3.2")
    with pytest.raises(ModelNotFound) as caught:
        Store.open(builder.root).get("qwen2.5-vl:3b")
    assert "did you mean qwen2.5vl:3b" in str(caught.value)
    with pytest.raises(ModelNotFound) as caught:
        Store.open(builder.root).get("zzzz")
    assert "2 models in the store" in str(caught.value)


def test_missing_store_says_where_and_how(tmp_path):
    with pytest.raises(ModelNotFound) as caught:
        Store.open(tmp_path / "nowhere").list()
    message = str(caught.value)
    assert str(tmp_path / "nowhere") in message
    assert "OLLAMA_MODELS" in message and caught.value.remedy is Remedy.MODELS_DIR


def test_missing_model_blob_names_digest_and_manifest(builder):
    path = builder.add("m")
    digest = hashlib.sha256(FAKE_GGUF).hexdigest()
    (builder.root / "blobs" / f"sha256-{digest}").unlink()
    with pytest.raises(MissingBlob) as caught:
        Store.open(builder.root).get("m")
    assert digest in str(caught.value) and str(path) in str(caught.value)


def test_verify_streams_and_catches_wrong_content(builder):
    builder.add("m", system="hello")
    store = Store.open(builder.root)
    model = store.get("m")
    assert len(store.verify(model)) == len(model.layers) + 1
    blob = builder.written[model.layers[0].hex]
    blob.write_bytes(b"GGUF but different")
    with pytest.raises(DigestMismatch) as caught:
        store.verify(model)
    message = str(caught.value)
    assert model.layers[0].hex in message
    assert hashlib.sha256(b"GGUF but different").hexdigest() in message


def test_verify_reports_a_deleted_blob(builder):
    builder.add("m", system="hello")
    store = Store.open(builder.root)
    model = store.get("m")
    builder.written[model.layers[0].hex].unlink()
    with pytest.raises(MissingBlob, match=model.layers[0].hex):
        store.verify(model)


def test_params_are_printed_as_ollama_show_prints_them():
    params = json.loads(dumps(sorted_map({"stop": ["<|im_end|>"], "temperature": 0.7,
                                          "num_ctx": 4096, "seed": 1_000_000})))
    assert format_parameters(params).splitlines() == [
        "num_ctx                        4096",
        "seed                           1e+06",
        'stop                           "<|im_end|>"',
        "temperature                    0.7",
    ]


def test_config_blob_not_json_names_blob_and_manifest(builder):
    path = builder.add("m")
    config_hex = json.loads(path.read_bytes())["config"]["digest"][7:]
    (builder.root / "blobs" / f"sha256-{config_hex}").write_bytes(b"{truncated")
    with pytest.raises(CorruptModel) as caught:
        Store.open(builder.root).get("m")
    assert "config blob" in str(caught.value) and str(path) in str(caught.value)
