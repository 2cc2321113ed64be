"""``lantern pull``: a model from a registry into the store, as ``ollama pull`` leaves it.

Order (ollama server/images.go PullModel): manifest, then every blob not already in the
store, then the manifest file, written last and byte for byte as the registry sent it;
when it replaced an older manifest of the tag, the old blobs no model uses any more go.
Each missing blob downloads into a ResumableBlob (engine/store/writer.py), large ones in
parallel byte ranges; each is hashed before anything gets a final name, and none is
published until all are verified, so a failed pull adds no file under a final name.
Cancelling or losing the connection keeps the downloads for the next pull to continue;
a corrupt blob or a full disk deletes every download of the pull.
"""

from __future__ import annotations

import errno
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from engine.errors import Cancelled, DigestMismatch, DiskFull, InvalidName, RegistryError, Remedy
from engine.store import manifest as mf
from engine.store.blobs import find_blob
from engine.store.copy_remove import mentioned_digests, unused_blobs
from engine.store.humanize import human_bytes, human_eta
from engine.store.names import ModelName
from engine.store.registry import RegistryClient, Unreachable
from engine.store.store import Store
from engine.store.writer import ByteRange, ResumableBlob, remove_stale_partials, write_manifest

PART_SIZE = 64 << 20       # a blob larger than this downloads in parallel ranges of this size
WORKERS = 4                # ranges in flight at once
ATTEMPTS = 3               # per range, when the connection drops
READ_SIZE = 256 << 10      # bytes per read: also how often a download looks at cancel
REPORT_EVERY_S = 0.1


@dataclass(frozen=True)
class PullProgress:
    """Where a pull is: Ollama's status words, and bytes over the whole model."""

    status: str          # "pulling manifest", "pulling <12 hex>", "verifying sha256 digest", ...
    total: int           # bytes of every blob of the model
    completed: int       # bytes in the store or downloaded so far
    downloaded: int      # bytes fetched over the network by this pull
    blob_size: int = 0   # bytes of the blob being pulled (0 between blobs)

    @property
    def fraction(self) -> float:
        return self.completed / self.total if self.total else 0.0

    def speed(self, elapsed_s: float) -> float:
        """Bytes per second fetched by this pull so far."""
        return self.downloaded / elapsed_s if elapsed_s > 0 else 0.0

    def seconds_left(self, elapsed_s: float) -> float | None:
        speed = self.speed(elapsed_s)
        return (self.total - self.completed) / speed if speed > 0 else None

    def describe(self, elapsed_s: float) -> str:
        """"512 MB of 3.2 GB · 12 MB/s · 2m05s left": bytes, speed and ETA in one line."""
        text = f"{human_bytes(self.completed)} of {human_bytes(self.total)}"
        left = self.seconds_left(elapsed_s)
        if self.downloaded:
            text += f" · {human_bytes(int(self.speed(elapsed_s)))}/s"
        if left is not None and self.completed < self.total:
            text += f" · {human_eta(left)} left"
        return text


@dataclass(frozen=True)
class PullResult:
    name: ModelName
    manifest_path: Path
    size: int            # bytes of every blob of the model
    downloaded: int      # bytes fetched over the network by this pull
    resumed: int         # bytes an earlier, interrupted pull had fetched
    skipped: int         # blobs that were already in the store


ProgressCallback = Callable[[PullProgress], None]


def parse_pull_name(text: str, insecure: bool) -> ModelName:
    """The name to pull; ``http://`` is refused unless the user allowed plain http."""
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    if scheme == "http" and not insecure:
        raise InvalidName(f"{text!r} names a plain-http registry; allow plain http to "
                          "pull over http", remedy=Remedy.PLAIN_HTTP)
    if scheme not in ("", "http", "https"):
        raise InvalidName(f"{text!r}: only http:// and https:// registries can be pulled from")
    return ModelName.parse(text)


def pull_model(store: Store, name: str | ModelName, *, insecure: bool = False,
               progress: ProgressCallback | None = None,
               cancel: threading.Event | None = None,
               part_size: int = PART_SIZE, workers: int = WORKERS) -> PullResult:
    """Pull ``name`` into ``store``; RegistryError / ModelNotFound / Unauthorized / DiskFull /
    DigestMismatch / Cancelled say in one line what went wrong."""
    target = name if isinstance(name, ModelName) else parse_pull_name(name, insecure)
    cancel = cancel or threading.Event()
    client = RegistryClient(target, insecure)
    report = _Reporter(progress)
    report.status("pulling manifest")
    data = client.manifest()
    manifest = mf.parse_manifest(data, Path(str(target)))
    layers = list({layer.hex: layer for layer in (manifest.config, *manifest.layers)}.values())
    store.blobs_dir.mkdir(parents=True, exist_ok=True)
    store.manifests_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(store.blobs_dir, store.manifests_dir)
    missing = [layer for layer in layers if find_blob(store.blobs_dir, layer.hex) is None]
    present = sum(layer.size for layer in layers if layer not in missing)
    downloads: list[ResumableBlob] = []
    report.total, report.present = sum(layer.size for layer in layers), present
    try:
        for layer in missing:
            downloads.append(ResumableBlob(store.blobs_dir, layer.hex, layer.size, part_size))
        report.downloads = downloads
        _check_space(store, target, sum(blob.size - blob.done for blob in downloads))
        for layer, blob in zip(missing, downloads, strict=True):
            report.blob_size = layer.size
            report.status(f"pulling {layer.hex[:12]}")
            _download(client, layer, blob, cancel, report, workers)
            report.blob_size = 0
            report.status("verifying sha256 digest")
            blob.verify()
    except BaseException as error:
        _stop(downloads, error, store, target)
        raise
    path = store.find_manifest(target) or store.manifest_path(target)
    replaced = mentioned_digests(path.read_bytes()) if path.is_file() else set()
    try:
        for blob in downloads:
            blob.publish()
        report.status("writing manifest")
        write_manifest(path, data)
    except OSError as error:
        if not _disk_full(error):
            raise
        raise DiskFull(f"disk full: no space left for the manifest of {target.display} "
                       f"at {path}; free some space and pull again") from None
    for blob in unused_blobs(store, replaced):     # an updated tag: drop what it no longer uses
        blob.unlink(missing_ok=True)
    report.status("success")
    resumed = sum(blob.resumed for blob in downloads)
    return PullResult(name=target, manifest_path=path, size=report.total,
                      downloaded=report.downloaded(), resumed=resumed,
                      skipped=len(layers) - len(missing))


