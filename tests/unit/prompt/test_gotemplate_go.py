"""Our Go-template interpreter against Go's own text/template.

tests/data/templates/expected.json was written by the Go harness in tests/go/ from
cases.json (raw data cases, and chats rendered through Ollama's rules with its real
template set). Errors are compared by position and message.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.errors import TemplateError
from engine.prompt.gotemplate import render
from engine.prompt.ollama import render_ollama_chat

DATA = Path(__file__).parents[2] / "data" / "templates"
CASES = json.loads((DATA / "cases.json").read_text())
EXPECTED = json.loads((DATA / "expected.json").read_text())

_GO_PARSE = re.compile(r"template: :(\d+): (.*)", re.S)
_GO_EXEC = re.compile(r"template: :(\d+):(\d+): executing \"\" at <.*?>: (.*)", re.S)
_OURS = re.compile(r"template: (\d+):(\d+): (?:executing at <.*?>: )?(.*)", re.S)


def _source(case: dict) -> str:
    text = case["template"]
    return (DATA / text[1:]).read_text().replace("\r\n", "\n") if text.startswith("@") else text


def _render(case: dict) -> str:
    source = _source(case)
    if case["mode"] == "raw":
        # Go decodes JSON numbers into `any` as float64
        data = json.loads(json.dumps(case["data"]), parse_int=float)
        return render(source, data)
    chat = case["data"]
    return render_ollama_chat(source, chat["messages"], tools=chat.get("tools"),
                              think=chat.get("think"), think_level=chat.get("think_level", ""))


def _normalise_go_error(message: str) -> tuple[int, int | None, str]:
    if m := _GO_EXEC.fullmatch(message):
        return int(m[1]), int(m[2]), m[3]
    if m := _GO_PARSE.fullmatch(message):
        return int(m[1]), None, m[2]
    return 0, None, message


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_matches_go(case):
    expected = EXPECTED[case["name"]]
    if "output" in expected:
        assert _render(case) == expected["output"]
        return
    with pytest.raises(TemplateError) as info:
        _render(case)
    line, col, message = _normalise_go_error(expected["error"])
    ours = _OURS.fullmatch(str(info.value))
    if line == 0:   # not a positioned Go error (e.g. Ollama's own checks)
        assert message in str(info.value)
        return
    assert ours, str(info.value)
    assert int(ours[1]) == line
    if col is not None:
        assert int(ours[2]) == col
    # Go names the static type ("interface {}") where a value came out of a map
    assert ours[3] == message.replace("in type interface {}", "in type string")


def test_expected_outputs_are_current(tmp_path):
    """Re-run the Go harness: the committed expectations must be what Go prints today."""
    if shutil.which("go") is None:
        pytest.fail("the Go toolchain is needed to re-check tests/data/templates/expected.json:"
                    " apt-get install golang-go (Debian/Ubuntu) or see https://go.dev/dl")
    go_dir = Path(__file__).parents[2] / "go"
    run = subprocess.run(
        ["go", "run", ".", str(DATA / "cases.json"), str(DATA)],
        cwd=go_dir, capture_output=True, text=True, timeout=300,
        env={**os.environ, "GOCACHE": str(tmp_path / "cache")},
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == EXPECTED
