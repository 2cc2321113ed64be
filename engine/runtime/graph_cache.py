"""Built decoder graphs on disk, so a second load skips re-packing the GGUF.

An entry is a directory ``<cache_dir>/decoders/<key>/`` holding ``decoder.onnx`` and the
weights file its external tensors point into (64 KiB-aligned, so ONNX Runtime memory-maps
it: a session made from the entry holds no second, anonymous copy of the weights). With
Lantern's GgufMatMul the matrices are not in it at all: the graph says where their bytes lie
in the GGUF, which the session reads in place; the weights file holds only small vectors.
The key digests everything the graph depends on: the GGUF's identity (its sha256 when it
is an Ollama blob ``sha256-<hex>``, else path, size and mtime), the graph options and the
source of the code that builds the graph, so a changed engine never reads a stale entry.

Entries are written to a temporary directory and renamed into place (readers never see a
half-written one; of two concurrent writers one wins). The total size is kept under
``LANTERN_CACHE_LIMIT`` (bytes, or with a K/M/G suffix; default 8G; 0 turns caching off) by
removing the least recently used entries, never the one being loaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

import engine
from engine.graph import decoder as graph
from engine.graph.builder import save_model
from engine.paths import cache_dir

MODEL_FILE = "decoder.onnx"
DEFAULT_LIMIT = 8 << 30
LIMIT_ENV = "LANTERN_CACHE_LIMIT"
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
BLOB_NAME = re.compile(r"sha256-([0-9a-f]{64})")
GRAPH_SOURCES = (  # the code that shapes an entry, relative to the repository root
    *(f"engine/graph/{m}.py" for m in ("attention", "builder", "decoder", "fuse", "linear",
                                       "norms")),
    *(f"engine/gguf/quants/{m}.py" for m in ("__init__", "base", "dense", "kquants", "legacy")),
    "engine/gguf/repack.py",
    "engine/gguf/requantize.py",
    # which GGUF types GgufMatMul reads (and in fast mode) decides which matrices use it
    "engine/native/__init__.py",
    "engine/native/quants.h",
    "engine/native/quants.c",
)


def cache_limit() -> int:
    """Bytes allowed for all entries, from LANTERN_CACHE_LIMIT."""
    value = os.environ.get(LIMIT_ENV, "").strip().upper().removesuffix("B")
    if not value:
        return DEFAULT_LIMIT
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)I?", value)
    if match is None:
        raise ValueError(f"{LIMIT_ENV}={os.environ[LIMIT_ENV]!r} is not a size; "
                         "write bytes or a number with K, M or G, e.g. 8G (0 turns it off)")
    return int(float(match[1]) * UNITS[match[2]])


def source_identity(path: Path) -> str:
    """An Ollama blob names its own sha256; any other file is its path, size and mtime."""
    path = Path(path).resolve()
    if blob := BLOB_NAME.fullmatch(path.name):
        return blob[0]
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


@cache
def code_digest() -> str:
    """sha256 over the engine version and the graph-building source files (a frozen app
    without sources is keyed by its version alone)."""
    root = Path(engine.__file__).parent.parent
    h = hashlib.sha256(engine.__version__.encode())
    for name in GRAPH_SOURCES:
        source = root / name
        h.update(name.encode() + b"\0" + (source.read_bytes() if source.is_file() else b""))
    return h.hexdigest()


def entry_key(model_path: Path, options: graph.DecoderOptions, deepstack: int = 0) -> str:
    """The entry name for ``model_path`` built with ``options`` (cache length excluded:
    the graph's KV buffers have a symbolic length); ``deepstack``: the graph takes that many
    DeepStack feature maps (the model was opened with its Qwen3-VL tower)."""
    fields = dataclasses.asdict(dataclasses.replace(options, max_cache_len=0))
    text = f"{source_identity(model_path)}|{sorted(fields.items())}|{code_digest()}"
    if deepstack:
        text += f"|deepstack={deepstack}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class GraphCache:
    """The decoder entries under ``root`` (default: engine.paths.cache_dir()/decoders)."""

    def __init__(self, root: Path | None = None, limit: int | None = None):
        self.root = Path(root) if root is not None else cache_dir() / "decoders"
        self.limit = cache_limit() if limit is None else limit

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def lookup(self, key: str) -> Path | None:
        """The entry's model file, marked as just used; None when absent."""
        model_file = self.root / key / MODEL_FILE
        if not model_file.is_file():
            return None
        os.utime(self.root / key)  # LRU order is directory mtime
        return model_file

    def store(self, key: str, built: graph.DecoderGraph) -> Path:
        """Write ``built`` atomically, evict down to the limit; return the model file."""
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=self.root))
        try:
            save_model(built.model, built.external, staging / MODEL_FILE)
            try:
                staging.rename(self.root / key)
            except OSError:  # another process stored the same entry first
                if self.lookup(key) is None:
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        self.evict(keep=key)
        return self.root / key / MODEL_FILE

    def entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, bytes, directory) of every complete entry, oldest first."""
        found = []
        for d in self.root.iterdir() if self.root.is_dir() else ():
            if d.is_dir() and not d.name.startswith(".") and (d / MODEL_FILE).is_file():
                size = sum(f.stat().st_size for f in d.iterdir())
                found.append((d.stat().st_mtime, size, d))
        return sorted(found)

    def evict(self, keep: str) -> None:
        """Remove least recently used entries until the total fits the limit; never ``keep``.

        An entry is renamed aside before it is deleted, so no reader finds half of one (on
        Linux and macOS a session that already mapped it keeps working)."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for _, size, d in entries:
            if total <= self.limit:
                break
            if d.name == keep:
                continue
            doomed = d.with_name(f".evicted-{d.name}-{os.getpid()}")
            try:
                d.rename(doomed)
            except OSError:
                continue  # gone already, or in use where the OS forbids it
            shutil.rmtree(doomed, ignore_errors=True)
            total -= size
