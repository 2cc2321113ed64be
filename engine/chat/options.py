"""Sampling options under Ollama's names: what every backend is asked to honour.

Resolved in Ollama's order (defaults, the model's params layer, the user's settings) and
checked here, so a typo fails loudly before any backend samples oddly.
"""

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from engine.errors import GenerationError

# Ollama options that steer its own runner or hardware, and ones it has retired: a
# Modelfile may carry them, they mean nothing to this engine, so they are accepted and
# dropped rather than refused.
IGNORED_OPTIONS = frozenset(
    {
        "num_keep", "num_batch", "num_gpu", "main_gpu", "use_mmap", "num_thread",
        "draft_num_predict", "mirostat", "mirostat_tau", "mirostat_eta", "penalize_newline",
        "tfs_z", "num_gqa", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mlock",
        "numa", "rope_frequency_base", "rope_frequency_scale", "embedding_only",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Options:
    """Generation options under Ollama's names, with Ollama's defaults."""

    temperature: float = 0.8
    top_k: int = 40  # <= 0: off
    top_p: float = 0.9  # 1: off
    min_p: float = 0.0  # 0: off
    typical_p: float = 1.0  # 1: off
    repeat_penalty: float = 1.0  # 1: off
    repeat_last_n: int = 64  # 0: off, -1: whole history
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = -1  # -1: a fresh random seed
    num_predict: int = -1  # -1: until a stop token, -2: until the context is full
    num_ctx: int = 4096
    stop: tuple[str, ...] = ()

    @classmethod
    def resolve(
        cls,
        params_layer: Mapping[str, object] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> "Options":
        """Defaults, then the model's params layer, then the user's settings (each
        replaces whole values, `stop` included). None values leave the option as is."""
        options = cls()
        for source, values in (("the model's params", params_layer), ("settings", overrides)):
            changes = {}
            for name, value in (values or {}).items():
                if name in IGNORED_OPTIONS or value is None:
                    continue
                if name not in _KINDS:
                    raise GenerationError(
                        f"unknown option {name!r} in {source}; valid options: " + ", ".join(_KINDS)
                    )
                changes[name] = _checked(name, value, source)
            options = replace(options, **changes)
        return options


_KINDS = {f.name: f.type for f in fields(Options)}
# Allowed values, checked so a typo fails loudly instead of sampling oddly.
_RULES = {
    "temperature": (lambda v: v >= 0, "at least 0"),
    "top_p": (lambda v: 0 <= v <= 1, "between 0 and 1"),
    "min_p": (lambda v: 0 <= v <= 1, "between 0 and 1"),
    "typical_p": (lambda v: 0 <= v <= 1, "between 0 and 1"),
    "repeat_penalty": (lambda v: v > 0, "greater than 0"),
    "repeat_last_n": (lambda v: v >= -1, "at least -1"),
    "num_predict": (lambda v: v >= -2, "at least -2"),
    "num_ctx": (lambda v: v >= 1, "at least 1"),
}


def _checked(name: str, value: object, source: str) -> object:
    kind = _KINDS[name]
    where = f"option {name!r} in {source}"
    if kind is float or kind is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise GenerationError(f"{where} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise GenerationError(f"{where} must be finite, got {value!r}")
        if kind is int:
            if value != int(value):
                raise GenerationError(f"{where} must be a whole number, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        rule = _RULES.get(name)
        if rule and not rule[0](value):
            raise GenerationError(f"{where} must be {rule[1]}, got {value!r}")
        return value
    if not isinstance(value, list | tuple) or not all(isinstance(s, str) for s in value):
        raise GenerationError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)
