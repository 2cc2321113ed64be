"""Engine errors say what is wrong in neutral words and name the remedy as a field; the
CLI adds the flag and the app the control that makes the choice."""

import ast
import re
from pathlib import Path

from app import hints as app_hints
from engine.cli import hints as cli_hints
from engine.cli import main
from engine.errors import InvalidName, LanternError, ModelNotFound, Remedy

ROOT = Path(__file__).resolve().parents[3]
# what only one front end can name: a flag, or a control of the window
FRONT_END_WORDS = re.compile(r"(^|\s)--[a-z]|check box|button|in the app|Settings|File →|"
                             r"type a message|pass a prompt")


def test_engine_errors_name_no_flag_and_no_control():
    offenders = []
    for path in (ROOT / "engine").rglob("*.py"):
        if path.parent.name == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                offenders += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {part.value!r}"
                    for part in ast.walk(node.exc)
                    if isinstance(part, ast.Constant) and isinstance(part.value, str)
                    and FRONT_END_WORDS.search(part.value)
                ]
    assert offenders == []


def test_every_remedy_has_a_flag():
    assert set(cli_hints.FLAGS) == set(Remedy)


def test_the_cli_and_the_app_phrase_the_remedy_their_way():
    error = ModelNotFound("no Ollama model store at /x", remedy=Remedy.MODELS_DIR)
    assert cli_hints.explain(error) == "no Ollama model store at /x (pass --models-dir)"
    assert app_hints.explain(error) == ("no Ollama model store at /x "
                                        "(File → Choose model folder…)")
    plain = InvalidName("http://x names a plain-http registry", remedy=Remedy.PLAIN_HTTP)
    assert app_hints.explain(plain) == str(plain)   # the app pulls over https only
    assert cli_hints.explain(LanternError("no remedy")) == "no remedy"
    empty = LanternError("the prompt is empty", remedy=Remedy.PROMPT)
    assert cli_hints.explain(empty) == "the prompt is empty (pass a PROMPT)"
    assert app_hints.explain(empty) == "the prompt is empty (type a message)"


def test_cli_errors_end_with_the_flag(tmp_path, capsys):
    models = str(tmp_path / "models")
    assert main(["pull", "http://127.0.0.1:9/library/tiny", "--models-dir", models]) == 1
    err = capsys.readouterr().err
    assert "allow plain http to pull over http (pass --insecure)" in err
    assert main(["list", "--models-dir", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "OLLAMA_MODELS or choose the folder of one" in err and "(pass --models-dir)" in err
