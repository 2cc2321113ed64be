"""`lantern trace --image`: both texts go with the image (a tiny random-weight Qwen2.5-VL
in a store); --json equals engine.inspect.tracing over the same prompts, the image's
patches in square groups; --noise without --corrupt traces the same question over the
noised picture; the printed map has a line per patch group; a text-only model is told it
cannot read images, --noise without an image what it needs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.catalog.importer import import_gguf
from engine.chat.messages import Message
from engine.cli import main
from engine.cli.run_command import resolve_source
from engine.inspect.occlusion import fitting_patch_group
from engine.inspect.tracing import IMAGE_COLUMNS, noised, trace
from engine.runtime.loader import load_model
from engine.store import Store
from engine.vision.preprocess import MAX_PIXELS
from tests.fixtures.synthetic_gguf import write_model

NAME = "tiny-vl:latest"
TEMPLATE = Path(__file__).parents[2] / "data" / "templates" / "qwen2.5vl.gotmpl"
CLEAN, CORRUPT = "What is in this picture?", "What is in that picture?"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("trace-vl")
    gguf = write_model(folder / "vl.gguf", "qwen25vl", seed=7)
    import_gguf(Store.open(folder / "models"), gguf, NAME,
                template=TEMPLATE.read_text(encoding="utf-8"))
    photo = folder / "photo.png"
    pixels = np.random.default_rng(0).integers(0, 255, (300, 420, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(photo)
    return folder / "models", photo


def args(store, *more: str) -> list[str]:
    models, photo = store
    return ["trace", NAME, "--models-dir", str(models), "--clean", CLEAN, "--corrupt", CORRUPT,
            "--image", str(photo), *more]


def test_trace_image_json_equals_the_engine(store, capsys):
    assert main(args(store, "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    model = load_model(resolve_source(NAME, str(store[0])))
    image = model.prepare_image(str(store[1]), MAX_PIXELS)
    clean, corrupt = (model.tokenize_chat([Message("user", t, (image,))]) for t in (CLEAN, CORRUPT))
    group = fitting_patch_group(clean, len(clean), IMAGE_COLUMNS)
    direct = trace(model.gguf, clean, corrupt, patch_group=group)
    np.testing.assert_allclose(out["restored"], direct.restored, atol=1e-12)
    assert out["units"] == [list(u) for u in direct.units] and out["patch_group"] == group > 1
    [grid] = out["images"]
    assert grid == direct.images[0].to_json() and out["clean"][grid["start"]] == \
        out["corrupt"][grid["start"]]
    assert len(out["units"]) < len(out["clean"])        # the patches went in groups


def test_noise_traces_the_same_question_over_a_noised_picture(store, capsys):
    models, photo = store
    assert main(["trace", NAME, "--models-dir", str(models), "--clean", CLEAN,
                 "--image", str(photo), "--noise", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clean"] == out["corrupt"]                    # the same words
    model = load_model(resolve_source(NAME, str(models)))
    image = model.prepare_image(str(photo), MAX_PIXELS)
    clean, corrupt = (model.tokenize_chat([Message("user", CLEAN, (p,))])
                      for p in (image, noised(image)))
    direct = trace(model.gguf, clean, corrupt, patch_group=out["patch_group"])
    np.testing.assert_allclose(out["restored"], direct.restored, atol=1e-12)
    [grid] = out["images"]
    stop = grid["start"] + grid["height"] * grid["width"]
    patches = [n for n, unit in enumerate(out["units"]) if grid["start"] <= unit[0] < stop]
    assert np.abs(np.array(out["restored"])[:, patches]).max() > 1e-3   # the picture carries it


def test_noise_needs_an_image(store, capsys):
    assert main(["trace", NAME, "--models-dir", str(store[0]), "--clean", CLEAN,
                 "--noise"]) == 1
    assert "--image" in capsys.readouterr().err


def test_trace_image_prints_a_line_per_patch_group(store, capsys):
    assert main(args(store, "--patch-group", "4")) == 0
    text = capsys.readouterr().out
    assert " img 1 r0-3 c0-3 " in text and "most restored" in text
    lines = [line for line in text.splitlines() if " img 1 " in line]
    assert len(lines) == len({line.split()[0] for line in lines}) > 1


def test_a_text_model_is_told_it_cannot_read_the_image(tmp_path, store, capsys):
    path = write_model(tmp_path / "text.gguf", "qwen2", seed=3)
    assert main(["trace", str(path), "--clean", "a b", "--corrupt", "a c",
                 "--image", str(store[1])]) == 1
    assert "cannot read images" in capsys.readouterr().err
