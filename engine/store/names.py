"""Ollama model names: ``[host/][namespace/]model[:tag]``, parsed with Ollama's rules.

Facts from ollama types/model/name.go: defaults registry.ollama.ai / library / latest;
a ``:`` after the last ``/`` starts the tag, so ``host:port/ns/m`` keeps its port;
an optional ``scheme://`` before the host is dropped; every part starts with a letter,
digit or ``_`` and continues with letters, digits, ``_`` and ``-``, plus ``.`` (not in a
namespace) and ``:`` (host only); host 1-350 characters, the others 1-80. Ollama's
parser has no ``@digest`` form (``m@d`` is invalid there), so neither has this one.
Names compare case-insensitively, as Ollama matches them.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from engine.errors import InvalidName

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"

_FIRST = frozenset(string.ascii_letters + string.digits + "_")
_EXTRA = {
    "host": frozenset("-_.:"),
    "namespace": frozenset("-_"),
    "model": frozenset("-_."),
    "tag": frozenset("-_."),
}
_MAX_LEN = {"host": 350, "namespace": 80, "model": 80, "tag": 80}
_RULE = {
    "host": "letters, digits, '_', '-', '.' and ':' (for a port)",
    "namespace": "letters, digits, '_' and '-'",
    "model": "letters, digits, '_', '-' and '.'",
    "tag": "letters, digits, '_', '-' and '.'",
}


def part_problem(kind: str, value: str) -> str | None:
    """Why ``value`` is not a valid Ollama name part of ``kind``, or None when it is."""
    limit = _MAX_LEN[kind]
    if not value:
        return f"the {kind} is empty"
    if len(value) > limit:
        return f"the {kind} is {len(value)} characters long (at most {limit})"
    if value[0] not in _FIRST:
        return f"the {kind} {value!r} must start with a letter, digit or '_'"
    allowed = _FIRST | _EXTRA[kind]
    bad = sorted({c for c in value[1:] if c not in allowed})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"the {kind} {value!r} contains {shown}; allowed are {_RULE[kind]}"
    return None


@dataclass(frozen=True)
class ModelName:
    """A fully qualified model name; ``display`` is the short form ``ollama list`` prints."""

    host: str
    namespace: str
    model: str
    tag: str

    @classmethod
    def parse(cls, text: str) -> ModelName:
        """Parse ``text`` with Ollama's rules, filling defaults; InvalidName says which part."""
        raw = text
        if "@" in raw:
            raise InvalidName(
                f"invalid model name {text!r}: Ollama names have no '@digest' part; "
                "use [host/][namespace/]model[:tag]"
            )
        rest, tag = raw, DEFAULT_TAG
        if rest.rfind(":") > rest.rfind("/"):
            rest, _, tag = rest.rpartition(":")
        parts = rest.rsplit("/", 2)          # [[host/]namespace/]model, host keeps extra '/'
        model = parts[-1]
        namespace = parts[-2] if len(parts) >= 2 else DEFAULT_NAMESPACE
        host = DEFAULT_HOST
        if len(parts) == 3:
            scheme, sep, after = parts[0].partition("://")
            host = after if sep else scheme
        if "/" in host:
            raise InvalidName(
                f"invalid model name {text!r}: expected at most host/namespace/model:tag, "
                f"but the host part {host!r} contains '/'"
            )
        name = cls(host=host, namespace=namespace, model=model, tag=tag)
        name.check(text)
        return name

    @classmethod
    def from_parts(cls, host: str, namespace: str, model: str, tag: str) -> ModelName:
        """A name read from a manifest path ``host/namespace/model/tag``; InvalidName if bad."""
        name = cls(host=host, namespace=namespace, model=model, tag=tag)
        name.check("/".join((host, namespace, model, tag)))
        return name

    def check(self, text: str) -> None:
        for kind in ("host", "namespace", "model", "tag"):
            problem = part_problem(kind, getattr(self, kind))
            if problem:
                raise InvalidName(f"invalid model name {text!r}: {problem}")

    @property
    def parts(self) -> tuple[str, str, str, str]:
        """The manifest path components under ``<root>/manifests``."""
        return (self.host, self.namespace, self.model, self.tag)

    @property
    def display(self) -> str:
        """Ollama's DisplayShortest: defaults left out, model and tag always shown."""
        if self.host.lower() != DEFAULT_HOST:
            prefix = f"{self.host}/{self.namespace}/"
        elif self.namespace.lower() != DEFAULT_NAMESPACE:
            prefix = f"{self.namespace}/"
        else:
            prefix = ""
        return f"{prefix}{self.model}:{self.tag}"

    def key(self) -> tuple[str, ...]:
        """Case-folded identity (Ollama's EqualFold)."""
        return tuple(p.lower() for p in self.parts)

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
