"""``lantern tokenize``: a GGUF path or a store name, text from the argument or stdin."""

import io
import json

from engine.cli import main
from tests.fixtures.stores import StoreBuilder
from tests.unit.tokenizer.test_tokenizer_synthetic import ID, write_vocab_gguf


def run_json(capsys, *argv: str) -> dict:
    assert main(["tokenize", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_tokenize_gguf_path(tmp_path, capsys):
    path = write_vocab_gguf(tmp_path / "m.gguf")
    out = run_json(capsys, str(path), "hello world")
    assert out == {"ids": [ID["hello"], ID["Ġworld"]], "pieces": ["hello", " world"]}


def test_control_tokens_need_special_flag(tmp_path, capsys):
    path = str(write_vocab_gguf(tmp_path / "m.gguf"))
    assert ID["<|im_end|>"] not in run_json(capsys, path, "<|im_end|>")["ids"]
    assert run_json(capsys, path, "<|im_end|>", "--special")["ids"] == [ID["<|im_end|>"]]


def test_tokenize_store_name_and_stdin(tmp_path, capsys, monkeypatch):
    store = StoreBuilder(tmp_path / "models")
    store.add("tiny:1b", model=write_vocab_gguf(tmp_path / "m.gguf"))
    monkeypatch.setattr("sys.stdin", io.StringIO("hello"))
    assert main(["tokenize", "tiny:1b", "--models-dir", str(store.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f'{ID["hello"]}  "hello"', "1 token"]


def test_unknown_model_is_one_line_error(tmp_path, capsys):
    StoreBuilder(tmp_path / "models")
    assert main(["tokenize", "nope", "x", "--models-dir", str(tmp_path / "models")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1 and "nope" in err
