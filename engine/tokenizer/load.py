"""``load_tokenizer(path)``: build from the GGUF once, then reuse the serialized pipeline.

Cache entries live in ``cache_dir()/tokenizers/<key>.json``. The key names the file's
content without reading it: an Ollama blob is named by the sha256 of its content
(``sha256-<hex>``), so that digest is the key; any other file is keyed by its resolved
path, size and modification time (a file rewritten in place gets a new mtime). The
entry format version and the ``tokenizers`` version are part of the key, so an upgrade
rebuilds instead of misreading. Writes are atomic (temp file + rename); an entry that
cannot be read is rebuilt and overwritten.

A tokenizer is opened from its entry's lines, whether just built or read back: this
process keeps only the info and lookup tables (entry.py, read in short steps), while a
child process of its own rebuilds the ``tokenizers`` pipeline from the same entry, which it
reads itself meanwhile, and does the encoding (encoder_process.py). Building the BPE model
of a large vocabulary is one Rust call that holds the GIL, and in this process every other
thread, the window's included, would wait for all of it. A child that cannot rebuild the
pipeline from an entry makes it a damaged one (rebuilt); a child that ended is no fault of
the entry's. The first time, the child reads the file's vocabulary and builds the pipeline
itself, and sends back the entry's lines for this process to read and cache.
"""

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import tokenizers

from engine.paths import cache_dir
from engine.tokenizer.encoder_process import EncoderFailed, EncoderGone, EncoderProcess
from engine.tokenizer.entry import tables
from engine.tokenizer.tokenizer import Tokenizer
from engine.tokenizer.vocab import read_vocabulary

# 2: TokenizerInfo says the model kind; 3: JSON Lines, vocabulary in chunks; 4: a chunk is
# two lists (pieces, ids or scores); 5: TokenizerInfo says add_eos
FORMAT_VERSION = 5
_BLOB_NAME = re.compile(r"sha256[-:]([0-9a-f]{64})")
log = logging.getLogger(__name__)


def load_tokenizer(gguf_path: str | Path) -> Tokenizer:
    """The tokenizer of a GGUF model file (UnsupportedModel for kinds Lantern does not build)."""
    path = Path(gguf_path)
    entry = cache_entry(path)
    if entry is not None and entry.exists():
        cached = _read_entry(entry)
        if cached is not None:
            return cached
    with _encoder() as encoder:
        lines = encoder.build(str(path))
        found = tables(lines)
    if entry is not None:
        _write_entry(entry, lines)
    return Tokenizer(found.info, found.pieces, found.ids, encoder)


def check_tokenizer(metadata: Mapping[str, object], gguf_path: str | Path) -> None:
    """Raise what building this file's tokenizer would (UnsupportedModel, CorruptModel).

    Nothing is read when the tokenizer is cached: an entry is only written for a vocabulary
    that was read and checked, and its key names the file's content. Reading a large
    vocabulary again is a long run of Python on a worker, each step waiting on the window's
    thread for the GIL (the model list checks every model of the store at start).
    """
    path = Path(gguf_path)
    entry = cache_entry(path)
    if entry is None or not entry.exists():
        read_vocabulary(metadata, path)


def cache_entry(path: Path) -> Path | None:
    """Where this file's tokenizer is cached (None when the file cannot be stat'ed; reading
    it will then raise the real error)."""
    blob = _BLOB_NAME.fullmatch(path.name)
    if blob:
        identity = f"blob:{blob.group(1)}"
    else:
        try:
            stat = path.stat()
        except OSError:
            return None
        identity = f"file:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    key = f"lantern-tokenizer/{FORMAT_VERSION}/tokenizers-{tokenizers.__version__}/{identity}"
    return cache_dir() / "tokenizers" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def _read_entry(entry: Path) -> Tokenizer | None:
    try:
        return _open(entry)
    except Exception as error:  # any damage (truncation, bad JSON, old layout) means: rebuild
        if isinstance(error, EncoderGone) and not isinstance(error, EncoderFailed):
            raise  # the child process ended: no fault of the entry's, nor cured by a rebuild
        log.warning("tokenizer cache entry %s is unreadable (%s); rebuilding it", entry, error)
        return None


def _open(entry: Path) -> Tokenizer:
    """The tokenizer of an entry: its child process reads the entry too and builds the
    pipeline while this one reads the tables (nothing large crosses the pipe)."""
    with _encoder() as encoder:
        encoder.load(entry)
        found = tables(entry.read_bytes().split(b"\n"))
        encoder.loaded()
    return Tokenizer(found.info, found.pieces, found.ids, encoder)


@contextmanager
def _encoder() -> Iterator[EncoderProcess]:
    """A new tokenizer's child process, ended again if opening the tokenizer fails."""
    encoder = EncoderProcess()
    try:
        yield encoder
    except BaseException:
        encoder.close()
        raise


def _write_entry(entry: Path, lines: list[bytes]) -> None:
    tmp_name = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "wb", dir=entry.parent, suffix=".tmp", delete=False
        ) as tmp:
            tmp_name = tmp.name
            tmp.write(b"\n".join(lines) + b"\n")
        os.replace(tmp_name, entry)
    except OSError as error:  # a read-only or full cache only costs the next load some time
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
        log.warning("could not cache the tokenizer at %s: %s", entry, error)
