"""The model list's second line: what each model is (family, size, quantization; vision
has its badge) and, for one that cannot run, why, on the same line."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.models.list_model import ModelListModel, described_entry, listed_entry
from engine.store import Store
from tests.fixtures.stores import StoreBuilder
from tests.fixtures.synthetic_gguf import TextSpec, write_model


def entries(tmp_path):
    builder = StoreBuilder(tmp_path / "models")
    for name, arch, overrides in (
        ("gemma:test", "gemma3", None),
        ("gemma2:test", "gemma2", None),
        ("qwen-vl:test", "qwen25vl", None),
        ("t5-vocab:test", "qwen2", {"tokenizer.ggml.model": "t5"}),
        ("mislabelled:test", "qwen2", {"tokenizer.ggml.model": "llama"}),
        ("unknown:test", "qwen2", {"general.architecture": "mamba"}),
    ):
        path = write_model(tmp_path / f"{name.split(':')[0]}.gguf", arch,
                           TextSpec(tie_embeddings=arch.startswith("gemma")), overrides=overrides)
        builder.add(name, path, config={"model_format": "gguf", "model_family": arch,
                                        "model_type": "1.2M", "file_type": "F32"})
    store = Store.open(tmp_path / "models")
    return {m.name.display: described_entry(listed_entry(m)) for m in store.list()}


def test_one_line_says_what_each_model_is_and_why_it_cannot_run(tmp_path):
    found = entries(tmp_path)
    gemma, vision = found["gemma:test"], found["qwen-vl:test"]
    assert gemma.runnable and gemma.family == "gemma3" and not gemma.vision
    assert gemma.line == gemma.details and "gemma3" in gemma.line and "F32" in gemma.line
    gemma2 = found["gemma2:test"]  # Gemma 2 runs: listed as what it is, not greyed out
    assert gemma2.runnable and gemma2.family == "gemma2" and gemma2.line == gemma2.details
    assert vision.runnable and vision.vision
    for name, why in (("t5-vocab:test", "unsupported tokenizer 't5'"),
                      ("mislabelled:test", "tokenizer.ggml.model says llama"),
                      ("unknown:test", "architecture 'mamba': Lantern does not run")):
        entry = found[name]
        assert not entry.runnable, name
        assert entry.line.startswith(entry.details + " — ") and why in entry.line, entry.line
        assert str(tmp_path) not in entry.line  # paths cut to file names


def test_the_list_model_shows_the_line_and_disables_what_cannot_run(qtbot, tmp_path):
    model = ModelListModel()
    model.set_entries(sorted(entries(tmp_path).values(), key=lambda e: e.name))
    rows = {model.index(r).data(): model.index(r) for r in range(model.rowCount())}
    assert rows["gemma:test"].flags() & Qt.ItemIsEnabled
    assert rows["gemma2:test"].flags() & Qt.ItemIsEnabled
    broken = rows["t5-vocab:test"]
    assert not broken.flags() & Qt.ItemIsEnabled
    assert "qwen2" in broken.data(ModelListModel.DetailsRole)
    assert "'t5'" in broken.data(ModelListModel.DetailsRole)
