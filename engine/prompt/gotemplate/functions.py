"""The functions a template may call: Go's builtins (with Go's comparison rules and
fmt verbs) plus the ones Ollama adds in template/template.go (json, currentDate,
yesterdayDate, toTypeScriptType). ``and``/``or`` short-circuit inside the executor.
"""

from __future__ import annotations

import datetime
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from engine.prompt.gotemplate.lexer import go_quote
from engine.prompt.gotemplate.values import (
    NO_VALUE,
    format_float_g,
    format_value,
    go_type_name,
    is_struct,
    sprint,
    to_json,
    truth,
)


class FuncError(Exception):
    """A function failed; the executor reports it as Go does ("error calling NAME: ...")."""


class ArgCountError(Exception):
    """Wrong number of arguments; reported without the "error calling" prefix."""


# ---------------------------------------------------------------- comparison

def _basic_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return None


def _is_nil(value: Any) -> bool:
    return value is None or value is NO_VALUE


def eq(arg1: Any, *rest: Any) -> bool:
    """True when arg1 equals any of the rest (Go: same basic kind, or an error)."""
    if not rest:
        raise FuncError("missing argument for comparison")
    k1 = _basic_kind(arg1)
    for arg in rest:
        k2 = _basic_kind(arg)
        if k1 != k2:
            if not _is_nil(arg1) and not _is_nil(arg):
                raise FuncError("incompatible types for comparison")
            continue
        if k1 is not None:
            if arg1 == arg:
                return True
            continue
        if _is_nil(arg1) or _is_nil(arg):
            if _is_nil(arg1) == _is_nil(arg):
                return True
            continue
        if isinstance(arg, list | dict):
            raise FuncError(f"non-comparable type {format_value(arg)}: {go_type_name(arg)}")
        if type(arg1) is not type(arg):
            raise FuncError("incompatible types for comparison")
        if arg1 == arg:
            return True
    return False


def ne(arg1: Any, arg2: Any) -> bool:
    return not eq(arg1, arg2)


def lt(arg1: Any, arg2: Any) -> bool:
    k1, k2 = _basic_kind(arg1), _basic_kind(arg2)
    if k1 is None or k2 is None:
        raise FuncError("invalid type for comparison")
    if k1 != k2:
        raise FuncError("incompatible types for comparison")
    if k1 == "bool":
        raise FuncError("invalid type for comparison")
    return arg1 < arg2


def le(arg1: Any, arg2: Any) -> bool:
    return lt(arg1, arg2) or eq(arg1, arg2)


def gt(arg1: Any, arg2: Any) -> bool:
    return not le(arg1, arg2)


def ge(arg1: Any, arg2: Any) -> bool:
    return not lt(arg1, arg2)


# ---------------------------------------------------------------- containers

def _index_arg(index: Any, cap: int) -> int:
    if _is_nil(index):
        raise FuncError("cannot index slice/array with nil")
    if isinstance(index, bool) or not isinstance(index, int):
        raise FuncError(f"cannot index slice/array with type {go_type_name(index)}")
    if index < 0 or index > cap:
        raise FuncError(f"index out of range: {index}")
    return index


def index(item: Any, *indexes: Any) -> Any:
    if _is_nil(item):
        raise FuncError("index of untyped nil")
    for key in indexes:
        if isinstance(item, list | tuple | str):
            data = item.encode() if isinstance(item, str) else item   # a string indexes bytes
            i = _index_arg(key, len(data))
            if i == len(data):
                raise FuncError(f"index out of range: {i}")
            item = data[i]
        elif isinstance(item, dict):
            if not isinstance(key, str):
                raise FuncError(f"value has type {go_type_name(key)}; should be string")
            item = item.get(key)
        elif _is_nil(item):
            raise FuncError("index of nil pointer")
        else:
            raise FuncError(f"can't index item of type {go_type_name(item)}")
    return item


