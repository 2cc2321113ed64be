"""``import_gguf``: Ollama's layout, byte-exact JSON, atomicity, idempotence."""

import errno
import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from engine.catalog.importer import import_gguf
from engine.errors import CorruptModel, InvalidName, ModelNotFound
from engine.store import Store, writer
from engine.store import manifest as mf
from engine.store.params import InvalidParameter, parse_params
from tests.fixtures.synthetic_gguf import write_model, write_qwen2vl_pair


@pytest.fixture(scope="module")
def qwen2_gguf(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("gguf") / "tiny-qwen2.gguf", "qwen2")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_import_writes_ollamas_layout(tmp_path, qwen2_gguf):
    store = Store.open(tmp_path / "models")
    model = import_gguf(store,
        qwen2_gguf, "me/tiny:v1", template="{{ .Prompt }}", system="Be brief.",
        params=parse_params(["temperature=0.7", "top_k=40", "stop=<|im_end|>", "stop=</s>",
                             "use_mmap=false"]),
    )
    path = tmp_path / "models/manifests/registry.ollama.ai/me/tiny/v1"
    assert model.manifest_path == path
    record = json.loads(path.read_bytes())
    assert record["schemaVersion"] == 2
    assert record["mediaType"] == mf.MANIFEST_MEDIA_TYPE
    assert record["config"]["mediaType"] == mf.CONFIG_MEDIA_TYPE
    assert [layer["mediaType"] for layer in record["layers"]] == [
        mf.MEDIA_MODEL, mf.MEDIA_TEMPLATE, mf.MEDIA_SYSTEM, mf.MEDIA_PARAMS]
    assert record["layers"][0] == {
        "mediaType": mf.MEDIA_MODEL, "digest": f"sha256:{_sha(qwen2_gguf)}",
        "size": qwen2_gguf.stat().st_size, "from": "tiny-qwen2.gguf",
    }
    for layer in [record["config"], *record["layers"]]:      # every blob is named by its hash
        blob = tmp_path / "models/blobs" / layer["digest"].replace(":", "-")
        assert _sha(blob) == layer["digest"][7:] and blob.stat().st_size == layer["size"]

    config_blob = model.model_path.parent / record["config"]["digest"].replace(":", "-")
    assert config_blob.read_bytes() == (
        b'{"model_format":"gguf","model_family":"qwen2","model_families":["qwen2"],'
        + f'"model_type":"{model.config["model_type"]}","file_type":"F32",'.encode()
        + b'"architecture":"amd64","os":"linux"}\n'
    )
    params_blob = model.model_path.parent / record["layers"][3]["digest"].replace(":", "-")
    assert params_blob.read_bytes() == (
        b'{"stop":["\\u003c|im_end|\\u003e","\\u003c/s\\u003e"],"temperature":0.7,'
        b'"top_k":40,"use_mmap":false}\n'
    )
    assert model.params == {"stop": ["<|im_end|>", "</s>"], "temperature": 0.7, "top_k": 40,
                            "use_mmap": False}
    assert model.template == "{{ .Prompt }}" and model.system == "Be brief."


def test_same_filesystem_blob_is_a_hard_link(tmp_path, qwen2_gguf):
    model = import_gguf(Store.open(tmp_path / "models"), qwen2_gguf, "tiny")
    assert os.path.samefile(model.model_path, qwen2_gguf)


def test_other_filesystem_blob_is_a_streamed_copy(tmp_path, qwen2_gguf, monkeypatch):
    def no_link(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    model = import_gguf(Store.open(tmp_path / "models"), qwen2_gguf, "tiny")
    assert not os.path.samefile(model.model_path, qwen2_gguf)
    assert _sha(model.model_path) == _sha(qwen2_gguf)
    assert not list((tmp_path / "models/blobs").glob(writer.PARTIAL_PREFIX + "*"))


def test_reimport_changes_nothing(tmp_path, qwen2_gguf):
    store = Store.open(tmp_path / "models")
    first = import_gguf(store, qwen2_gguf, "tiny", system="s", params={"num_ctx": 2048})
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in _files(store.root)}
    time.sleep(0.01)
    again = import_gguf(store, qwen2_gguf, "tiny", system="s", params={"num_ctx": "2048"})
    assert again.digest == first.digest
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in _files(store.root)} == before


