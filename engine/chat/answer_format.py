"""An answer's format, as Ollama's ``format`` takes it: ``"json"`` or a JSON schema.

Backend-neutral: the local engine enforces it while sampling (engine.runtime.constraint),
a server receives it in its API's field (engine.remote), the app and the CLI read and
check what a person typed. The check is llguidance's own, so a schema that passes it is
one the local engine can enforce.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence

from engine.chat.tools import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, Tool
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

    try:
        return llguidance.LLMatcher.grammar_from_json_schema(
            _schema(value), overrides={"whitespace_pattern": WHITESPACE})
    except ValueError as error:
        raise GenerationError(f"the schema cannot be enforced: {error}") from None


def grammar_with_tool_calls(value: Format, tools: Sequence[Tool],
                            token_tags: Collection[str] = ()) -> str:
    """The format's grammar where the answer may instead be Qwen's tool calls, as its
    templates ask for them: ``<tool_call>`` newline, ``{"name", "arguments"}`` naming an
    offered tool with arguments matching its parameters, newline, ``</tool_call>``,
    several calls one per line. ``token_tags``: the tags the vocabulary holds as tokens of
    their own (written as such in the grammar; the others as text)."""
    import llguidance

    def tag(text: str) -> str:
        return text if text in token_tags else json.dumps(text)

    def grammar(arguments: Callable[[Tool], dict]) -> str:
        call = {"anyOf": [{"type": "object", "properties": {
            "name": {"const": tool.name}, "arguments": arguments(tool)},
            "required": ["name", "arguments"], "additionalProperties": False} for tool in tools]}
        return llguidance.LLMatcher.grammar_from_lark("\n".join((
            "%llguidance {}",
            "start: answer | calls",
            f"answer: %json {json.dumps(_with_whitespace(_schema(value)))}",
            'calls: call ("\\n" call)*',
            f'call: {tag(TOOL_CALL_OPEN)} "\\n" %json {json.dumps(_with_whitespace(call))} '
            f'"\\n" {tag(TOOL_CALL_CLOSE)}')))

    strict = grammar(lambda tool: tool.parameters)
    if not llguidance.LLMatcher.validate_grammar_with_warnings(strict)[0]:
        return strict
    # a tool whose parameters llguidance cannot enforce: any object, the tool checks them
    return grammar(lambda tool: ANY_OBJECT)


def _schema(value: object) -> dict:
    if value == JSON:
        value = ANY_OBJECT
    if not isinstance(value, Mapping):
        raise GenerationError(f'a format is "json" or a JSON schema (an object), not {value!r}')
    return dict(value)


def _with_whitespace(schema: dict) -> dict:
    """The schema with llguidance's whitespace option inline (as in a Lark ``%json``)."""
    return {**schema, "x-guidance": {**schema.get("x-guidance", {}),
                                     "whitespace_pattern": WHITESPACE}}


def format_text(value: Format | None) -> str:
    """The inverse of ``parse_format`` (``""``: no format), for storing and showing."""
    if value is None:
        return ""
    return JSON if value == JSON else json.dumps(value, ensure_ascii=False, indent=2)
