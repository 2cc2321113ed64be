"""The params layer: Ollama option names, their types, and how ``ollama show`` prints them.

Facts from ollama api/types.go (Options, Runner, FormatParams) and parser/parser.go:
float options are float32, integer ones int64, ``use_mmap`` a bool, ``stop`` a list of
strings (each PARAMETER line appends one); an unknown name is an error; a few old names
are deprecated and dropped with a warning. ``/api/show`` prints one line per value as
``%-30s %#v`` (Go syntax: strings quoted, floats shortest ``%g``).
"""

from __future__ import annotations

import decimal
import json
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from engine.errors import LanternError

_FLOAT = ("top_p", "min_p", "typical_p", "temperature", "repeat_penalty",
          "presence_penalty", "frequency_penalty")
_INT = ("num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "draft_num_predict",
        "num_keep", "seed", "num_predict", "top_k", "repeat_last_n")
OPTION_KINDS: dict[str, str] = {
    **dict.fromkeys(_FLOAT, "float"), **dict.fromkeys(_INT, "int"),
    "use_mmap": "bool", "stop": "list",
}
DEPRECATED = frozenset({"penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only",
                        "use_mlock", "mirostat", "mirostat_tau", "mirostat_eta"})
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class InvalidParameter(LanternError):
    """A ``--param`` that Ollama would reject."""


_EXPECTED = {"float": "a number", "int": "a whole number", "bool": "true or false"}


def _typed(key: str, kind: str, text: str) -> object:
    try:
        if kind == "float":
            return np.float32(float(text))
        if kind == "int" and "_" not in text:     # Go's ParseInt takes no '_' separators
            return int(text, 10)
    except ValueError:
        pass
    if kind == "bool" and (text in _TRUE or text in _FALSE):
        return text in _TRUE
    raise InvalidParameter(f"parameter {key}={text!r}: expected {_EXPECTED[kind]}")


def parse_params(pairs: Iterable[str]) -> dict[str, object]:
    """``["temperature=0.7", "stop=<a>", "stop=<b>"]`` -> typed values as ``ollama create``."""
    params: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidParameter(f"parameter {pair!r}: write it as key=value")
        if key in DEPRECATED:
            warnings.warn(f"parameter {key} is deprecated and ignored", stacklevel=2)
            continue
        kind = OPTION_KINDS.get(key)
        if kind is None:
            known = ", ".join(sorted(OPTION_KINDS))
            raise InvalidParameter(f"unknown parameter {key!r}; known parameters: {known}")
        if kind == "list":
            params[key] = [*params.get(key, []), value]  # type: ignore[misc]
        else:
            params[key] = _typed(key, kind, value)
    return params


def normalize_params(params: Mapping[str, object]) -> dict[str, object]:
    """Check names and types of an API caller's params; floats become float32 like Ollama's."""
    pairs: list[str] = []
    for key, value in params.items():
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            pairs.append(f"{key}={text}")
    return parse_params(pairs)


def go_float(value: float) -> str:
    """Go's ``%v`` of a float64: shortest digits, exponent form below 1e-4 or from 1e6."""
    if value == 0:
        return "0"
    sign, digit_tuple, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)       # digits before the decimal point
    minus = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exp = point - 1
        return f"{minus}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{minus}{digits}{'0' * (point - len(digits))}"
    return f"{minus}{digits[:point]}.{digits[point:]}"


def _go_syntax(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_float(float(value))       # JSON numbers decode to float64 in Go
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def format_parameters(params: Mapping[str, object]) -> str:
    """The ``parameters`` text of ``/api/show`` (keys sorted; Go's map order is random)."""
    lines = []
    for key in sorted(params):
        value = params[key]
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"{key:<30} {_go_syntax(item)}")
    return "\n".join(lines)