def test_projector_becomes_a_projector_layer(tmp_path):
    text, mmproj = write_qwen2vl_pair(tmp_path / "text.gguf", tmp_path / "mmproj.gguf")
    model = import_gguf(Store.open(tmp_path / "models"), text, "vl", projector=mmproj)
    kinds = [(layer.media_type, layer.source) for layer in model.layers]
    assert kinds == [(mf.MEDIA_PROJECTOR, "mmproj.gguf"), (mf.MEDIA_MODEL, "text.gguf")]
    assert model.projector_path is not None and _sha(model.projector_path) == _sha(mmproj)
    assert model.config["model_family"] == "qwen2vl"


def test_invalid_gguf_writes_nothing(tmp_path, qwen2_gguf):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(qwen2_gguf.read_bytes()[:300])
    store = Store.open(tmp_path / "models")
    with pytest.raises(CorruptModel):
        import_gguf(store, broken, "broken")
    (tmp_path / "notgguf.gguf").write_text("hello")
    with pytest.raises(CorruptModel):
        import_gguf(store, tmp_path / "notgguf.gguf", "broken")
    assert _files(store.root) == []


def test_bad_name_and_params_write_nothing(tmp_path, qwen2_gguf):
    store = Store.open(tmp_path / "models")
    with pytest.raises(InvalidName, match="namespace"):
        import_gguf(store, qwen2_gguf, "my.team/tiny")
    with pytest.raises(InvalidParameter, match="unknown parameter 'temprature'"):
        import_gguf(store, qwen2_gguf, "tiny", params={"temprature": 0.5})
    with pytest.raises(InvalidParameter, match="top_k='many'"):
        parse_params(["top_k=many"])
    assert _files(store.root) == []


def test_interrupted_import_leaves_no_manifest_and_is_cleaned_later(tmp_path, qwen2_gguf,
                                                                     monkeypatch):
    store = Store.open(tmp_path / "models")
    real_replace = os.replace

    def crash(src, dst):                     # dies just before the manifest lands
        if store.manifests_dir in Path(dst).parents:
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        import_gguf(store, qwen2_gguf, "tiny", system="hello")
    monkeypatch.setattr(os, "replace", real_replace)
    assert _files(store.manifests_dir) == []
    assert len(list(store.blobs_dir.glob("sha256-*"))) == 3    # model, system, config
    assert [p for p in _files(store.root) if writer.PARTIAL_PREFIX in p.name] == []

    # A killed import (no chance to clean up) leaves temp files behind: the next one removes
    # those untouched for a while and keeps fresh ones (a concurrent import's).
    stale_blob = store.blobs_dir / (writer.PARTIAL_PREFIX + "dead")
    stale_manifest = store.manifests_dir / "registry.ollama.ai/library/x" / (
        "." + writer.PARTIAL_PREFIX + "dead")
    fresh_blob = store.blobs_dir / (writer.PARTIAL_PREFIX + "alive")
    stale_manifest.parent.mkdir(parents=True)
    for path in (stale_blob, stale_manifest, fresh_blob):
        path.write_bytes(b"partial")
    old = time.time() - 3600
    os.utime(stale_blob, (old, old))
    os.utime(stale_manifest, (old, old))
    model = import_gguf(store, qwen2_gguf, "tiny", system="hello")
    assert model.system == "hello"
    assert not stale_blob.exists() and not stale_manifest.exists()
    assert fresh_blob.exists()


def test_missing_source_file_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotFound, match="does not exist"):
        import_gguf(Store.open(tmp_path / "models"), tmp_path / "nope.gguf", "x")
