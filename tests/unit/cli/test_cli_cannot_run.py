"""``lantern list`` and ``lantern run`` on models Lantern cannot run: listed with what they
are and why, refused with the reason and what to do, never a traceback."""

import pytest

from engine.cli import main
from tests.fixtures.stores import CANNOT_RUN, StoreBuilder, mixed_store
from tests.fixtures.synthetic_gguf import write_model, write_projector


@pytest.fixture
def models(tmp_path):
    mixed_store(tmp_path / "models", tmp_path / "scratch")
    return str(tmp_path / "models")


def test_list_shows_every_model_and_notes_those_lantern_cannot_run(capsys, models):
    assert main(["list", "--models-dir", models]) == 0
    out, err = capsys.readouterr()
    assert err == ""                     # none of them is damaged
    table, _, notes = out.partition("\n\nLantern cannot run 4 of these:\n")
    names = [line.split()[0] for line in table.splitlines()[1:]]
    assert names == ["tiny:latest", *CANNOT_RUN]          # newest first, as Ollama lists
    noted = {line.split()[0]: line for line in notes.splitlines()[:-1]}
    assert set(noted) == set(CANNOT_RUN)
    for name, word in CANNOT_RUN.items():
        assert word in noted[name]
        assert "blobs" not in noted[name]                  # the name says which, not a path
    assert "an MLX model (qwen3, safetensors weights, mxfp8)" in noted["qwen3-mlx:8b"]
    assert "embedding model (GGUF, architecture 'nomic-bert')" in \
        noted["nomic-embed-text:latest"]
    assert notes.splitlines()[-1] == "Run those with `ollama run`; `lantern run` takes the others."


@pytest.mark.parametrize("name", list(CANNOT_RUN))
def test_run_refuses_with_the_reason_and_what_to_do(capsys, models, name):
    assert main(["run", name, "hello", "--models-dir", models]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"Error: {name}: ") and len(err.splitlines()) == 1  # no traceback
    assert "blobs" not in err                        # the model by its name, not its blob
    assert CANNOT_RUN[name] in err
    assert err.rstrip().endswith("(run it with `ollama run`; lantern list notes the models "
                                 "Lantern cannot run)")


def test_list_opens_a_model_of_a_family_it_runs_when_a_projector_comes_with_it(capsys,
                                                                               tmp_path):
    # the config blob says "llama", which Lantern runs, but not with a separate projector
    builder = StoreBuilder(tmp_path / "models")
    config = {"model_format": "gguf", "model_family": "llama", "model_type": "1M"}
    builder.add("paired", write_model(tmp_path / "t.gguf", "llama"), config=config,
                projector=write_projector(tmp_path / "mmproj.gguf"))
    builder.add("plain", write_model(tmp_path / "p.gguf", "llama"), config=config)
    assert main(["list", "--models-dir", str(builder.root)]) == 0
    notes = capsys.readouterr().out.partition("Lantern cannot run 1 of these:\n")[2]
    assert notes.split()[0] == "paired:latest" and "projector" in notes.splitlines()[0]
