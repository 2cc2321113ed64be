"""The user's Ollama model store, read in place: listing, lookup, verification.

Layout (ollama manifest/paths.go, envconfig): root ``$OLLAMA_MODELS`` (spaces and quotes
trimmed) or ``~/.ollama/models``; manifests at ``manifests/<host>/<ns>/<model>/<tag>``;
blobs at ``blobs/sha256-<hex>``. Lantern never changes a model it did not import.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.errors import (
    CorruptModel,
    InvalidName,
    LanternError,
    ModelNotFound,
    Remedy,
    UnsupportedModel,
)
from engine.store import manifest as mf
from engine.store.blobs import require_blob, verify_blob
from engine.store.formats import HF_CONFIG, foreign_format
from engine.store.names import ModelName


def default_root() -> Path:
    """``$OLLAMA_MODELS`` as Ollama reads it (trimmed of spaces, then quotes), else the default."""
    value = os.environ.get("OLLAMA_MODELS", "").strip().strip("\"'")
    return Path(value).expanduser() if value else Path.home() / ".ollama" / "models"


@dataclass(frozen=True)
class LocalModel:
    """One manifest of the store with its small layers read and its big blobs located."""

    name: ModelName
    manifest_path: Path
    digest: str                          # sha256 hex of the manifest bytes (the model id)
    size: int                            # layers + config, as Ollama reports
    modified: datetime                   # manifest mtime (timezone-aware)
    modified_ns: int                     # the same, in ns since the epoch (exact timestamps)
    manifest: mf.Manifest
    config: dict[str, object]            # the config blob JSON
    model_path: Path                     # the GGUF blob
    projector_path: Path | None = None
    adapter_paths: tuple[Path, ...] = ()
    template: str | None = None          # Go template layer
    system: str | None = None
    params: dict[str, object] = field(default_factory=dict)
    messages: list[dict] = field(default_factory=list)
    license: list[str] = field(default_factory=list)

    @property
    def layers(self) -> tuple[mf.Layer, ...]:
        return self.manifest.layers

    @property
    def short_id(self) -> str:
        """The 12 hex digits ``ollama list`` shows as ID."""
        return self.digest[:12]

    @property
    def parent_model(self) -> str:
        """The model layer's ``from`` (Ollama's details.parent_model)."""
        return next((layer.source for layer in self.layers if layer.media_type == mf.MEDIA_MODEL),
                    "")


@dataclass(frozen=True)
class StoreProblem:
    """A manifest that could not be read while listing: shown, never fatal to the listing.
    A ``listing`` says the model is sound but in a form Lantern does not run (an MLX or a
    cloud model), not damaged: what ``ollama list`` shows of it."""

    path: Path
    name: str                            # the model's name (the path when not a valid name)
    message: str
    remedy: Remedy | None = None
    listing: Listing | None = None

    @property
    def unsupported(self) -> bool:
        return self.listing is not None


@dataclass(frozen=True)
class Listing:
    """A manifest's line in ``ollama list``: its id, size and time."""

    digest: str                          # sha256 hex of the manifest bytes
    size: int
    modified: datetime

    @property
    def short_id(self) -> str:
        return self.digest[:12]


