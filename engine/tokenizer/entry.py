"""A tokenizer's cache entry: its ``tokenizers`` pipeline and info as JSON Lines.

The first line holds the info and the pipeline with an empty model; the vocabulary and
merges follow in lines of CHUNK entries, each parsed by its own short ``json.loads``
(every other Python thread, the window's included, waits while one C call holds the GIL).
A vocabulary line is two lists, the pieces and their ids (BPE) or scores (Unigram): two
objects for the garbage collector to track instead of one pair a piece, whose sheer number
made it run full passes of the whole process meanwhile. The window's process reads only
the info and the vocabulary (``tables``); the encoder's process rebuilds the pipeline
(``pipeline``): the model by its own constructor, then the added tokens again in id order,
so they keep their ids: one call per run of special or plain ones, since each call
rebuilds the matcher of all added tokens (Gemma 3's 6,000 one at a time took longer than
building the tokenizer from the GGUF).
"""

import json
from dataclasses import dataclass
from itertools import groupby

from tokenizers import AddedToken, models
from tokenizers import Tokenizer as Backend

from engine.tokenizer.info import TokenizerInfo

CHUNK = 4096


@dataclass(frozen=True)
class Tables:
    """What the tokenizer looks up without its pipeline: the stored spelling of every id
    (None where no entry has it) and the id of every stored spelling; added tokens win
    over the model's entries, as in ``tokenizers``."""

    info: TokenizerInfo
    pieces: list[str | None]
    ids: dict[str, int]


def entry_lines(backend: Backend, info: TokenizerInfo) -> list[bytes]:
    """The entry of a freshly built pipeline, one JSON document a line."""
    pipeline = json.loads(backend.to_str())
    model = pipeline["model"]
    vocab = model["vocab"]
    vocab = list(vocab.items()) if isinstance(vocab, dict) else vocab
    merges = model.get("merges", [])
    chunks = [[list(column) for column in zip(*vocab[i:i + CHUNK], strict=True)]
              for i in range(0, len(vocab), CHUNK)]
    merge_chunks = [merges[i:i + CHUNK] for i in range(0, len(merges), CHUNK)]
    head = {"info": info.to_dict(), "vocab_lines": len(chunks),
            "merges_lines": len(merge_chunks),
            "pipeline": {**pipeline, "model": {**model, "vocab": [], "merges": []}}}
    # json.dumps escapes newlines inside strings, so each value stays on its own line
    return [json.dumps(part, ensure_ascii=False).encode()
            for part in (head, *chunks, *merge_chunks)]


def tables(lines: list[bytes]) -> Tables:
    """The info and lookup tables of an entry (ValueError, KeyError... when it is damaged)."""
    head = json.loads(lines[0])
    info = TokenizerInfo.from_dict(head["info"])
    unigram = head["pipeline"]["model"]["type"] == "Unigram"
    pieces: list[str | None] = [None] * info.vocab_size
    ids: dict[str, int] = {}
    start = 0
    for line in lines[1 : 1 + head["vocab_lines"]]:
        chunk, values = json.loads(line)
        numbers = range(start, start + len(chunk)) if unigram else values
        start += len(chunk)
        ids.update(zip(chunk, numbers, strict=True))
        for piece, index in zip(chunk, numbers, strict=True):
            pieces[index] = piece
    for token in head["pipeline"]["added_tokens"]:
        pieces[token["id"]] = token["content"]
        ids[token["content"]] = token["id"]
    return Tables(info, pieces, ids)


def pipeline(lines: list[bytes]) -> Backend:
    """The ``tokenizers`` pipeline an entry was written from."""
    head = json.loads(lines[0])
    vocab_end = 1 + head["vocab_lines"]
    vocab = [item for line in lines[1:vocab_end] for item in zip(*json.loads(line), strict=True)]
    merges = [tuple(pair) for line in lines[vocab_end : vocab_end + head["merges_lines"]]
              for pair in json.loads(line)]
    spec = head["pipeline"]
    empty = {"type": "BPE", "vocab": {}, "merges": []}
    backend = Backend.from_str(json.dumps({**spec, "model": empty, "added_tokens": []}))
    backend.model = _model(spec["model"], vocab, merges)
    in_order = sorted(spec["added_tokens"], key=lambda token: token["id"])
    for special, run in groupby(in_order, key=lambda token: token["special"]):
        added = [AddedToken(token["content"], single_word=token["single_word"],
                            lstrip=token["lstrip"], rstrip=token["rstrip"],
                            normalized=token["normalized"], special=special) for token in run]
        # one call a run: each call rebuilds the matcher of every added token so far
        (backend.add_special_tokens if special else backend.add_tokens)(added)
    for token in in_order:
        if backend.token_to_id(token["content"]) != token["id"]:
            raise ValueError(f"added token {token['content']!r} did not keep id {token['id']}")
    return backend


def _model(spec: dict, vocab: list, merges: list[tuple[str, str]]) -> models.Model:
    if spec["type"] == "Unigram":
        return models.Unigram(vocab, spec["unk_id"], spec["byte_fallback"])
    if spec["type"] != "BPE":
        raise ValueError(f"model type {spec['type']!r} is not one Lantern writes")
    options = ("dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
               "fuse_unk", "byte_fallback", "ignore_merges")
    return models.BPE(dict(vocab), merges,
                      **{name: spec[name] for name in options if spec.get(name) is not None})
