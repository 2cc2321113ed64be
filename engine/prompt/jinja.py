"""GGUF `tokenizer.chat_template` (Jinja) rendered the way transformers'
apply_chat_template renders it (utils/chat_template_utils.py): an immutable sandbox,
trim_blocks + lstrip_blocks, loop controls, ``raise_exception``, ``strftime_now`` and a
``tojson`` that does not HTML-escape (json.dumps with ensure_ascii=False).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.errors import TemplateError


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=8)
def compile_template(source: str) -> jinja2.Template:
    """Compile once per source; a syntax error names its line."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise TemplateError(f"chat template line {error.lineno}: {error.message}") from None


def render_jinja(source: str, messages: Sequence[Mapping[str, Any]], *,
                 tools: Sequence[Mapping[str, Any]] | None = None,
                 documents: Sequence[Mapping[str, Any]] | None = None,
                 add_generation_prompt: bool = True,
                 special_tokens: Mapping[str, str] | None = None,
                 **extra: Any) -> str:
    """Render a chat template; ``special_tokens`` supplies bos_token, eos_token...
    A template's raise_exception() becomes TemplateError with the template's message."""
    template = compile_template(source)
    try:
        return template.render(messages=list(messages), tools=tools, documents=documents,
                               add_generation_prompt=add_generation_prompt,
                               **dict(special_tokens or {}), **extra)
    except jinja2.exceptions.TemplateError as error:
        raise TemplateError(f"chat template: {error}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
        raise TemplateError(
            f"the chat template failed on these messages ({type(error).__name__}: {error}); "
            "the model's template may not support them (e.g. images or tool calls)"
        ) from None
