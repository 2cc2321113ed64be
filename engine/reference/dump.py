"""A plain on-disk dump of one forward pass, so any engine can be checked against Lantern's.

A dump is a folder of .npy files (numpy's format, readable from C, C++, Rust and Julia)
and ``manifest.json``::

    {"format": "lantern-dump", "version": 1, "model": "...",
     "ids": "ids.npy",                          # int [S]: the prompt's token ids
     "hidden_states": ["hidden_000.npy", ...],  # n_layers + 1 of float [S, H]: the
     #                                            embeddings, then each block's output
     #                                            (the last one before the final norm)
     "logits": "logits.npy"}                    # float [S, V]; optional

Another engine writes the same files (any float dtype) to be read by ``--against``.
Lantern writes the manifest last, whole, under another name and then renamed, after
removing an earlier dump's first: a dump cut short (a crash, a full disk) has no manifest,
so it never reads as complete.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LanternError

FORMAT, VERSION = "lantern-dump", 1
MANIFEST = "manifest.json"
PARTIAL = MANIFEST + ".partial"
DUMP_FILE = re.compile(r"manifest\.json(\.partial)?|ids\.npy|logits\.npy|hidden_\d+\.npy")


class DumpError(LanternError):
    """A dump folder that cannot be read."""


@dataclass(frozen=True)
class Dump:
    model: str
    ids: np.ndarray                     # int64 [S]
    hidden_states: list[np.ndarray]     # n_layers + 1 of [S, H]
    logits: np.ndarray | None           # [S, V]


def write_dump(folder: Path, dump: Dump) -> None:
    """Write ``dump`` to ``folder`` (new, empty, or holding an earlier dump, replaced)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _clear(folder)
        names = [f"hidden_{i:03d}.npy" for i in range(len(dump.hidden_states))]
        np.save(folder / "ids.npy", np.asarray(dump.ids, dtype=np.int64))
        for name, state in zip(names, dump.hidden_states, strict=True):
            np.save(folder / name, np.asarray(state, dtype=np.float32))
        manifest = {"format": FORMAT, "version": VERSION, "model": dump.model,
                    "ids": "ids.npy", "hidden_states": names}
        if dump.logits is not None:
            np.save(folder / "logits.npy", np.asarray(dump.logits, dtype=np.float32))
            manifest["logits"] = "logits.npy"
        (folder / PARTIAL).write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(folder / PARTIAL, folder / MANIFEST)
    except OSError as e:
        raise DumpError(f"the dump could not be written to {folder}: "
                        f"{e.strerror or e}") from None


def _clear(folder: Path) -> None:
    """Remove an earlier dump from ``folder``, its manifest first; refuse a folder that
    holds anything else (the user's files stay untouched)."""
    names = sorted(p.name for p in folder.iterdir())
    if foreign := [n for n in names if not DUMP_FILE.fullmatch(n)]:
        shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
        raise DumpError(f"{folder} holds files that are not a dump's ({shown}); a dump is "
                        f"written to an empty or new folder, or over an earlier dump")
    (folder / MANIFEST).unlink(missing_ok=True)
    for name in names:
        (folder / name).unlink(missing_ok=True)


def read_dump(folder: Path) -> Dump:
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise DumpError(f"{folder} is not a dump: it has no manifest.json (see README, "
                        f"'Your engine against Lantern', for the format)") from None
    except json.JSONDecodeError as e:
        raise DumpError(f"{manifest_path} is not valid JSON: {e}") from None
    except OSError as e:
        raise DumpError(f"{manifest_path} cannot be read: {e.strerror or e}") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise DumpError(f"{manifest_path} is not a {FORMAT} version {VERSION} manifest "
                        f"(format {manifest.get('format')!r}, version "
                        f"{manifest.get('version')!r})")

    def load(name: str) -> np.ndarray:
        try:
            return np.load(folder / name, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise DumpError(f"{folder / name} (named in the manifest) cannot be read as "
                            f".npy: {e}") from None

    ids = load(manifest["ids"]).astype(np.int64).reshape(-1)
    states = [load(name) for name in manifest["hidden_states"]]
    for name, state in zip(manifest["hidden_states"], states, strict=True):
        if state.ndim != 2 or len(state) != len(ids):
            raise DumpError(f"{folder / name} has shape {state.shape}; expected "
                            f"[{len(ids)}, hidden], one row per token of ids.npy")
    logits = load(manifest["logits"]) if manifest.get("logits") else None
    return Dump(str(manifest.get("model", "")), ids, states, logits)
