"""The sidebar's model details say what `lantern show` (and Ollama) say."""

from dataclasses import replace

from app.models.list_model import described_entry, listed_entry
from engine.store import Store
from engine.store.describe import details
from engine.store.importer import import_gguf
from tests.fixtures.synthetic_gguf import TextSpec, write_model


def test_parameter_size_is_the_stores_own_figure(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    gguf = write_model(tmp_path / "t.gguf", "qwen2", TextSpec(tie_embeddings=False))
    import_gguf(Store.open(root), gguf, "tiny")
    model = Store.open(root).get("tiny")
    entry = described_entry(listed_entry(model))
    assert entry.checked and entry.parameter_size == details(model)["parameter_size"] != ""
    # a pulled model's config blob names Ollama's count (a tied embedding counted once),
    # which the GGUF's tensors would exceed when they store the embedding twice
    pulled = replace(listed_entry(model), parameter_size="494.03M")
    assert described_entry(pulled).parameter_size == "494.03M"
