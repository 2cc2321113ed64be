"""Ollama manifests: ``{"schemaVersion": 2, "mediaType", "config", "layers"}`` records.

Facts from ollama manifest/{manifest,layer,paths}.go and server/images.go. A layer is
``{mediaType, digest, size, from?, name?}``; a digest is ``sha256:<64 hex>`` (Ollama
also accepts ``sha256-<hex>``); the manifest's own id is the sha256 of its bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from engine import gojson
from engine.errors import CorruptModel

SCHEMA_VERSION = 2
MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA_TYPE = "application/vnd.docker.container.image.v1+json"

_PREFIX = "application/vnd.ollama.image."
MEDIA_MODEL = _PREFIX + "model"            # the GGUF
MEDIA_PROJECTOR = _PREFIX + "projector"    # separate vision GGUF (llama.cpp mmproj)
MEDIA_ADAPTER = _PREFIX + "adapter"        # LoRA GGUF
MEDIA_TEMPLATE = _PREFIX + "template"      # Go text/template source
MEDIA_PROMPT = _PREFIX + "prompt"          # old name of the template layer
MEDIA_SYSTEM = _PREFIX + "system"          # plain text
MEDIA_PARAMS = _PREFIX + "params"          # JSON object: option -> value
MEDIA_MESSAGES = _PREFIX + "messages"      # JSON list of {role, content}
MEDIA_LICENSE = _PREFIX + "license"        # plain text; may repeat
# Ollama's MLX engine keeps a model as safetensors blobs (one per tensor group, each layer
# named) and the model's JSON files (config.json, tokenizer.json...) as named layers
MEDIA_TENSOR = _PREFIX + "tensor"
MEDIA_JSON = _PREFIX + "json"

_DIGEST = re.compile(r"^sha256[:-]([0-9a-fA-F]{64})$")


def digest_hex(digest: str) -> str | None:
    """The 64 hex digits of a ``sha256:``/``sha256-`` digest, or None when malformed."""
    match = _DIGEST.match(digest)
    return match.group(1).lower() if match else None


@dataclass(frozen=True)
class Layer:
    media_type: str
    digest: str          # "sha256:<hex>"
    size: int
    source: str = ""     # JSON "from": the file or model it was created from
    name: str = ""       # JSON "name": a tensor group or file of an MLX model

    @property
    def hex(self) -> str:
        return digest_hex(self.digest) or ""

    def to_json(self) -> dict[str, object]:
        """Ollama's Layer struct in field order (``from`` omitted when empty)."""
        record: dict[str, object] = {
            "mediaType": self.media_type, "digest": self.digest, "size": self.size,
        }
        if self.source:
            record["from"] = self.source
        if self.name:
            record["name"] = self.name
        return record


@dataclass(frozen=True)
class Manifest:
    config: Layer
    layers: tuple[Layer, ...]
    media_type: str = MANIFEST_MEDIA_TYPE

    @property
    def size(self) -> int:
        """What Ollama reports as the model's size: every layer plus the config blob."""
        return self.config.size + sum(layer.size for layer in self.layers)

    def to_bytes(self) -> bytes:
        """The manifest file as ``ollama create`` writes it."""
        return gojson.dumps({
            "schemaVersion": SCHEMA_VERSION,
            "mediaType": self.media_type,
            "config": self.config.to_json(),
            "layers": [layer.to_json() for layer in self.layers],
        })


def _layer(record: object, where: str, path: Path) -> Layer:
    if not isinstance(record, dict):
        raise CorruptModel(f"manifest {path}: {where} is not a JSON object")
    digest, size = record.get("digest"), record.get("size")
    if not isinstance(digest, str) or digest_hex(digest) is None:
        raise CorruptModel(
            f"manifest {path}: {where} has digest {digest!r}, expected 'sha256:' + 64 hex digits"
        )
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise CorruptModel(f"manifest {path}: {where} has size {size!r}, expected a byte count")
    media_type = record.get("mediaType", "")
    source = record.get("from", "")
    name = record.get("name", "")
    return Layer(
        media_type=media_type if isinstance(media_type, str) else "",
        digest=digest,
        size=size,
        source=source if isinstance(source, str) else "",
        name=name if isinstance(name, str) else "",
    )


def parse_manifest(data: bytes, path: Path) -> Manifest:
    """Parse manifest bytes; CorruptModel names the file and what is wrong with it."""
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptModel(
            f"manifest {path} is not valid JSON ({error}); re-pull or re-import the model"
        ) from None
    if not isinstance(record, dict):
        raise CorruptModel(f"manifest {path} is not a JSON object")
    version = record.get("schemaVersion")
    if version != SCHEMA_VERSION:
        raise CorruptModel(
            f"manifest {path} has schemaVersion {version!r}; only {SCHEMA_VERSION} is supported"
        )
    layers = record.get("layers")
    if not isinstance(layers, list):
        raise CorruptModel(f"manifest {path} has no 'layers' list")
    media_type = record.get("mediaType", MANIFEST_MEDIA_TYPE)
    return Manifest(
        config=_layer(record.get("config"), "config", path),
        layers=tuple(_layer(item, f"layer {i}", path) for i, item in enumerate(layers)),
        media_type=media_type if isinstance(media_type, str) else MANIFEST_MEDIA_TYPE,
    )
