"""`lantern debug --llama-layers --image` and `lantern inspect --llama --image` on a tiny
random-weight Qwen2.5-VL imported with its projector: llama.cpp reads the picture and both
views agree with the reference, the picture's rows named; so does a Qwen2.5-VL whose tower
sits inside its GGUF (re-laid for llama.cpp); another one-file tower (Gemma 3) is refused with
the reason and the command that imports it the other way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.catalog.importer import import_gguf
from engine.cli import main
from engine.inspect.llama_layers import TOLERANCE
from engine.inspect.llama_pictures import INSIDE
from engine.remote.crosscheck import TOLERANCE as LOGPROB_TOLERANCE
from engine.store import Store
from tests.fixtures.hf_vision import tiny_hf_model, write_pair
from tests.unit.cli.test_trace_image_cli import NAME as INLINE_NAME
from tests.unit.cli.test_trace_image_cli import TEMPLATE
from tests.unit.cli.test_trace_image_cli import store as inline_store  # noqa: F401 (a fixture)
from tests.unit.vision.test_gemma3_vision import (
    TEMPLATES,
)

NAME = "tiny-vl-pair:latest"
QUESTION = "What is in this picture?"


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("llama-vl")
    text, projector = write_pair(tiny_hf_model(seed=5), folder / "t.gguf", folder / "mmproj.gguf")
    import_gguf(Store.open(folder / "models"), text, NAME, projector=projector,
                template=TEMPLATE.read_text(encoding="utf-8"))
    photo = folder / "photo.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (300, 420, 3), dtype=np.uint8)
                    ).save(photo)
    return folder / "models", photo


def test_layers_and_second_opinion_over_an_image(pair_store, capsys):
    models, photo = pair_store
    base = [NAME, QUESTION, "--models-dir", str(models), "--image", str(photo)]
    assert main(["debug", *base, "--llama-layers", "--json"]) == 0
    layers = json.loads(capsys.readouterr().out)
    [[start, stop]] = layers["pictures"]
    assert 0 < start < stop < layers["tokens"] and layers["first_off"] is None
    assert all(row["relative"] <= TOLERANCE for row in layers["layers"])
    assert main(["inspect", *base, "--llama", "--json"]) == 0
    opinion = json.loads(capsys.readouterr().out)["second_opinion"]
    assert opinion["picture_rows"] == list(range(start - 1, stop - 1))
    scored = [d for d in opinion["delta_logprob"] if d is not None]
    assert len(scored) == layers["tokens"] - 1 - (stop - start)
    assert max(scored) == opinion["max_delta_logprob"] < LOGPROB_TOLERANCE
    assert main(["inspect", *base, "--llama"]) == 0
    assert f"(not the {stop - start} whose next token is a picture's)" in \
        capsys.readouterr().out


def test_a_one_file_qwen25vl_is_read_by_llama_cpp(inline_store, capsys):  # noqa: F811
    models, photo = inline_store
    assert main(["debug", INLINE_NAME, QUESTION, "--models-dir", str(models), "--image",
                 str(photo), "--llama-layers", "--json"]) == 0
    layers = json.loads(capsys.readouterr().out)
    [[start, stop]] = layers["pictures"]
    assert 0 < start < stop < layers["tokens"] and layers["first_off"] is None
    assert all(row["relative"] <= TOLERANCE for row in layers["layers"])
    assert main(["inspect", INLINE_NAME, QUESTION, "--models-dir", str(models), "--image",
                 str(photo), "--llama", "--json"]) == 0
    opinion = json.loads(capsys.readouterr().out)["second_opinion"]
    assert opinion["picture_rows"] == list(range(start - 1, stop - 1))
    assert opinion["max_delta_logprob"] < LOGPROB_TOLERANCE


def test_another_tower_inside_the_gguf_is_refused(gemma, tmp_path, capsys):  # noqa: F811
    models, picture = str(tmp_path / "models"), tmp_path / "p.png"
    gemma.picture.save(picture)
    assert main(["import", str(gemma.models["inline"].path), "g3:inline", "--template",
                 str(TEMPLATES / "gemma3-instruct.gotmpl"), "--models-dir", models]) == 0
    capsys.readouterr()
    assert main(["debug", "g3:inline", QUESTION, "--models-dir", models, "--image",
                 str(picture), "--llama-layers"]) == 1
    err = capsys.readouterr().err
    assert INSIDE in err and "--projector MMPROJ.gguf" in err and err.count("\n") == 1
