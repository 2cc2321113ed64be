"""Blob files: ``<root>/blobs/sha256-<hex>`` (very old stores: ``sha256:<hex>``), the name
being the sha256 of the content. Hashing is streamed: blobs are often several GB.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

from engine.errors import DigestMismatch, MissingBlob

CHUNK = 1 << 20


def blob_name(hex_digest: str) -> str:
    return f"sha256-{hex_digest}"


def find_blob(blobs_dir: Path, hex_digest: str) -> Path | None:
    """The blob file for a digest, under the current name or the legacy ``sha256:`` one."""
    for name in (blob_name(hex_digest), f"sha256:{hex_digest}"):
        path = blobs_dir / name
        if path.is_file():
            return path
    return None


def require_blob(blobs_dir: Path, hex_digest: str, manifest_path: Path) -> Path:
    path = find_blob(blobs_dir, hex_digest)
    if path is None:
        raise MissingBlob(
            f"blob sha256:{hex_digest} listed in manifest {manifest_path} is not in "
            f"{blobs_dir}; re-pull or re-import the model"
        )
    return path


def copy_hashed(source: BinaryIO, target: BinaryIO | None = None) -> tuple[str, int]:
    """Stream ``source`` (into ``target`` when given); return (sha256 hex, byte count)."""
    digest = hashlib.sha256()
    size = 0
    while chunk := source.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
        if target is not None:
            target.write(chunk)
    return digest.hexdigest(), size


def hash_file(path: Path) -> tuple[str, int]:
    with path.open("rb") as f:
        return copy_hashed(f)


def verify_blob(path: Path, hex_digest: str) -> None:
    """DigestMismatch when the file's content does not hash to its name."""
    actual, _ = hash_file(path)
    if actual != hex_digest:
        raise DigestMismatch(
            f"blob {path} is corrupt: expected sha256:{hex_digest}, content hashes to "
            f"sha256:{actual}; re-pull or re-import the model"
        )
