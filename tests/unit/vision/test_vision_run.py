"""Images end to end: `lantern run --image` on a vision model from the store in both
layouts (Ollama's single qwen25vl file; llama.cpp's qwen2vl text + projector layer), the
vision capability in `lantern show`, and KV reuse across turns with an image in history."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.chat.events import DoneEvent
from engine.chat.options import Options
from engine.cli import main
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.store import Store
from engine.vision.preprocess import preprocess
from tests.fixtures.synthetic_gguf import write_model, write_qwen2vl_pair

TEMPLATE = Path(__file__).parents[2] / "data" / "templates" / "qwen2.5vl.gotmpl"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vision-store")
    files = tmp_path_factory.mktemp("vision-files")
    inline = write_model(files / "vl.gguf", "qwen25vl", seed=7)
    text, projector = write_qwen2vl_pair(files / "text.gguf", files / "mmproj.gguf", seed=8)
    models = str(root / "models")
    assert main(["import", str(inline), "tiny-vl:inline", "--template", str(TEMPLATE),
                 "--models-dir", models]) == 0
    assert main(["import", str(text), "tiny-vl:split", "--projector", str(projector),
                 "--template", str(TEMPLATE), "--models-dir", models]) == 0
    # no template layer: the GGUF's own (text-only, string concatenating) chat template
    assert main(["import", str(inline), "tiny-vl:jinja", "--models-dir", models]) == 0
    return root / "models"


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("img") / "photo.png"
    Image.fromarray(rng.integers(0, 255, (90, 130, 3), dtype=np.uint8)).save(path)
    return path


@pytest.mark.parametrize("name", ["tiny-vl:inline", "tiny-vl:split"])
def test_show_reports_vision(store, name, capsys):
    assert main(["show", name, "--json", "--models-dir", str(store)]) == 0
    assert "vision" in json.loads(capsys.readouterr().out)["capabilities"]


@pytest.mark.parametrize("name", ["tiny-vl:inline", "tiny-vl:split", "tiny-vl:jinja"])
def test_run_with_image_streams_jsonl(store, photo, name, capsys):
    code = main(["run", name, "describe this", "--image", str(photo), "--format", "jsonl",
                 "--num-predict", "3", "--temperature", "0", "--models-dir", str(store)])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert lines[-1]["done"] is True
    grid = preprocess(photo).grid
    n_pads = grid[1] * grid[2] // 4
    assert lines[-1]["prompt_eval_count"] > n_pads   # the image's rows were prefilled


def test_follow_up_turn_reuses_the_image_rows(store, photo):
    model = load_model(Store.open(store).get("tiny-vl:inline"), num_ctx=1024)
    chat = LocalSession(model, Options(temperature=0, num_predict=3))
    image = preprocess(photo)
    *_, first = chat.send("what is this?", (image,))
    assert isinstance(first, DoneEvent)
    *_, second = chat.send("and the colours?")
    assert second.prompt_eval_count < first.prompt_eval_count
    assert len(chat.last_prompt) > first.prompt_eval_count
    assert chat.last_prompt.positions.shape[0] == 3        # M-RoPE positions for the history
    assert chat.last_prompt.next_position < len(chat.last_prompt)  # images compress positions


def test_a_broken_image_is_a_clear_error(store, tmp_path, capsys):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    code = main(["run", "tiny-vl:inline", "hi", "--image", str(bad), "--models-dir", str(store)])
    assert code == 1
    err = capsys.readouterr().err
    assert "bad.png" in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["tiny-vl:inline", "tiny-vl:split"])
def test_inspect_with_image_lays_attention_over_the_patches(store, photo, name, capsys):
    assert main(["inspect", name, "what is this?", "--image", str(photo), "--json",
                 "--exact", "--models-dir", str(store)]) == 0
    result = json.loads(capsys.readouterr().out)
    grid = preprocess(photo).grid
    [image] = result["images"]
    assert (image["height"], image["width"]) == (grid[1] // 2, grid[2] // 2)  # merged patches
    row = result["position"]
    assert len(result["attention"][0][0]) == row + 1
    assert main(["inspect", name, "hi", "--image", str(photo), "--raw",
                 "--models-dir", str(store)]) == 1
    assert "--raw" in capsys.readouterr().err
