"""JSON bytes as Go's ``encoding/json`` Encoder writes them, so imported blobs and
manifests are byte-identical to what ``ollama create`` writes (same digests).

Go's rules that differ from Python's ``json``: no spaces, a trailing newline, ``<``,
``>``, ``&``, U+2028 and U+2029 escaped, floats in shortest form without exponent
between 1e-6 and 1e21 (``1`` not ``1.0``), float32 values printed with float32's
shortest digits (``0.7``, not ``0.699999988079071``). Maps are key-sorted by Go: callers
pass maps through ``sorted_map`` and structs as dicts in field order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
               "\u2029": "\\u2029"}


def sorted_map(mapping: Mapping[str, object]) -> dict[str, object]:
    """A Go ``map[string]...``: encoded with sorted keys."""
    return {key: mapping[key] for key in sorted(mapping)}


def _string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return "".join(_GO_ESCAPES.get(c, c) for c in text)


def _float(value: float | np.float32) -> str:
    if not np.isfinite(value):
        raise ValueError(f"JSON cannot hold the float {value!r}")
    number = value if isinstance(value, np.float32) else np.float64(value)
    magnitude = abs(float(number))
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        return np.format_float_scientific(number, unique=True, trim="-", exp_digits=1)
    return np.format_float_positional(number, unique=True, trim="-")


def _encode(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = (f"{_string(str(k))}:{_encode(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def dumps(value: object) -> bytes:
    """UTF-8 JSON plus the newline Go's Encoder appends."""
    return (_encode(value) + "\n").encode("utf-8")
