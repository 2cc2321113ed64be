"""An answer's format, as Ollama's ``format`` takes it: ``"json"`` or a JSON schema.

Backend-neutral: the local engine enforces it while sampling (engine.runtime.constraint),
a server receives it in its API's field (engine.remote), the app and the CLI read and
check what a person typed. The check is llguidance's own, so a schema that passes it is
one the local engine can enforce.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from engine.errors import GenerationError

JSON = "json"
# Ollama's "json" format is llama.cpp's json.gbnf, whose root is an object
ANY_OBJECT: dict = {"type": "object"}

Format = str | Mapping  # "json", or a JSON schema
# whitespace between JSON's tokens as llama.cpp's json.gbnf (so Ollama) allows it: a space,
# or a newline and up to 20 spaces or tabs; never unbounded, so a model cannot pad forever
WHITESPACE = r"(?: |\n[ \t]{0,20})"

def parse_format(text: str) -> Format:
    """A format as a person writes it: ``json``, or a JSON schema's text."""
    stripped = text.strip()
    if stripped == JSON:
        return JSON
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as error:
        raise GenerationError(f"the schema is not valid JSON: {error.msg} at line "
                              f"{error.lineno}, column {error.colno}") from None
    check_format(value)
    return value


def check_format(value: object) -> None:
    """Raise GenerationError saying what is wrong when ``value`` cannot be enforced."""
    grammar = json_grammar(value)
    import llguidance

    error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if error:
        raise GenerationError(f"the schema cannot be enforced: {messages[0]}")


def json_grammar(value: object) -> str:
    """llguidance's grammar for a format (GenerationError when it is not one)."""
    import llguidance

    if value == JSON:
        value = ANY_OBJECT
    if not isinstance(value, Mapping):
        raise GenerationError(f'a format is "json" or a JSON schema (an object), not {value!r}')
    try:
        return llguidance.LLMatcher.grammar_from_json_schema(
            dict(value), overrides={"whitespace_pattern": WHITESPACE})
    except ValueError as error:
        raise GenerationError(f"the schema cannot be enforced: {error}") from None


def format_text(value: Format | None) -> str:
    """The inverse of ``parse_format`` (``""``: no format), for storing and showing."""
    if value is None:
        return ""
    return JSON if value == JSON else json.dumps(value, ensure_ascii=False, indent=2)
