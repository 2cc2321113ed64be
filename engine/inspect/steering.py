"""Making a control vector from two sets of prompts, as llama.cpp's cvector-generator
does with its "mean" method, on the fp32 reference.

Prompts pair up line by line (positive i with negative i). Each is tokenized as a whole
prompt (BOS where the model wants one, control tokens parsed); the shorter of a pair is
padded with the last token of " " to the longer's length. For every position and every
block but the last, the positive's residual stream after the block minus the negative's is
one row; rows with no element above 1e-6 (the shared prefix) are dropped. Direction N+1 is
the mean of block N's rows over all pairs, scaled to unit length (llama.cpp then adds
direction N+1 after block N+1: the vector is read one block later than it was measured).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from engine.errors import GenerationError
from engine.gguf import GGUFModel
from engine.inspect.inspection import InspectionCancelled
from engine.reference import ReferenceWeights, forward
from engine.tokenizer import Tokenizer

ZERO_ROW = 1e-6  # a difference row with no element above this is left out
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def read_prompts(path: str | Path) -> list[str]:
    """One prompt per non-empty line; \\n, \\t, \\r, \\\\ and quotes escaped as in C."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), line)
            for line in lines if line]


def pair_ids(tokenizer: Tokenizer, positive: str, negative: str) -> tuple[list[int], list[int]]:
    """Both prompts' ids, the shorter padded to the longer with the last token of " "."""
    pos, neg = (tokenizer.encode_prompt([(text, True)]) for text in (positive, negative))
    pad = tokenizer.encode(" ")[-1]
    n = max(len(pos), len(neg))
    return pos + [pad] * (n - len(pos)), neg + [pad] * (n - len(neg))


def make_control_vector(
    model: GGUFModel, tokenizer: Tokenizer, positive: Sequence[str], negative: Sequence[str],
    *, progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict[int, np.ndarray]:
    """Directions 1..n_layers-1 (layer -> unit float32 [H]) from prompt pairs; ``progress``
    gets (pairs done, pairs), ``cancel`` stops between pairs (InspectionCancelled)."""
    if len(positive) != len(negative):
        raise GenerationError(f"{len(positive)} positive and {len(negative)} negative prompts: "
                              "they pair up line by line, so give as many of each")
    if not positive:
        raise GenerationError("no prompt pairs: give at least one positive and one negative")
    n_layers = model.config.text.n_layers
    if n_layers < 2:
        raise GenerationError("a model of one block has no layer a control vector can steer")
    weights = ReferenceWeights(model, keep=True)  # de-quantized once, not per prompt
    rows: list[list[np.ndarray]] = [[] for _ in range(n_layers - 1)]
    for done, (pos_text, neg_text) in enumerate(zip(positive, negative, strict=True)):
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("making the control vector was cancelled")
        pos, neg = pair_ids(tokenizer, pos_text, neg_text)
        pos_states = forward(model, pos, weights=weights).hidden_states
        neg_states = forward(model, neg, weights=weights).hidden_states
        for block in range(n_layers - 1):
            diff = pos_states[block + 1] - neg_states[block + 1]  # [S, H]
            rows[block].append(diff[(diff > ZERO_ROW).any(axis=1)])
        if progress is not None:
            progress(done + 1, len(positive))
    directions = {}
    for block, parts in enumerate(rows):
        kept = np.concatenate(parts)
        if not len(kept):
            raise GenerationError("every positive prompt gives the same hidden states as its "
                                  "negative: make the pairs differ")
        mean = kept.astype(np.float64).mean(axis=0)
        directions[block + 1] = (mean / np.linalg.norm(mean)).astype(np.float32)
    return directions