def slice_(item: Any, *indexes: Any) -> Any:
    if _is_nil(item):
        raise FuncError("slice of untyped nil")
    if len(indexes) > 3:
        raise FuncError(f"too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise FuncError("cannot 3-index slice a string")
        data = item.encode()
    elif isinstance(item, list | tuple):
        data = item
    else:
        raise FuncError(f"can't slice item of type {go_type_name(item)}")
    bounds = [0, len(data)]
    for i, key in enumerate(indexes):
        value = _index_arg(key, len(data))
        if i < 2:
            bounds[i] = value
    if bounds[0] > bounds[1]:
        raise FuncError(f"invalid slice index: {bounds[0]} > {bounds[1]}")
    result = data[bounds[0]:bounds[1]]
    return result.decode(errors="replace") if isinstance(item, str) else list(result)


def length(item: Any) -> int:
    if _is_nil(item):
        raise FuncError("len of nil pointer")
    if isinstance(item, str):
        return len(item.encode())
    if isinstance(item, list | tuple | dict):
        return len(item)
    raise FuncError(f"len of type {go_type_name(item)}")


def not_(arg: Any) -> bool:
    return not truth(arg)


# ---------------------------------------------------------------- fmt

_VERB = re.compile(r"%([-+# 0]*)(\*|\d+)?(?:\.(\*|\d*))?(.)", re.S)


def _bad(verb: str, arg: Any) -> str:
    if _is_nil(arg):
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({go_type_name(arg)}={format_value(arg)})"


def _pad(text: str, flags: str, width: int | None, numeric: bool = False) -> str:
    if width is None or len(text) >= width:
        return text
    if "-" in flags:
        return text.ljust(width)
    if "0" in flags and numeric:
        sign = text[0] if text[:1] in "+- " else ""
        return sign + text[len(sign):].rjust(width - len(sign), "0")
    return text.rjust(width)


def _format_one(verb: str, flags: str, width: int | None, prec: int | None, arg: Any) -> str:
    numeric = False
    if verb == "v" or (verb == "s" and (hasattr(arg, "go_string") or not _basic_kind(arg))):
        if verb == "s" and isinstance(arg, int | float) and not isinstance(arg, bool):
            return _bad(verb, arg)
        text = format_value(arg)
        if verb == "v" and isinstance(arg, float) and prec is not None:
            text = f"{arg:.{prec}g}"
    elif verb == "s":
        if not isinstance(arg, str):
            return _bad(verb, arg)
        text = arg if prec is None else arg[:prec]
    elif verb == "q":
        if isinstance(arg, str):
            text = go_quote(arg)
        elif isinstance(arg, int) and not isinstance(arg, bool):
            text = "'" + go_quote(chr(arg))[1:-1].replace("'", "\\'") + "'"
        else:
            return _bad(verb, arg)
    elif verb == "t":
        if not isinstance(arg, bool):
            return _bad(verb, arg)
        text = "true" if arg else "false"
    elif verb in "dboxXc" and isinstance(arg, int) and not isinstance(arg, bool):
        numeric = True
        base = {"d": "d", "b": "b", "o": "o", "x": "x", "X": "X"}.get(verb)
        if verb == "c":
            text = chr(arg)
        else:
            text = format(abs(arg), base)
            if "#" in flags and verb in "xX":
                text = "0" + verb + text
            text = ("-" if arg < 0 else "+" if "+" in flags else " " if " " in flags else "") + text
    elif verb in "xX" and isinstance(arg, str):
        text = arg.encode().hex()
        text = text.upper() if verb == "X" else text
    elif verb in "eEfFgG" and isinstance(arg, float):
        numeric = True
        if verb in "gG" and prec is None:
            text = format_float_g(arg)
        else:
            spec = verb.lower() if verb == "F" else verb
            text = format(arg, f"{'+' if '+' in flags else ''}.{6 if prec is None else prec}{spec}")
            if spec in "eE":
                text = re.sub(r"([eE][+-])(\d)$", r"\g<1>0\2", text)
    else:
        return _bad(verb, arg)
    return _pad(text, flags, width, numeric)


def sprintf(fmt: str, *args: Any) -> str:
    """fmt.Sprintf for the verbs templates use (%s %d %v %q %t %f %e %g %x %c %%)."""
    out: list[str] = []
    pos = 0
    argi = 0
    for match in _VERB.finditer(fmt):
        out.append(fmt[pos:match.start()])
        pos = match.end()
        flags, width_s, prec_s, verb = match.groups()
        if verb == "%" and not flags and width_s is None and prec_s is None:
            out.append("%")
            continue
        width = prec = None
        if width_s == "*":
            width, argi = (args[argi] if argi < len(args) else None), argi + 1
        elif width_s:
            width = int(width_s)
        if prec_s == "*":
            prec, argi = (args[argi] if argi < len(args) else None), argi + 1
        elif prec_s is not None:
            prec = int(prec_s or 0)
        if argi >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        out.append(_format_one(verb, flags, width, prec, args[argi]))
        argi += 1
    out.append(fmt[pos:])
    if argi < len(args):
        extra = ", ".join(f"{go_type_name(a)}={format_value(a)}" for a in args[argi:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def printf(fmt: Any, *args: Any) -> str:
    if not isinstance(fmt, str):
        raise ArgCountError(f"wrong type for value; expected string; got {go_type_name(fmt)}")
    return sprintf(fmt, *args)


def println(*args: Any) -> str:
    return " ".join(format_value(a) for a in args) + "\n"


def _eval_args(args: tuple[Any, ...]) -> str:
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return sprint(*args)


def html(*args: Any) -> str:
    text = _eval_args(args)
    table = {'"': "&#34;", "'": "&#39;", "&": "&amp;", "<": "&lt;", ">": "&gt;", "\0": "\ufffd"}
    return "".join(table.get(ch, ch) for ch in text)


def js(*args: Any) -> str:
    text = _eval_args(args)
    table = {"\\": "\\\\", "'": "\\'", '"': '\\"', "<": "\\u003C", ">": "\\u003E",
             "&": "\\u0026", "=": "\\u003D"}
    out = []
    for ch in text:
        if ch in table:
            out.append(table[ch])
        elif ord(ch) < 0x20 or (ord(ch) >= 0x80 and not ch.isprintable()):
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def urlquery(*args: Any) -> str:
    return urllib.parse.quote_plus(_eval_args(args), safe="-_.~")


# ---------------------------------------------------------------- Ollama's additions

def json_(value: Any) -> str:
    """Ollama's ``json``: json.Marshal with the error dropped."""
    try:
        return to_json(value)
    except ValueError:
        return ""


def current_date(*_format: str) -> str:
    """Ollama ignores the format argument and prints YYYY-MM-DD."""
    return datetime.date.today().isoformat()


def yesterday_date(*_format: str) -> str:
    return (datetime.date.today() - datetime.timedelta(days=1)).isoformat()


def to_typescript_type(value: Any) -> str:
    """A tool property's JSON-schema type as TypeScript; anything else is "any"."""
    method = getattr(value, "to_typescript_type", None)
    return method() if method is not None and is_struct(value) else "any"


FUNCTIONS: dict[str, Callable[..., Any] | None] = {
    # builtins; None marks the two the executor evaluates lazily
    "and": None,
    "or": None,
    "not": not_,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "len": length,
    "index": index,
    "slice": slice_,
    "print": sprint,
    "printf": printf,
    "println": println,
    "html": html,
    "js": js,
    "urlquery": urlquery,
    # Ollama
    "json": json_,
    "currentDate": current_date,
    "yesterdayDate": yesterday_date,
    "toTypeScriptType": to_typescript_type,
}

OLLAMA_FUNCTIONS = frozenset({"json", "currentDate", "yesterdayDate", "toTypeScriptType"})

# exact parameter counts (Go reports "wrong number of args for NAME: want N got M")
FIXED_ARITY = {"not": 1, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2, "len": 1, "json": 1,
               "toTypeScriptType": 1}
MIN_ARITY = {"and": 1, "or": 1, "eq": 1, "index": 1, "slice": 1, "printf": 1}
