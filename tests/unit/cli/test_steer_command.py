"""`lantern steer` writes a control vector from prompt files that reads back as llama.cpp
writes them, and `lantern run --control-vector FILE[:STRENGTH]` steers with it; a vector
for another model is one line naming why."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from gguf import GGUFReader

from engine.cli import build_parser, main
from engine.gguf import open_model
from engine.gguf.control_vector import write_control_vector
from engine.inspect.steering import make_control_vector, read_prompts
from engine.tokenizer import load_tokenizer
from tests.fixtures.synthetic_gguf import TextSpec, write_model

POSITIVE = "the sun is out\nHello world, a bright day\n\nthe\\tsky is blue\n"
NEGATIVE = "the rain is falling\nHello world, a dark night\nthe sky is grey\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("steer_cli") / "tiny.gguf", "qwen2",
                       TextSpec(vocab=400, layers=3), seed=5)


def test_steer_writes_the_mean_method_vector(tiny, tmp_path, capsys):
    (tmp_path / "pos.txt").write_text(POSITIVE)
    (tmp_path / "neg.txt").write_text(NEGATIVE)
    out = tmp_path / "bright.gguf"
    assert main(["steer", str(tiny), "--positive", str(tmp_path / "pos.txt"),
                 "--negative", str(tmp_path / "neg.txt"), "-o", str(out)]) == 0
    assert "2 directions of 64 values (3 prompt pairs)" in capsys.readouterr().out
    prompts = read_prompts(tmp_path / "pos.txt")
    assert prompts[2] == "the\tsky is blue"       # empty lines skipped, escapes read
    reader = GGUFReader(out)
    assert reader.fields["general.architecture"].contents() == "controlvector"
    assert reader.fields["controlvector.model_hint"].contents() == "qwen2"
    assert reader.fields["controlvector.layer_count"].contents() == 2
    expected = make_control_vector(open_model(tiny), load_tokenizer(tiny), prompts,
                                   read_prompts(tmp_path / "neg.txt"))
    for tensor in reader.tensors:
        np.testing.assert_array_equal(tensor.data, expected[int(tensor.name.split(".")[1])])


def test_run_with_a_control_vector_answers_otherwise(tiny, tmp_path, capsys):
    hidden = open_model(tiny).config.text.hidden_size
    rng = np.random.default_rng(0)
    write_control_vector(tmp_path / "v.gguf", {n: rng.standard_normal(hidden)
                                               for n in (1, 2)}, "qwen2")
    base = ["run", str(tiny), "Hello world", "--raw", "--temperature", "0",
            "--num-predict", "12"]
    assert main(base) == 0
    plain = capsys.readouterr().out
    assert main([*base, "--control-vector", f"{tmp_path / 'v.gguf'}:4", "--verbose"]) == 0
    captured = capsys.readouterr()
    assert "steered by v x4" in captured.err
    assert captured.out != plain
    assert main([*base, "--control-vector-scaled", str(tmp_path / "v.gguf"), "4"]) == 0
    assert capsys.readouterr().out == captured.out   # llama.cpp's spelling, the same answer
    assert main([*base, "--control-vector", f"{tmp_path / 'v.gguf'}:0"]) == 0
    assert capsys.readouterr().out == plain          # strength 0 steers nothing


def test_a_vector_for_another_model_is_one_line(tiny, tmp_path, capsys):
    write_control_vector(tmp_path / "wide.gguf", {1: np.ones(128, np.float32)}, "qwen2")
    assert main(["run", str(tiny), "Hi", "--raw", "--control-vector",
                 str(tmp_path / "wide.gguf")]) == 1
    err = capsys.readouterr().err
    assert "wide.gguf has 128 values per layer, this model's residual stream 64" in err
    assert err.count("\n") == 1


def test_steer_help_says_what_it_does():
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    text = sub.choices["steer"].format_help()
    assert "cvector-generator" in text and "--positive" in text and "-o OUT.gguf" in text
    assert "FILE[:STRENGTH]" in sub.choices["run"].format_help()
