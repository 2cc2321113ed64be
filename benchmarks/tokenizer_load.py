"""How long ``load_tokenizer`` takes per tokenizer family, cold (empty cache: the child
builds from the GGUF) and warm (from the cache entry): a cache must never be slower than
what it caches.

The vocabularies are synthetic, of the released models' sizes: byte-level BPE of 151,665
entries with 151,387 merges and 22 control tokens (Qwen 2.5), SentencePiece BPE of 32,000
(Llama 2 / Mistral: 3 control, 256 byte pieces) and of 262,144 (Gemma 3: a few control
tokens and 6,242 ``<unusedN>`` user-defined ones, as its file lists them). Pieces are
random joins of shorter ones, so each SentencePiece vocabulary implies merges as a real
one does; the files hold only tokenizer metadata. Each round loads every family cold,
then warm, in this process (the child's start included), alternating.

    .venv/bin/python -m benchmarks.tokenizer_load [--rounds 3] [--family bpe spm gemma]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import gguf

from engine.tokenizer import load_tokenizer
from tests.fixtures.synthetic_gguf import bytes_to_unicode

NORMAL, CONTROL, USER_DEFINED, BYTE = 1, 3, 4, 6
SPACE = "▁"
TEXT = "The quick brown fox jumps over the lazy dog. " * 20


@dataclass(frozen=True)
class Family:
    name: str
    size: int
    sentencepiece: bool
    control: tuple[str, ...]
    user_defined: int = 0       # <unusedN> pieces after the control tokens


FAMILIES = {
    "bpe": Family("BPE 152k (Qwen 2.5)", 151_665, False,
                  tuple(f"<|control_{i}|>" for i in range(22))),
    "spm": Family("SPM 32k (Llama 2)", 32_000, True, ("<unk>", "<s>", "</s>")),
    "gemma": Family("Gemma 262k (Gemma 3)", 262_144, True,
                    ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>",
                     "<end_of_turn>", "<start_of_image>", "<end_of_image>"), 6_242),
}


def _joined(alphabet: list[str], count: int, rng: random.Random,
            longest: int = 16) -> list[tuple[str, str]]:
    """``count`` new pieces, each a join of two earlier ones (short ones preferred)."""
    pieces, seen, joins = list(alphabet), set(alphabet), []
    while len(joins) < count:
        left = pieces[min(int(rng.expovariate(1 / 2000)), len(pieces) - 1)]
        right = pieces[min(int(rng.expovariate(1 / 2000)), len(pieces) - 1)]
        if len(left) + len(right) > longest or left + right in seen:
            continue
        seen.add(left + right)
        pieces.append(left + right)
        joins.append((left, right))
    return joins


def write_family(path: Path, family: Family, seed: int = 0) -> Path:
    """A GGUF holding only the family's tokenizer metadata."""
    rng = random.Random(seed)
    writer = gguf.GGUFWriter(str(path), arch="llama")
    added = list(family.control) + [f"<unused{i}>" for i in range(family.user_defined)]
    added_types = [CONTROL] * len(family.control) + [USER_DEFINED] * family.user_defined
    if family.sentencepiece:
        letters = [SPACE] + [chr(c) for c in range(ord("a"), ord("z") + 1)] \
            + [chr(c) for c in range(0x4E00, 0x4E00 + 2000)]   # CJK: room for a large vocab
        byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
        free = family.size - len(added) - len(byte_pieces) - len(letters)
        joined = [left + right for left, right in _joined(letters, free, rng)]
        tokens = added + byte_pieces + letters + joined
        types = added_types + [BYTE] * 256 + [NORMAL] * (len(letters) + len(joined))
        writer.add_tokenizer_model("llama")
        writer.add_token_scores([0.0] * (len(added) + 256) + [float(-i) for i in
                                                               range(len(letters + joined))])
        writer.add_unk_token_id(tokens.index("<unk>"))
        writer.add_bos_token_id(tokens.index("<s>" if "<s>" in tokens else "<bos>"))
        writer.add_eos_token_id(tokens.index("</s>" if "</s>" in tokens else "<eos>"))
    else:
        alphabet = list(bytes_to_unicode().values())
        joins = _joined(alphabet, family.size - len(alphabet) - len(added), rng)
        tokens = alphabet + [left + right for left, right in joins] + added
        types = [NORMAL] * (len(tokens) - len(added)) + added_types
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2")
        writer.add_token_merges([f"{left} {right}" for left, right in joins])
        writer.add_bos_token_id(len(tokens) - len(added))
        writer.add_eos_token_id(len(tokens) - len(added))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _load_s(path: Path) -> float:
    started = time.perf_counter()
    tokenizer = load_tokenizer(path)
    tokenizer.encode(TEXT)               # the child has built its pipeline and answers
    seconds = time.perf_counter() - started
    tokenizer.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--family", nargs="+", choices=sorted(FAMILIES),
                        default=["bpe", "spm", "gemma"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        files = {name: write_family(Path(folder) / f"{name}.gguf", FAMILIES[name])
                 for name in args.family}
        times: dict[str, dict[str, list[float]]] = {n: {"cold": [], "warm": []} for n in files}
        for round_ in range(args.rounds):
            for name, path in files.items():
                os.environ["LANTERN_CACHE_DIR"] = str(Path(folder) / f"cache-{name}-{round_}")
                times[name]["cold"].append(_load_s(path))
                times[name]["warm"].append(_load_s(path))
                entry = next((Path(folder) / f"cache-{name}-{round_}" / "tokenizers").glob("*"))
                print(f"round {round_ + 1} {name}: cold {times[name]['cold'][-1]:.2f} s, "
                      f"warm {times[name]['warm'][-1]:.2f} s "
                      f"(entry {entry.stat().st_size / 1e6:.1f} MB)", flush=True)
    print("\n| family | cold, s (median; each) | warm, s (median; each) |\n|---|---|---|")
    for name, got in times.items():
        cells = [f"{statistics.median(got[k]):.2f}; "
                 + " ".join(f"{s:.2f}" for s in got[k]) for k in ("cold", "warm")]
        print(f"| {FAMILIES[name].name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
