"""JSON as Go's ``encoding/json`` writes it: imported blobs and manifests byte-identical
to what ``ollama create`` writes (same digests), and the ``json`` function of Ollama's
templates (engine.prompt.gotemplate).

Go's rules that differ from Python's ``json``: no spaces, a trailing newline, ``<``,
``>``, ``&``, U+2028 and U+2029 escaped, floats in shortest form without exponent
between 1e-6 and 1e21 (``1`` not ``1.0``), float32 values printed with float32's
shortest digits (``0.7``, not ``0.699999988079071``). Maps are key-sorted by Go: callers
pass maps through ``sorted_map`` and structs as dicts in field order.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\b": "\\b", "\f": "\\f"}


def sorted_map(mapping: Mapping[str, object]) -> dict[str, object]:
    """A Go ``map[string]...``: encoded with sorted keys."""
    return {key: mapping[key] for key in sorted(mapping)}


def go_string(text: str) -> str:
    """A quoted JSON string: Go escapes <, >, &, U+2028/9 and control characters, and
    replaces lone surrogates (invalid UTF-8 in Go) with U+FFFD."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or ch in "<>&\u2028\u2029":
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_float(value: float | np.float32) -> str:
    """Shortest digits (float32 ones for a float32), exponent form outside [1e-6, 1e21)."""
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
        return go_float(value)
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, Mapping):
        items = (f"{go_string(str(k))}:{_encode(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def dumps(value: object) -> bytes:
    """UTF-8 JSON plus the newline Go's Encoder appends."""
    return (_encode(value) + "\n").encode("utf-8")
