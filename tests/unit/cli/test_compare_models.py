"""`lantern compare`: two tiny random-weight Qwen2 models teacher-forced over one text;
each token's log-probability under either equals HF transformers' on the same GGUF, and
the marked tokens are the largest disagreements. With --image, a tiny Qwen2.5-VL against
its quantized copy: both rows equal HF's over the picture, whose rows print as one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForCausalLM

from engine.catalog.importer import import_gguf
from engine.chat.prompt_tokens import PromptTokens
from engine.cli import main
from engine.gguf import open_model
from engine.store import Store
from engine.vision.preprocess import preprocess_for
from tests.fixtures.hf_vision import TEXT as TEXT_SPEC
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.unit.app.chat.test_app_images import TEMPLATE
from tests.unit.inspect.test_model_compare_images import pair as pair_vl  # noqa: F401
from tests.unit.vision.test_vision_prompt import hf_logits

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


# -- with an image: a tiny random-weight Qwen2.5-VL, F32 against its quantized copy ---------

@pytest.fixture(scope="module")
def vl_store(tmp_path_factory, pair_vl):  # noqa: F811
    root = tmp_path_factory.mktemp("vl-store") / "models"
    store = Store.open(root)
    template = TEMPLATE.read_text(encoding="utf-8")
    for name, (_, path) in zip(("vl-f32", "vl-q8"), pair_vl, strict=True):
        import_gguf(store, path, name, template=template)
    words = write_model(root.parent / "words.gguf", "qwen2", TEXT_SPEC)
    import_gguf(store, words, "words", template=template)
    return root


def test_compare_with_an_image_equals_hf(vl_store, pair_vl, tmp_path, capsys):  # noqa: F811
    photo = tmp_path / "photo.png"
    pixels = np.random.default_rng(3).integers(0, 255, (90, 120, 3), np.uint8)
    Image.fromarray(pixels).save(photo)
    dirs = ["--models-dir", str(vl_store)]
    assert main(["compare", "vl-f32", "vl-q8", "What is this?", "--image", str(photo),
                 "--json", *dirs]) == 0
    out = json.loads(capsys.readouterr().out)
    [grid] = out["images"]
    picture = preprocess_for(open_model(pair_vl[0][1]).config.vision, photo)
    assert grid["height"] * grid["width"] == picture.n_tokens > 4
    ids = out["ids"]
    rows = out["tokens"]
    assert [r["image"] for r in rows].count(True) == picture.n_tokens
    for key, (hf, _) in zip(("logprob_a", "logprob_b"), pair_vl, strict=True):
        logits = torch.from_numpy(hf_logits(hf, PromptTokens.text(ids), [picture])).double()
        expected = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), ids[1:]].numpy()
        np.testing.assert_allclose([r[key] for r in rows], expected, atol=2e-4, rtol=0)
    assert not any(r["marked"] for r in rows if r["image"]) and len(out["largest"]) == 5

    assert main(["compare", "vl-f32", "vl-q8", "What is this?", "--image", str(photo),
                 *dirs]) == 0
    printed = capsys.readouterr().out
    assert f"[image 1: {grid['height']} x {grid['width']} patches" in printed
    assert printed.count("\n") == 1 + 1 + len(rows) - picture.n_tokens  # one line per image
    assert main(["compare", "vl-f32", "words", "What is this?", "--image", str(photo),
                 *dirs]) == 1
    assert "words:latest has no vision" in capsys.readouterr().err
