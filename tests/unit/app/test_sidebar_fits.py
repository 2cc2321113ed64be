"""The sidebar on a small screen (issue 38, item 11): a small store's models are listed
whole, not in a scrolling strip, and a long Ollama name keeps its family and size."""

from PySide6.QtGui import QFont, QFontMetrics

from app.sidebar import MODEL_ROWS_SHOWN, ROW_HEIGHT, elide_model_name


def test_a_long_name_keeps_family_size_and_quantization(qapp):
    metrics = QFontMetrics(QFont())
    name = "qwen2.5-coder:1.5b-instruct-q4_K_M"
    short = "qwen2.5-coder:1.5b-…-q4_K_M"
    assert elide_model_name(name, metrics, metrics.horizontalAdvance(name)) == name
    assert elide_model_name(name, metrics, metrics.horizontalAdvance(short)) == short
    shorter = "qwen2.5-coder:1.5b-…"
    assert elide_model_name(name, metrics, metrics.horizontalAdvance(shorter)) == shorter
    tiny = elide_model_name(name, metrics, 60)
    assert "…" in tiny and metrics.horizontalAdvance(tiny) <= 60


def test_the_model_list_is_as_tall_as_a_small_store(qtbot, tmp_path):
    from app.conversations.history import History
    from app.settings.store import Settings
    from app.window import MainWindow
    from engine.catalog.importer import import_gguf
    from engine.store import Store
    from tests.fixtures.synthetic_gguf import TextSpec, write_model

    root = tmp_path / "models"
    store = Store.open(root)
    gguf = write_model(tmp_path / "m.gguf", "qwen2", TextSpec(layers=1))
    for name in ("a:1b", "b:2b", "c:3b", "d:4b"):
        import_gguf(store, gguf, name)
    window = MainWindow(Settings(models_dir=str(root)), History(tmp_path / "h.sqlite3"),
                        auto_load=False)
    qtbot.addWidget(window)
    window.resize(1280, 600)
    window.show()
    qtbot.waitUntil(lambda: window.models.rowCount() == 4, timeout=30_000)
    view = window.sidebar.model_view
    qtbot.waitUntil(lambda: view.height() >= 4 * ROW_HEIGHT, timeout=5_000)
    assert view.verticalScrollBar().maximum() == 0          # no scrolling strip
    assert view.sizeHint().height() <= MODEL_ROWS_SHOWN * ROW_HEIGHT + 2 * view.frameWidth()
