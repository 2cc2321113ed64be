"""How Go sees the Python values handed to a template: truth, printing (fmt's %v),
JSON (encoding/json), and type names for error messages.

Mapping: None = nil interface, bool, int = int, float = float64, str = string,
list/tuple = slice, dict = map (printed and ranged in sorted key order), a dataclass =
struct (fields by their Go names, printed "{a b}"). A type with a Go String() method
defines ``go_string()``; a type with its own MarshalJSON defines ``go_json()``.
Struct fields declare their JSON name in ``field(metadata={"json": "name,omitempty"})``.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal
from typing import Any

from engine.gojson import go_float, go_string


class _NoValue:
    """Go's invalid reflect.Value: what a missing map key yields; prints "<no value>"."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE = _NoValue()


def is_struct(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def struct_fields(value: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(value) if not f.name.startswith("_")]


def go_type_name(value: Any) -> str:
    if value is None or value is NO_VALUE:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    go_name = getattr(type(value), "go_type", None)
    if go_name:
        return go_name
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return type(value).__name__


def truth(value: Any) -> bool:
    """Go's isTrue: zero values, nil and empty containers are false; structs are true."""
    if value is None or value is NO_VALUE:
        return False
    if isinstance(value, str | list | tuple | dict):
        return len(value) > 0
    if isinstance(value, bool | int | float):
        return value != 0
    return True


def sorted_items(mapping: dict) -> list[tuple[Any, Any]]:
    """Go's fmtsort order for map keys of one basic kind."""
    return sorted(mapping.items(), key=lambda kv: kv[0])


# ---------------------------------------------------------------- fmt %v


def format_float_g(value: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64) as fmt's %v prints float64."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    exp = len(text) + exponent - 1           # decimal exponent of the first digit
    prefix = "-" if sign else ""
    # shortest 'g': exponent form below 1e-4 and from 1e+06 up (strconv's eprec = 6)
    if exp < -4 or exp >= 6:
        return prefix + _exp_form(text, exp)
    return prefix + _fixed_form(text, exp)


def _exp_form(digits: str, exp: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _fixed_form(digits: str, exp: int) -> str:
    if exp < 0:
        return "0." + "0" * (-exp - 1) + digits
    if exp + 1 >= len(digits):
        return digits + "0" * (exp + 1 - len(digits))
    return digits[:exp + 1] + "." + digits[exp + 1:]


def format_value(value: Any, depth: int = 0) -> str:
    """fmt.Sprint of one operand (%v), including Stringer methods at every depth."""
    if value is None:
        return "<nil>"
    if value is NO_VALUE:
        return "<no value>"
    if hasattr(value, "go_string"):
        return value.go_string()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float_g(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return "[" + " ".join(str(b) for b in value) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(format_value(v, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(
            f"{format_value(k, depth + 1)}:{format_value(v, depth + 1)}"
            for k, v in sorted_items(value)
        ) + "]"
    if is_struct(value):
        return "{" + " ".join(
            format_value(getattr(value, f.name), depth + 1) for f in struct_fields(value)
        ) + "}"
    return str(value)


def sprint(*args: Any) -> str:
    """fmt.Sprint: a space between operands when neither side is a string."""
    out = []
    for i, arg in enumerate(args):
        if i > 0 and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(format_value(arg))
    return "".join(out)


# ---------------------------------------------------------------- encoding/json


def _json_float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {format_float_g(value)}")
    return go_float(value)


def _omit_empty(value: Any) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    if isinstance(value, str | list | tuple | dict):
        return len(value) == 0
    return False


def to_json(value: Any) -> str:
    """json.Marshal: compact, map keys sorted, <>& escaped, float64 in Go's style."""
    if hasattr(value, "go_json"):
        return value.go_json()
    if value is None or value is NO_VALUE:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(
            f"{go_string(str(k))}:{to_json(v)}" for k, v in sorted_items(value)
        ) + "}"
    if is_struct(value):
        parts = []
        for f in struct_fields(value):
            name, _, options = f.metadata.get("json", f.name).partition(",")
            if name == "-":
                continue
            item = getattr(value, f.name)
            if "omitempty" in options and _omit_empty(item):
                continue
            parts.append(f"{go_string(name)}:{to_json(item)}")
        return "{" + ",".join(parts) + "}"
    raise ValueError(f"json: unsupported type: {type(value).__name__}")