def listing_of(path: Path) -> Listing:
    data = path.read_bytes()
    return Listing(hashlib.sha256(data).hexdigest(), mf.parse_manifest(data, path).size,
                   datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).astimezone())


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def open(cls, models_dir: str | Path | None = None) -> Store:
        return cls(Path(models_dir).expanduser() if models_dir else default_root())

    @property
    def manifests_dir(self) -> Path:
        return self.root / "manifests"

    @property
    def blobs_dir(self) -> Path:
        return self.root / "blobs"

    def _require_root(self) -> None:
        if not self.root.is_dir():
            raise ModelNotFound(
                f"no Ollama model store at {self.root}; set OLLAMA_MODELS or choose the "
                "folder of one (Ollama's default is ~/.ollama/models)", remedy=Remedy.MODELS_DIR
            )

    def manifest_path(self, name: ModelName) -> Path:
        return self.manifests_dir.joinpath(*name.parts)

    def _manifest_files(self) -> list[Path]:
        if not self.manifests_dir.is_dir():
            return []
        return sorted(p for p in self.manifests_dir.glob("*/*/*/*") if p.is_file())

    def scan(self) -> tuple[list[LocalModel], list[StoreProblem]]:
        """Every readable model (newest first, as /api/tags) and what was wrong with the rest."""
        self._require_root()
        models, problems = [], []
        for path in self._manifest_files():
            shown = str(path)
            try:
                name = ModelName.from_parts(*path.relative_to(self.manifests_dir).parts)
                shown = name.display
                models.append(self._load(name, path))
            except UnsupportedModel as error:
                problems.append(StoreProblem(path, shown, str(error), error.remedy,
                                             listing_of(path)))
            except LanternError as error:
                problems.append(StoreProblem(path, shown, str(error), error.remedy))
            except OSError as error:
                problems.append(StoreProblem(path, shown, str(error)))
        models.sort(key=lambda m: (-int(m.modified.timestamp()), m.name.display))
        return models, problems

    def list(self) -> list[LocalModel]:
        return self.scan()[0]

    def get(self, name: str | ModelName) -> LocalModel:
        """The model called ``name`` (matched case-insensitively, as Ollama does)."""
        path = self.require_manifest(name)
        found = ModelName.from_parts(*path.relative_to(self.manifests_dir).parts)
        return self._load(found, path)

    def require_manifest(self, name: str | ModelName) -> Path:
        """The manifest file of ``name``; ModelNotFound (with close names) when there is none."""
        wanted = name if isinstance(name, ModelName) else ModelName.parse(name)
        self._require_root()
        path = self.find_manifest(wanted)
        if path is None:
            raise ModelNotFound(self._not_found_message(wanted))
        return path

    def find_manifest(self, wanted: ModelName) -> Path | None:
        """The manifest file of ``wanted``, matching names case-insensitively like Ollama."""
        exact = self.manifest_path(wanted)
        if exact.is_file():
            return exact
        for path in self._manifest_files():
            parts = path.relative_to(self.manifests_dir).parts
            if tuple(p.lower() for p in parts) == wanted.key():
                return path
        return None

    def _not_found_message(self, wanted: ModelName) -> str:
        names = []
        for path in self._manifest_files():
            try:
                names.append(ModelName.from_parts(*path.relative_to(self.manifests_dir).parts))
            except InvalidName:
                continue
        displays = {n.display.lower(): n.display for n in names}
        close = difflib.get_close_matches(wanted.display.lower(), list(displays), n=3, cutoff=0.6)
        hint = (f"; did you mean {', '.join(displays[c] for c in close)}?" if close
                else f"; {len(names)} models in the store (lantern list shows them)")
        return f"model {wanted.display!r} not found in {self.root}{hint}"

    def _read_text_blob(self, layer: mf.Layer, path: Path) -> str:
        blob = require_blob(self.blobs_dir, layer.hex, path)
        return blob.read_bytes().decode("utf-8", errors="replace")

    def _load(self, name: ModelName, path: Path) -> LocalModel:
        data = path.read_bytes()
        stat = path.stat()
        manifest = mf.parse_manifest(data, path)
        config = self._json_of(manifest.config, path, dict, "config")
        blobs = self.blobs_dir
        model_path: Path | None = None
        projector_path: Path | None = None
        adapters: list[Path] = []
        texts: dict[str, str] = {}
        licenses: list[str] = []
        params: dict = {}
        messages: list = []
        for layer in manifest.layers:
            kind = layer.media_type
            if kind == mf.MEDIA_MODEL:
                model_path = require_blob(blobs, layer.hex, path)
            elif kind == mf.MEDIA_PROJECTOR and projector_path is None:
                projector_path = require_blob(blobs, layer.hex, path)
            elif kind == mf.MEDIA_ADAPTER:
                adapters.append(require_blob(blobs, layer.hex, path))
            elif kind in (mf.MEDIA_TEMPLATE, mf.MEDIA_PROMPT, mf.MEDIA_SYSTEM):
                texts[mf.MEDIA_SYSTEM if kind == mf.MEDIA_SYSTEM else mf.MEDIA_TEMPLATE] = \
                    self._read_text_blob(layer, path)
            elif kind == mf.MEDIA_LICENSE:
                licenses.append(self._read_text_blob(layer, path))
            elif kind == mf.MEDIA_PARAMS:
                params = self._json_of(layer, path, dict, "params")
            elif kind == mf.MEDIA_MESSAGES:
                messages = self._json_of(layer, path, list, "messages")
        if model_path is None:
            foreign = foreign_format(manifest, config, self._hf_config(manifest, path))
            if foreign is not None:
                raise UnsupportedModel(f"{name.display}: {foreign}", remedy=Remedy.OLLAMA)
            raise CorruptModel(f"manifest {path} has no model layer ({mf.MEDIA_MODEL})")
        return LocalModel(
            name=name,
            manifest_path=path,
            digest=hashlib.sha256(data).hexdigest(),
            size=manifest.size,
            modified=datetime.fromtimestamp(stat.st_mtime, tz=UTC).astimezone(),
            modified_ns=stat.st_mtime_ns,
            manifest=manifest,
            config=config,
            model_path=model_path,
            projector_path=projector_path,
            adapter_paths=tuple(adapters),
            template=texts.get(mf.MEDIA_TEMPLATE),
            system=texts.get(mf.MEDIA_SYSTEM),
            params=params,
            messages=messages,
            license=licenses,
        )

    def _hf_config(self, manifest: mf.Manifest, path: Path) -> dict | None:
        """An MLX model's config.json, when its layer is there and reads as an object."""
        layer = next((layer for layer in manifest.layers
                      if layer.media_type == mf.MEDIA_JSON and layer.name == HF_CONFIG), None)
        if layer is None:
            return None
        try:
            return self._json_of(layer, path, dict, HF_CONFIG)
        except CorruptModel:      # the family goes unnamed; the model is still what it is
            return None

    def _json_of(self, layer: mf.Layer, path: Path, kind: type, what: str) -> Any:
        """A small JSON layer (config, params, messages) that must hold a ``kind``."""
        blob = require_blob(self.blobs_dir, layer.hex, path)
        try:
            value = json.loads(blob.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CorruptModel(
                f"{what} blob {blob} of manifest {path} is not JSON ({error})"
            ) from None
        if not isinstance(value, kind):
            raise CorruptModel(
                f"{what} blob {blob} of manifest {path} is not a JSON {kind.__name__}"
            )
        return value

    def verify(self, model: LocalModel) -> list[Path]:
        """Hash every blob of ``model`` (streamed); MissingBlob / DigestMismatch on failure."""
        checked = []
        for layer in (model.manifest.config, *model.layers):
            blob = require_blob(self.blobs_dir, layer.hex, model.manifest_path)
            verify_blob(blob, layer.hex)
            checked.append(blob)
        return checked
