"""Putting bytes into the store, the one way every writer (import, pull, copy) does it:
a temp file beside its final name, a digest check, then ``os.replace``. An interrupted
writer leaves at most a temp file, never a half blob under a final name nor a manifest
pointing at a missing blob; ``remove_stale_partials`` clears temp files of writers that died.

Downloads are the one kind of temp file worth keeping: ``ResumableBlob`` writes
``lantern-partial-sha256-<hex>`` (named by the digest it must hash to) plus a small
``.ranges`` record of how far each byte range got, so a later pull continues it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from engine.errors import DigestMismatch, LanternError
from engine.store import manifest as mf
from engine.store.blobs import blob_name, copy_hashed, find_blob, hash_file

try:
    import fcntl
except ImportError:        # Windows: no advisory locks; concurrent pulls are not guarded
    fcntl = None

PARTIAL_PREFIX = "lantern-partial-"
STALE_AFTER_S = 120        # a live copy rewrites its temp file every few milliseconds
RESUMABLE_FOR_S = 14 * 24 * 3600   # an interrupted download is kept this long for a re-pull
SAVE_EVERY_S = 0.5         # how often a download records its progress
_RESUMABLE = re.compile(re.escape(PARTIAL_PREFIX) + r"sha256-([0-9a-f]{64})(\.ranges)?$")


def partial_path(directory: Path, hidden: bool = False) -> Path:
    return directory / f"{'.' if hidden else ''}{PARTIAL_PREFIX}{secrets.token_hex(8)}"


def remove_stale_partials(blobs_dir: Path, manifests_dir: Path, now: float | None = None
                          ) -> list[Path]:
    """Delete temp files of writers that died (untouched for STALE_AFTER_S seconds).

    A resumable download is kept for RESUMABLE_FOR_S, or until its blob is in the store.
    """
    now = time.time() if now is None else now
    removed = []
    candidates = [*blobs_dir.glob(PARTIAL_PREFIX + "*"),
                  *manifests_dir.rglob("." + PARTIAL_PREFIX + "*")]
    for path in candidates:
        with suppress(OSError):
            resumable = _RESUMABLE.match(path.name) if path.parent == blobs_dir else None
            age = now - path.stat().st_mtime
            if resumable:
                stale = age > RESUMABLE_FOR_S or find_blob(blobs_dir, resumable[1]) is not None
            else:
                stale = age > STALE_AFTER_S
            if path.is_file() and stale:
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


def resumable_path(blobs_dir: Path, hex_digest: str) -> Path:
    return blobs_dir / f"{PARTIAL_PREFIX}{blob_name(hex_digest)}"


@dataclass
class ByteRange:
    """Bytes [start, end) of a blob, of which the first ``done`` are written."""

    start: int
    end: int
    done: int = 0

    @property
    def offset(self) -> int:
        return self.start + self.done

    @property
    def left(self) -> int:
        return self.end - self.offset


def split_ranges(size: int, part_size: int) -> list[ByteRange]:
    starts = range(0, size, max(1, part_size)) if size else [0]
    return [ByteRange(start, min(size, start + part_size)) for start in starts]


class ResumableBlob:
    """A blob being downloaded, written at offsets by one thread per byte range.

    The temp file has the blob's final size from the start (sparse); the ``.ranges``
    record only ever lags behind what was written, so resuming from it is always safe.
    An advisory lock keeps two pulls from writing the same download at once.
    """

    def __init__(self, blobs_dir: Path, hex_digest: str, size: int, part_size: int) -> None:
        self.hex, self.size = hex_digest, size
        self.path = resumable_path(blobs_dir, hex_digest)
        self.ranges_path = self.path.with_name(self.path.name + ".ranges")
        self._lock = threading.Lock()
        self._saved_at = 0.0
        previous = self._load_ranges() if self.path.is_file() else None
        self.ranges = previous or split_ranges(size, part_size)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0),
                           0o644)
        try:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if previous is None:
                os.ftruncate(self._fd, 0)
                os.ftruncate(self._fd, size)
                self.save()
        except BlockingIOError:
            os.close(self._fd)
            raise LanternError(
                f"another pull is downloading blob sha256:{hex_digest} into {blobs_dir} "
                "right now; wait for it to finish") from None
        except BaseException:
            self._close()
            if previous is None:              # nothing of an earlier pull to keep
                self.path.unlink(missing_ok=True)
                self.ranges_path.unlink(missing_ok=True)
            raise
        self.resumed = self.done

    @property
    def done(self) -> int:
        return sum(r.done for r in self.ranges)

    @property
    def complete(self) -> bool:
        return all(r.left == 0 for r in self.ranges)

    def _load_ranges(self) -> list[ByteRange] | None:
        """The recorded progress, when it belongs to a partial file of this blob's size."""
        try:
            record = json.loads(self.ranges_path.read_bytes())
            ranges = [ByteRange(int(a), int(b), int(c)) for a, b, c in record["ranges"]]
            valid = (record["size"] == self.size == self.path.stat().st_size
                     and all(0 <= r.done <= r.end - r.start for r in ranges)
                     and sum(r.end - r.start for r in ranges) == self.size)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return ranges if valid else None

    def write(self, byte_range: ByteRange, data: bytes) -> None:
        """Write the next bytes of ``byte_range`` (called by that range's thread only)."""
        written = self._write_at(data, byte_range.offset)
        with self._lock:
            byte_range.done += written
        if written < len(data):
            self.write(byte_range, data[written:])
        elif time.monotonic() - self._saved_at > SAVE_EVERY_S:
            self.save()

    def _write_at(self, data: bytes, offset: int) -> int:
        if hasattr(os, "pwrite"):
            return os.pwrite(self._fd, data, offset)
        with self._lock:                    # Windows: no pwrite, so seek and write as one
            os.lseek(self._fd, offset, os.SEEK_SET)
            return os.write(self._fd, data)

    def save(self) -> None:
        """Record how far each range got (atomically: the record is never half written)."""
        with self._lock:
            record = {"size": self.size, "ranges": [[r.start, r.end, r.done] for r in self.ranges]}
            self._saved_at = time.monotonic()
        temp = partial_path(self.path.parent)
        try:
            temp.write_text(json.dumps(record))
            os.replace(temp, self.ranges_path)
        finally:
            temp.unlink(missing_ok=True)

    def verify(self) -> None:
        """Hash the finished file; a mismatch deletes the download and raises DigestMismatch."""
        os.fsync(self._fd)
        actual, _ = hash_file(self.path)
        if actual != self.hex:
            self.discard()
            raise DigestMismatch(
                f"blob sha256:{self.hex} downloaded from the registry hashes to "
                f"sha256:{actual}; the registry's copy is corrupt, nothing was stored")

    def publish(self) -> None:
        """Give the verified file its final name (call verify first)."""
        self._close()
        publish(self.path, self.path.parent / blob_name(self.hex))
        self.ranges_path.unlink(missing_ok=True)

    def keep(self) -> None:
        """Stop here, leaving a download the next pull continues."""
        with contextlib.suppress(OSError):
            self.save()
        self._close()

    def discard(self) -> None:
        self._close()
        self.path.unlink(missing_ok=True)
        self.ranges_path.unlink(missing_ok=True)

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)       # closing releases the lock
            self._fd = -1
