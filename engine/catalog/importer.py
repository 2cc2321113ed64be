"""``lantern import``: a GGUF (plus optional projector, template, system, params) becomes a
store model laid out as ``ollama create`` lays it out (ollama server/create.go):

- each file is a blob named by its sha256; the model layer's ``from`` is the file name;
- layers in Ollama's order: GGUF files (sorted by name), template, system, params;
- a config blob ``{model_format, model_family, model_families, model_type, file_type,
  architecture: "amd64", os: "linux"}`` (Ollama writes those two constants);
- JSON written byte for byte as Go writes it, so the same inputs give the same digests.

Unlike ``ollama create``, no template layer is guessed from the GGUF's chat template
(Lantern renders that Jinja template itself) and the GGUF is never rewritten.

Safety: the GGUF is opened (validated) before anything is written; blobs are hard links
when the source is on the store's filesystem, else streamed copies into a temp file that
is renamed into place; the manifest is written last, to a temp file in its own directory
then ``os.replace``d, so an interrupted import never leaves a half manifest. Temp files
left by a killed import are removed by the next one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from engine import gojson
from engine.errors import CorruptModel, ModelNotFound
from engine.gguf import open_model
from engine.store import manifest as mf
from engine.store.blobs import blob_name, find_blob, hash_file
from engine.store.names import ModelName
from engine.store.params import normalize_params
from engine.store.store import LocalModel, Store
from engine.store.writer import copy_blob, remove_stale_partials, write_bytes_blob, write_manifest


def _file_blob(store: Store, source: Path, media_type: str) -> mf.Layer:
    """A blob for a big file: hard link on the same filesystem, streamed copy otherwise."""
    same_fs = source.stat().st_dev == store.blobs_dir.stat().st_dev
    digest = ""
    if same_fs:
        digest, size = hash_file(source)
        target = store.blobs_dir / blob_name(digest)
        if find_blob(store.blobs_dir, digest) is None:
            try:
                os.link(source, target)
            except FileExistsError:
                pass
            except OSError:               # no hard links here (FAT, permissions): copy
                digest = ""
    if not digest:
        digest, size = copy_blob(store.blobs_dir, source)
    return mf.Layer(media_type=media_type, digest=f"sha256:{digest}", size=size,
                    source=source.name)


def _config_blob(store: Store, architecture: str, parameter_size: str, quantization: str
                 ) -> mf.Layer:
    config = {
        "model_format": "gguf",
        "model_family": architecture,
        "model_families": [architecture],
        "model_type": parameter_size,
        "file_type": quantization,
        "architecture": "amd64",
        "os": "linux",
    }
    return write_bytes_blob(store.blobs_dir, gojson.dumps(config), mf.CONFIG_MEDIA_TYPE)


def _existing_file(path: str | Path, what: str) -> Path:
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise ModelNotFound(f"{what} file {resolved} does not exist")
    return resolved


def import_gguf(
    store: Store,
    gguf: str | Path,
    name: str | ModelName,
    projector: str | Path | None = None,
    template: str | None = None,
    system: str | None = None,
    params: Mapping[str, object] | None = None,
) -> LocalModel:
    """Create a model from a GGUF file laid out as ``ollama create`` does."""
    target = name if isinstance(name, ModelName) else ModelName.parse(name)
    model_file = _existing_file(gguf, "GGUF")
    projector_file = _existing_file(projector, "projector") if projector else None
    if projector_file is not None and projector_file.name == model_file.name:
        raise CorruptModel(f"the projector {projector_file} has the same file name as the model")
    typed_params = normalize_params(params or {})
    config = open_model(model_file).config            # CorruptModel / UnsupportedModel
    if projector_file is not None:
        open_model(model_file, projector_path=projector_file)

    store.blobs_dir.mkdir(parents=True, exist_ok=True)
    store.manifests_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(store.blobs_dir, store.manifests_dir)

    files = [(model_file, mf.MEDIA_MODEL)]
    if projector_file is not None:
        files.append((projector_file, mf.MEDIA_PROJECTOR))
    layers = [_file_blob(store, path, media) for path, media in sorted(files, key=_by_name)]
    blobs = store.blobs_dir
    if template:
        layers.append(write_bytes_blob(blobs, template.encode("utf-8"), mf.MEDIA_TEMPLATE))
    if system:
        layers.append(write_bytes_blob(blobs, system.encode("utf-8"), mf.MEDIA_SYSTEM))
    if typed_params:
        data = gojson.dumps(gojson.sorted_map(typed_params))
        layers.append(write_bytes_blob(blobs, data, mf.MEDIA_PARAMS))
    config_layer = _config_blob(store, config.architecture, config.parameter_size,
                                config.quantization)
    manifest = mf.Manifest(config=config_layer, layers=tuple(layers))
    path = store.find_manifest(target) or store.manifest_path(target)
    write_manifest(path, manifest.to_bytes())
    return store.get(target)


def _by_name(item: tuple[Path, str]) -> str:
    return item[0].name
