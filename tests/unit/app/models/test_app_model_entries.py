"""The sidebar's models: their details say what `lantern show` (and Ollama) say, and on a
first start with several one is loaded, with a note saying why."""

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.conversations.history import History
from app.models.list_model import described_entry, listed_entry
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.describe import details
from engine.catalog.importer import import_gguf
from engine.store import Store
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


@pytest.fixture
def two_models(tmp_path) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    store = Store.open(root)
    import_gguf(store, write_model(tmp_path / "big.gguf", "qwen2", TextSpec(hidden=128)), "big")
    import_gguf(store, write_model(tmp_path / "small.gguf", "qwen2"), "small")
    return root


def start(qtbot, tmp_path: Path, models: Path, history: History) -> MainWindow:
    window = MainWindow(Settings(models_dir=str(models)), history)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=60_000)
    return window


def test_first_start_with_several_models_loads_the_smallest_and_says_so(qtbot, tmp_path,
                                                                        two_models):
    window = start(qtbot, tmp_path, two_models, History(tmp_path / "h.sqlite3"))
    assert window.controller.model_name == "small:latest"
    assert window.sidebar.model_view.currentIndex().row() == window.models.row_of("small:latest")
    text = window.banner.text.text()
    assert "small:latest, the smallest of your 2 chat models" in text and "Ctrl+K" in text


def test_first_start_prefers_the_model_of_the_latest_conversation(qtbot, tmp_path, two_models):
    history = History(tmp_path / "h.sqlite3")
    history.create("Earlier", "small:latest")
    history.create("Latest", "big:latest")
    window = start(qtbot, tmp_path, two_models, history)
    assert window.controller.model_name == "big:latest"
    assert "most recent conversation" in window.banner.text.text()


def test_first_start_prefers_a_chat_model_to_a_smaller_base_model(qtbot, tmp_path):
    # gemma3:270m without a chat template was preselected as "the smallest" and got its
    # prompts as plain text; a chat model is the better start
    root = tmp_path / "models"
    store = Store.open(root)
    base = write_model(tmp_path / "base.gguf", "qwen2",
                       overrides={"tokenizer.chat_template": None})
    import_gguf(store, base, "base")
    import_gguf(store, write_model(tmp_path / "chat.gguf", "qwen2", TextSpec(hidden=128)),
                "chat")
    window = start(qtbot, tmp_path, root, History(tmp_path / "h.sqlite3"))
    assert window.controller.model_name == "chat:latest"
    assert "your only chat model" in window.banner.text.text()
    entry = window.models.entry(window.models.row_of("base:latest"))
    assert entry.completion_only and "completion only" in entry.details
    tooltip = window.models.data(window.models.index(window.models.row_of("base:latest")),
                                 Qt.ToolTipRole)
    assert "no chat template" in tooltip
    assert not window.models.entry(window.models.row_of("chat:latest")).completion_only
