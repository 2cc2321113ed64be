"""``load_tokenizer(path)``: build from the GGUF once, then reuse the serialized pipeline.

Cache entries live in ``cache_dir()/tokenizers/<key>.json``. The key names the file's
content without reading it: an Ollama blob is named by the sha256 of its content
(``sha256-<hex>``), so that digest is the key; any other file is keyed by its resolved
path, size and modification time (a file rewritten in place gets a new mtime). The
entry format version and the ``tokenizers`` version are part of the key, so an upgrade
rebuilds instead of misreading. Writes are atomic (temp file + rename); an entry that
cannot be read is rebuilt and overwritten.

An entry is JSON Lines, written for a short hold of the GIL when read back (every other
Python thread, the window's included, waits while one holds it): ``tokenizers`` parses a
whole serialized pipeline in one call, about twice as long as its BPE/Unigram constructors
take for the same vocabulary. So the first line holds the info and the pipeline with an
empty model, and the vocabulary and merges follow in lines of CHUNK entries, each parsed by
its own short ``json.loads``; the model is then built by its own constructor, and the added
tokens are added again in id order (they keep their ids: the test suite compares the
pipeline with the one that was written).
"""

import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, models
from tokenizers import Tokenizer as Backend

from engine.gguf.reader import read_gguf
from engine.paths import cache_dir
from engine.tokenizer.build import build_tokenizer
from engine.tokenizer.tokenizer import Tokenizer, TokenizerInfo
from engine.tokenizer.vocab import read_vocabulary

FORMAT_VERSION = 3  # 2: TokenizerInfo says the model kind; 3: JSON Lines, vocabulary in chunks
CHUNK = 4096
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
    tokenizer = build_tokenizer(read_vocabulary(read_gguf(path).metadata, path))
    if entry is not None:
        _write_entry(entry, tokenizer)
    return tokenizer


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
        with entry.open(encoding="utf-8") as lines:
            head = json.loads(next(lines))
            vocab = [item for _ in range(head["vocab_lines"]) for item in json.loads(next(lines))]
            merges = [tuple(pair) for _ in range(head["merges_lines"])
                      for pair in json.loads(next(lines))]
        backend = _backend(head["pipeline"], _model(head["pipeline"]["model"], vocab, merges))
        return Tokenizer(backend, TokenizerInfo.from_dict(head["info"]))
    except Exception as error:  # any damage (truncation, bad JSON, old layout) means: rebuild
        log.warning("tokenizer cache entry %s is unreadable (%s); rebuilding it", entry, error)
        return None


def _backend(pipeline: dict, model: models.Model) -> Backend:
    """The pipeline's small parts parsed around an empty model, then ``model`` put in and
    the added tokens added again (see the module's docstring)."""
    empty = {"type": "BPE", "vocab": {}, "merges": []}
    backend = Backend.from_str(json.dumps({**pipeline, "model": empty, "added_tokens": []}))
    backend.model = model
    for token in sorted(pipeline["added_tokens"], key=lambda token: token["id"]):
        added = AddedToken(token["content"], single_word=token["single_word"],
                           lstrip=token["lstrip"], rstrip=token["rstrip"],
                           normalized=token["normalized"], special=token["special"])
        if token["special"]:
            backend.add_special_tokens([added])
        else:
            backend.add_tokens([added])
        if backend.token_to_id(token["content"]) != token["id"]:
            raise ValueError(f"added token {token['content']!r} did not keep id {token['id']}")
    return backend


def _model(spec: dict, vocab: list, merges: list[tuple[str, str]]) -> models.Model:
    if spec["type"] == "Unigram":
        return models.Unigram([tuple(piece) for piece in vocab], spec["unk_id"],
                              spec["byte_fallback"])
    if spec["type"] != "BPE":
        raise ValueError(f"model type {spec['type']!r} is not one Lantern writes")
    options = ("dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
               "fuse_unk", "byte_fallback", "ignore_merges")
    return models.BPE(dict(vocab), merges,
                      **{name: spec[name] for name in options if spec.get(name) is not None})


def _entry_lines(tokenizer: Tokenizer) -> list[str]:
    pipeline = json.loads(tokenizer.backend.to_str())
    model = pipeline["model"]
    vocab = model["vocab"]
    vocab = list(vocab.items()) if isinstance(vocab, dict) else vocab
    merges = model.get("merges", [])
    chunks = [vocab[i:i + CHUNK] for i in range(0, len(vocab), CHUNK)]
    merge_chunks = [merges[i:i + CHUNK] for i in range(0, len(merges), CHUNK)]
    head = {"info": tokenizer.info.to_dict(), "vocab_lines": len(chunks),
            "merges_lines": len(merge_chunks),
            "pipeline": {**pipeline, "model": {**model, "vocab": [], "merges": []}}}
    # json.dumps escapes newlines inside strings, so each value stays on its own line
    return [json.dumps(part, ensure_ascii=False) for part in (head, *chunks, *merge_chunks)]


def _write_entry(entry: Path, tokenizer: Tokenizer) -> None:
    tmp_name = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=entry.parent, suffix=".tmp", delete=False
        ) as tmp:
            tmp_name = tmp.name
            tmp.write("\n".join(_entry_lines(tokenizer)) + "\n")
        os.replace(tmp_name, entry)
    except OSError as error:  # a read-only or full cache only costs the next load some time
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
        log.warning("could not cache the tokenizer at %s: %s", entry, error)
