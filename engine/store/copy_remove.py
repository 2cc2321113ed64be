"""``lantern rm`` and ``lantern cp``, as ``ollama rm`` / ``ollama cp`` do them
(ollama server/images.go CopyModel, manifest/manifest.go Remove/RemoveLayers):

- rm deletes the manifest first, then every blob it lists that no other manifest
  mentions, then the directories left empty. Which blobs are in use is read from the
  raw bytes of every other manifest, so even one that no longer parses keeps its blobs.
- cp writes a second manifest, byte for byte the first, through the atomic writer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.errors import LanternError
from engine.store import manifest as mf
from engine.store.blobs import find_blob, require_blob
from engine.store.names import ModelName
from engine.store.store import Store
from engine.store.writer import write_manifest

_HEX = re.compile(rb"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class Removal:
    """What removing a model frees: its blobs that no other model uses."""

    name: ModelName
    manifest_path: Path
    blobs: tuple[Path, ...]        # files that go with it
    freed: int                     # their bytes on disk
    shared: int                    # blobs kept because another model uses them


def mentioned_digests(data: bytes) -> set[str]:
    """Every sha256 hex digest written in a manifest's bytes (parsed or not)."""
    return {match.decode().lower() for match in _HEX.findall(data)}


def _in_use(store: Store, ignore: Path | None) -> set[str]:
    used: set[str] = set()
    for path in store.manifests_dir.glob("*/*/*/*"):
        if path.is_file() and path != ignore:
            used |= mentioned_digests(path.read_bytes())
    return used


def unused_blobs(store: Store, digests: set[str], ignore: Path | None = None) -> list[Path]:
    """The blob files of ``digests`` that no manifest (but ``ignore``) mentions."""
    unused = digests - _in_use(store, ignore)
    return [blob for hex_digest in sorted(unused)
            if (blob := find_blob(store.blobs_dir, hex_digest)) is not None]


def plan_removal(store: Store, name: str | ModelName) -> Removal:
    """What ``remove_model`` would delete, without deleting anything (for a confirmation)."""
    path = store.require_manifest(name)
    found = ModelName.from_parts(*path.relative_to(store.manifests_dir).parts)
    own = mentioned_digests(path.read_bytes())
    blobs = unused_blobs(store, own, ignore=path)
    present = sum(find_blob(store.blobs_dir, hex_digest) is not None for hex_digest in own)
    return Removal(name=found, manifest_path=path, blobs=tuple(blobs),
                   freed=sum(blob.stat().st_size for blob in blobs),
                   shared=present - len(blobs))


def remove_model(store: Store, name: str | ModelName) -> Removal:
    """Delete the manifest, then its blobs no other manifest uses, then empty directories."""
    removal = plan_removal(store, name)
    removal.manifest_path.unlink()
    directory = removal.manifest_path.parent
    while directory != store.manifests_dir and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent
    stuck = []
    for blob in removal.blobs:
        try:
            blob.unlink(missing_ok=True)
        except OSError as error:          # e.g. Windows: the file is mapped by a running model
            stuck.append(f"{blob.name} ({error.strerror})")
    if stuck:
        raise LanternError(f"deleted '{removal.name.display}', but {len(stuck)} of its files "
                           f"could not be removed: {', '.join(stuck)}; delete them by hand "
                           f"from {store.blobs_dir} once nothing uses them")
    return removal


def copy_model(store: Store, source: str | ModelName, destination: str | ModelName
               ) -> ModelName:
    """A second manifest, byte for byte ``source``'s, named ``destination``."""
    path = store.require_manifest(source)
    target = destination if isinstance(destination, ModelName) else ModelName.parse(destination)
    data = path.read_bytes()
    manifest = mf.parse_manifest(data, path)
    for layer in (manifest.config, *manifest.layers):
        require_blob(store.blobs_dir, layer.hex, path)       # never copy a broken model
    existing = store.find_manifest(target)
    if existing is not None and existing.samefile(path):
        raise LanternError(f"cannot copy {source!s} onto itself; give the copy another name")
    write_manifest(existing or store.manifest_path(target), data)
    return target