def _stop(downloads: list[ResumableBlob], error: BaseException, store: Store,
          target: ModelName) -> None:
    """Leave the store as it was. Only an interruption (cancel, a lost connection) keeps its
    downloads to resume; a registry serving corrupt bytes or a full disk keeps nothing."""
    if _disk_full(error) or isinstance(error, DigestMismatch):
        for blob in downloads:
            blob.discard()
        if not _disk_full(error) or isinstance(error, DiskFull):
            return
        done = human_bytes(sum(blob.size for blob in downloads))
        raise DiskFull(f"disk full: no space left in {store.blobs_dir} while pulling "
                       f"{target.display} ({done} to download); free some space and pull "
                       "again") from None
    for blob in downloads:
        blob.keep()


def _disk_full(error: BaseException) -> bool:
    return isinstance(error, DiskFull) or (
        isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT))


def _check_space(store: Store, target: ModelName, needed: int) -> None:
    free = shutil.disk_usage(store.blobs_dir).free
    if needed > free:
        raise DiskFull(f"not enough space in {store.blobs_dir} to pull {target.display}: "
                       f"{human_bytes(needed)} to download, {human_bytes(free)} free; free "
                       "some space and pull again")


def _download(client: RegistryClient, layer: mf.Layer, blob: ResumableBlob,
              cancel: threading.Event, report: _Reporter, workers: int) -> None:
    """Fill every unfinished range of ``blob``, ``workers`` at a time."""
    pending = [r for r in blob.ranges if r.left]
    if not pending:
        return
    halt = threading.Event()          # cancel, or a sibling range failed
    with ThreadPoolExecutor(max_workers=min(workers, len(pending))) as pool:
        futures = [pool.submit(_fetch_range, client, layer.digest, blob, r, cancel, halt)
                   for r in pending]
        try:
            while True:
                done, running = wait(futures, timeout=REPORT_EVERY_S,
                                     return_when=FIRST_EXCEPTION)
                report.tick()
                for future in done:
                    future.result()          # raises the first failure
                if not running:
                    return
        finally:
            halt.set()


def _fetch_range(client: RegistryClient, digest: str, blob: ResumableBlob, byte_range: ByteRange,
                 cancel: threading.Event, halt: threading.Event) -> None:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _stream_range(client, digest, blob, byte_range, cancel, halt)
            return
        except Unreachable as error:
            if attempt == ATTEMPTS:
                raise RegistryError(
                    f"download of {digest} from {client.name.host} failed {ATTEMPTS} times "
                    f"({error}); {human_bytes(blob.done)} are kept: pull again to resume"
                ) from None
            time.sleep(attempt)


def _stream_range(client: RegistryClient, digest: str, blob: ResumableBlob,
                  byte_range: ByteRange, cancel: threading.Event, halt: threading.Event
                  ) -> None:
    with client.blob(digest, byte_range.offset, byte_range.end) as response:
        skip = byte_range.offset if response.status == 200 else 0   # Range was ignored
        if response.status == 206:
            first = response.getheader("Content-Range", "").removeprefix("bytes ").split("-")[0]
            if first != str(byte_range.offset):
                raise RegistryError(f"registry {client.name.host} answered range "
                                    f"{byte_range.offset}- of {digest} with "
                                    f"{response.getheader('Content-Range')!r}")
        while byte_range.left:
            if cancel.is_set() or halt.is_set():
                raise Cancelled(f"pull of {client.name.display} cancelled; "
                                f"{human_bytes(blob.done)} of {digest[7:19]} are kept: pull "
                                "again to resume")
            try:
                chunk = response.read(min(READ_SIZE, skip + byte_range.left))
            except (OSError, ValueError) as error:
                raise Unreachable(f"connection lost: {error}") from None
            if not chunk:
                raise Unreachable("connection closed before the blob's end")
            if skip:
                chunk, skip = chunk[skip:], max(0, skip - len(chunk))
            blob.write(byte_range, chunk[:byte_range.left])


class _Reporter:
    """Turns the pull's state into PullProgress calls, at most every REPORT_EVERY_S."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self.text = ""
        self.total = self.present = self.blob_size = 0
        self.downloads: list[ResumableBlob] = []
        self._last = 0.0

    def downloaded(self) -> int:
        return sum(blob.done - blob.resumed for blob in self.downloads)

    def status(self, text: str) -> None:
        self.text = text
        self._emit()

    def tick(self) -> None:
        if time.monotonic() - self._last >= REPORT_EVERY_S:
            self._emit()

    def _emit(self) -> None:
        self._last = time.monotonic()
        if self.callback is not None:
            completed = self.present + sum(blob.done for blob in self.downloads)
            self.callback(PullProgress(self.text, self.total, completed, self.downloaded(),
                                       self.blob_size))
