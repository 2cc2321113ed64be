"""Putting bytes into the store, the one way every writer (import, pull, copy) does it:
a temp file beside its final name, a digest check, then ``os.replace``. An interrupted
writer leaves at most a temp file, never a half blob under a final name nor a manifest
pointing at a missing blob; ``remove_stale_partials`` clears temp files of writers that died.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from contextlib import suppress
from pathlib import Path

from engine.store import manifest as mf
from engine.store.blobs import blob_name, copy_hashed, find_blob

PARTIAL_PREFIX = "lantern-partial-"
STALE_AFTER_S = 120        # a live copy rewrites its temp file every few milliseconds


def partial_path(directory: Path, hidden: bool = False) -> Path:
    return directory / f"{'.' if hidden else ''}{PARTIAL_PREFIX}{secrets.token_hex(8)}"


def remove_stale_partials(blobs_dir: Path, manifests_dir: Path, now: float | None = None
                          ) -> list[Path]:
    """Delete temp files of writers that died (untouched for STALE_AFTER_S seconds)."""
    now = time.time() if now is None else now
    removed = []
    candidates = [*blobs_dir.glob(PARTIAL_PREFIX + "*"),
                  *manifests_dir.rglob("." + PARTIAL_PREFIX + "*")]
    for path in candidates:
        with suppress(OSError):
            if path.is_file() and now - path.stat().st_mtime > STALE_AFTER_S:
                path.unlink()
                removed.append(path)
    return removed


def publish(temp: Path, target: Path) -> None:
    """Move a finished temp file to its final name (an existing blob wins: same content)."""
    if target.exists():
        temp.unlink()
    else:
        os.replace(temp, target)


def write_bytes_blob(blobs_dir: Path, data: bytes, media_type: str) -> mf.Layer:
    """A small blob (template, params, config) from bytes in memory."""
    digest = hashlib.sha256(data).hexdigest()
    if find_blob(blobs_dir, digest) is None:
        temp = partial_path(blobs_dir)
        try:
            temp.write_bytes(data)
            publish(temp, blobs_dir / blob_name(digest))
        finally:
            temp.unlink(missing_ok=True)
    return mf.Layer(media_type=media_type, digest=f"sha256:{digest}", size=len(data))


def copy_blob(blobs_dir: Path, source: Path) -> tuple[str, int]:
    """Stream ``source`` into the store under the digest of what was read."""
    temp = partial_path(blobs_dir)
    try:
        with source.open("rb") as src, temp.open("wb") as dst:
            digest, size = copy_hashed(src, dst)
            dst.flush()
            os.fsync(dst.fileno())
        os.chmod(temp, 0o644)
        publish(temp, blobs_dir / blob_name(digest))
    finally:
        temp.unlink(missing_ok=True)
    return digest, size


def write_manifest(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``; identical content is left untouched."""
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = partial_path(path.parent, hidden=True)
    try:
        with temp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
