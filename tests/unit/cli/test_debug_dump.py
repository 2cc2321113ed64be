"""`lantern debug --dump / --against`: a dump read back names no layer; the same dump with
one layer's state perturbed names that layer, with the suspects its pattern points to."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.chat.messages import Message
from engine.cli import main
from engine.cli.run_command import resolve_source
from engine.gguf import open_model
from engine.reference import forward
from engine.reference.against import against as compare_dumps
from engine.reference.dump import Dump, read_dump, write_dump
from engine.runtime.loader import load_model
from engine.vision.preprocess import MAX_PIXELS
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.unit.cli.test_trace_image_cli import NAME as VL_NAME
from tests.unit.cli.test_trace_image_cli import store  # noqa: F401 (a fixture)
from tests.unit.reference.test_reference_hf import with_text

PROMPT = "Hello world, the thing"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dump")
    return write_model(folder / "qwen2.gguf", "qwen2", TextSpec(layers=3), std=0.2, seed=2)


@pytest.fixture
def dump(tiny, tmp_path, capsys):
    folder = tmp_path / "dump"
    assert main(["debug", str(tiny), PROMPT, "--raw", "--dump", str(folder)]) == 0
    capsys.readouterr()
    return folder


def against(tiny, folder, capsys) -> tuple[int, str]:
    code = main(["debug", str(tiny), PROMPT, "--raw", "--against", str(folder)])
    return code, capsys.readouterr().out


def edit(folder, name: str, change) -> None:
    state = np.load(folder / name)
    np.save(folder / name, change(state))


def test_dump_holds_the_reference_and_reads_back_clean(tiny, dump, capsys):
    manifest = json.loads((dump / "manifest.json").read_text())
    assert manifest["format"] == "lantern-dump" and len(manifest["hidden_states"]) == 4
    ids = np.load(dump / "ids.npy")
    ref = forward(open_model(tiny), ids)
    for name, state in zip(manifest["hidden_states"], ref.hidden_states, strict=True):
        np.testing.assert_array_equal(np.load(dump / name), state)
    np.testing.assert_array_equal(np.load(dump / "logits.npy"), ref.logits)
    code, out = against(tiny, dump, capsys)
    assert code == 0 and "no layer is off" in out and "first off" not in out


def test_a_perturbed_layer_is_named(tiny, dump, capsys):
    def later_positions(state):
        state[1:] += 0.5 * np.abs(state).max()
        return state
    edit(dump, "hidden_002.npy", later_positions)
    code, out = against(tiny, dump, capsys)
    assert code == 1
    assert "layer 2 (blk.1) is the first off" in out and "RoPE style" in out


def test_a_scaled_layer_and_bad_embeddings_point_elsewhere(tiny, dump, tmp_path, capsys):
    edit(dump, "hidden_003.npy", lambda state: state * 1.5)
    code, out = against(tiny, dump, capsys)
    assert code == 1 and "layer 3 (blk.2) is the first off" in out
    assert "times 1.5" in out and "RoPE" not in out
    edit(dump, "hidden_000.npy", lambda state: state + 1.0)
    code, out = against(tiny, dump, capsys)
    assert code == 1 and "embeddings is the first off" in out and "token embeddings:" in out


def test_other_ids_and_broken_dumps_are_said(tiny, dump, capsys):
    code, out = main(["debug", str(tiny), "Hello", "--raw", "--against", str(dump)]), \
        capsys.readouterr().out
    assert code == 0 and "ids differ" in out and "no layer is off" in out
    (dump / "hidden_001.npy").unlink()
    assert main(["debug", str(tiny), PROMPT, "--raw", "--against", str(dump)]) == 1
    assert "hidden_001.npy (named in the manifest) cannot be read" in capsys.readouterr().err
    assert main(["debug", str(tiny), PROMPT, "--against", str(dump.parent)]) == 1
    assert "has no manifest.json" in capsys.readouterr().err


@pytest.mark.parametrize("change, names", [
    ({"rope_interleaved": True}, "RoPE style"),      # the classic llama-vs-NeoX mix-up
    ({"rms_eps": 1e-1}, "every position is off"),    # a wrong norm epsilon
])
def test_real_engine_bugs_point_to_their_suspects(tiny, dump, tmp_path, capsys, change, names):
    """An 'engine' that is the reference with one config mistake: named in block 1."""
    model = open_model(tiny)
    wrong = with_text(model, **change)
    ids = np.load(dump / "ids.npy")
    out = forward(wrong, ids)
    write_dump(tmp_path / "wrong", Dump("wrong", ids, out.hidden_states, out.logits))
    code, text = against(tiny, tmp_path / "wrong", capsys)
    assert code == 1 and "layer 1 (blk.0) is the first off" in text and names in text


def test_real_bugs_on_the_demo_model(demo_05b):
    """On the real 0.5B model (whose first token has huge activations): a RoPE mix-up,
    a wrong theta and a wrong norm epsilon are each named in block 1 with their suspects,
    and every later layer shows the error too."""
    model = open_model(demo_05b)
    ids = np.array([151644, 872, 198, 13048, 1052, 11, 1246, 525, 498, 30, 151645, 198])
    out = forward(model, ids)
    ours = Dump("ours", ids, out.hidden_states, out.logits)
    for change, names in (({"rope_interleaved": True}, "RoPE style"),
                          ({"rope_theta": 1e4}, "RoPE style"),
                          ({"rms_eps": 1e-3}, "every position is off")):
        wrong = forward(with_text(model, **change), ids)
        result = compare_dumps(ours, Dump("wrong", ids, wrong.hidden_states, wrong.logits))
        assert result.first_off == 1 and any(names in s for s in result.suspects), change
        assert all(row.relative > 1e-2 for row in result.rows[1:]), change


def test_dump_and_against_with_an_image(store, tmp_path, capsys):  # noqa: F811
    models, photo = store
    base = ["debug", VL_NAME, "What is in this picture?", "--models-dir", str(models),
            "--image", str(photo)]
    assert main([*base, "--dump", str(tmp_path / "d")]) == 0
    model = load_model(resolve_source(VL_NAME, str(models)))
    image = model.prepare_image(str(photo), MAX_PIXELS)
    prompt = model.tokenize_chat([Message("user", "What is in this picture?", (image,))])
    dump = read_dump(tmp_path / "d")
    np.testing.assert_array_equal(dump.ids, prompt.ids)
    np.testing.assert_allclose(dump.hidden_states[0][prompt.image_rows], prompt.image_embeds,
                               atol=1e-6)
    capsys.readouterr()
    assert main([*base, "--against", str(tmp_path / "d")]) == 0
    assert "no layer is off" in capsys.readouterr().out
    assert main(base) == 2
    assert "--image goes with --dump, --against or --llama-layers" in capsys.readouterr().err
