"""Typed reads of GGUF metadata for config parsing.

Required keys are required (a missing one is ``CorruptModel`` naming the key); optional
keys fall back to a default and the key is recorded in ``assumed`` so ``lantern show``
can say which values were not in the file. A default of None means "optional": nothing
is assumed when such a key is absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from engine.errors import CorruptModel

_MISSING = object()


class Keys:
    """One file's metadata, read with types checked and defaults recorded."""

    def __init__(self, metadata: Mapping[str, object], path: Path) -> None:
        self.metadata = metadata
        self.path = path
        self.assumed: list[str] = []

    def has(self, key: str) -> bool:
        return key in self.metadata

    def _get(self, key: str, default: object) -> object:
        if key in self.metadata:
            return self.metadata[key]
        if default is _MISSING:
            raise CorruptModel(
                f"{self.path}: required metadata key {key!r} is missing; "
                "the file was not written for this architecture or is damaged"
            )
        if default is not None:
            self.assumed.append(key)
        return default

    def _wrong(self, key: str, value: object, expected: str) -> CorruptModel:
        return CorruptModel(f"{self.path}: metadata {key} is {value!r}, expected {expected}")

    def integer(self, key: str, default: int | object = _MISSING) -> int:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, value, "an integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        """An integer whose absence assumes nothing (a token id, a derivable size)."""
        return self.integer(key) if key in self.metadata else None

    def number(self, key: str, default: float | object = _MISSING) -> float:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, value, "a number")
        return float(value)

    def flag(self, key: str, default: bool | object = _MISSING) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value

    def string(self, key: str, default: str | None | object = _MISSING) -> str | None:
        value = self._get(key, default)
        if value is not None and not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value

    def integers(self, key: str, default: Sequence[int] | object = _MISSING) -> tuple[int, ...]:
        value = self._get(key, default)
        if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self._wrong(key, value, "a list of integers")
        return tuple(value)
