"""`--format` of `lantern run`: how the answer is printed, and what shape it must have.

Two meanings share the flag, as both Ollama (`--format json`) and Lantern (`--format
jsonl`) use it: ``text`` / ``jsonl`` choose the output (plain text, or one JSON object per
token); ``json``, a schema file or inline schema text (starting with ``{``) constrain the
answer. Give the flag twice to have both: ``--format jsonl --format schema.json``.
"""

from __future__ import annotations

from pathlib import Path

from engine.chat.answer_format import JSON, Format, parse_format
from engine.errors import GenerationError

OUTPUTS = ("text", "jsonl")
HELP = ("text | jsonl (one JSON object per token) | json | SCHEMA.json | '{...}' (the answer "
        "must be JSON / match the schema); repeat to combine, e.g. --format jsonl --format json")


def split_formats(values: list[str]) -> tuple[str, Format | None]:
    """(output mode, answer format or None) from every ``--format`` given."""
    output: str | None = None
    shape: Format | None = None
    for value in values:
        if value in OUTPUTS:
            if output is not None and output != value:
                raise GenerationError(f"--format {output} and --format {value} both choose the "
                                      "output: give one of text and jsonl")
            output = value
            continue
        if shape is not None:
            raise GenerationError(f"--format {value!r}: the answer already has a format; give "
                                  "json or one schema once")
        shape = _answer_format(value)
    return output or "text", shape


def _answer_format(value: str) -> Format:
    if value == JSON or value.lstrip().startswith("{"):
        try:
            return parse_format(value)
        except GenerationError as error:
            raise GenerationError(f"--format: {error}; fix the schema text or pass a file") \
                from None
    path = Path(value)
    if not path.is_file():
        raise GenerationError(f"--format {value!r} is not text, jsonl, json, a schema file or "
                              "inline schema text starting with '{'")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise GenerationError(f"--format: cannot read {value}: {error}") from None
    try:
        return parse_format(text)
    except GenerationError as error:
        raise GenerationError(f"--format {value}: {error}; fix the file") from None
