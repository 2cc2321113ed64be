"""`lantern compare`: two tiny random-weight Qwen2 models teacher-forced over one text;
each token's log-probability under either equals HF transformers' on the same GGUF, and
the marked tokens are the largest disagreements."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.cli import main
from tests.fixtures.synthetic_gguf import TextSpec, write_model

TEXT = "Hello world, the thing is the thing"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    return [write_model(folder / f"m{seed}.gguf", "qwen2", TextSpec(layers=2), std=0.2,
                        seed=seed) for seed in (5, 6)]


def hf_logprobs(path, ids: list[int]) -> np.ndarray:
    hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                              dtype=torch.float32).eval()
    with torch.no_grad():
        logits = hf(torch.tensor([ids])).logits[0].double()
    return torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), ids[1:]].numpy()


def test_compare_json_equals_hf_and_marks_the_largest(pair, capsys):
    assert main(["compare", str(pair[0]), str(pair[1]), TEXT, "--raw", "--json",
                 "--marked", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows, ids = out["tokens"], out["ids"]
    assert [r["id"] for r in rows] == ids[1:] and len(ids) > 5
    for key, path in (("logprob_a", pair[0]), ("logprob_b", pair[1])):
        np.testing.assert_allclose([r[key] for r in rows], hf_logprobs(path, ids),
                                   atol=1e-4, rtol=0)
    delta = np.array([r["delta"] for r in rows])
    assert np.abs(delta).max() > 0.1        # two different models do disagree
    largest = [int(i) + 1 for i in np.argsort(-np.abs(delta))[:3]]
    assert out["largest"] == largest
    assert [r["position"] for r in rows if r["marked"]] == sorted(largest)


def test_a_model_against_itself_agrees_everywhere(pair, capsys):
    assert main(["compare", str(pair[0]), str(pair[0]), TEXT, "--raw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(r["delta"] == 0 for r in out["tokens"]) and out["mean_abs_delta"] == 0
    assert main(["compare", str(pair[0]), str(pair[1]), TEXT, "--raw"]) == 0
    text = capsys.readouterr().out
    assert "Δ (B - A)" in text and text.count("<-- largest") == 5
    assert text.count("\n") == 1 + len(out["tokens"])
