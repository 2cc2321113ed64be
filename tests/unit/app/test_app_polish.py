"""Small things a user notices: titles never end in ".…", Send waits for a message, an
info banner goes by itself, a warning about images goes with the images."""

from app.chat import banner as banner_module
from app.chat.banner import Banner
from app.chat.conversation import title_of
from app.chat.input_box import InputBox


def test_a_cut_title_does_not_end_in_punctuation_and_an_ellipsis():
    title = title_of("Explain this. " * 10, ())
    assert title.endswith("…") and not title.endswith(".…") and len(title) <= 48


def test_send_waits_for_something_to_send(qtbot):
    box = InputBox()
    qtbot.addWidget(box)
    box.set_ready(True)
    assert not box.send_button.isEnabled()
    box.editor.setPlainText("hi")
    assert box.send_button.isEnabled()
    box.editor.setPlainText("   ")
    assert not box.send_button.isEnabled()
    box.set_busy(True)
    assert box.send_button.isEnabled()                  # Stop


def test_an_info_goes_by_itself_an_error_stays(qtbot, monkeypatch):
    monkeypatch.setattr(banner_module, "INFO_SECONDS", 0.05)
    banner = Banner()
    qtbot.addWidget(banner)
    banner.show_message("info", "Imported.")
    qtbot.waitUntil(lambda: banner.isHidden(), timeout=2000)
    banner.show_message("error", "Broken.")
    qtbot.wait(200)
    assert banner.isVisible() and banner.level == "error"


def test_editing_the_first_message_renames_an_auto_titled_chat(qtbot, tmp_path):
    from app.conversations.history import History
    from app.settings.store import Settings
    from app.window import MainWindow
    from engine.catalog.importer import import_gguf
    from engine.store import Store
    from tests.fixtures.synthetic_gguf import write_model
    from tests.unit.app.chat.test_app_chat import load, send

    root = tmp_path / "models"
    import_gguf(Store.open(root), write_model(tmp_path / "t.gguf", "qwen2"), "tiny")
    window = MainWindow(Settings(models_dir=str(root), options={"num_predict": 2}),
                        History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    load(qtbot, window, "tiny:latest")
    controller = window.controller
    with qtbot.waitSignal(controller.answerDone, timeout=60_000):
        send(window, "Wrong question")
    with qtbot.waitSignal(controller.answerDone, timeout=60_000):
        controller.edit_last_user("Right question")
    assert window.history.conversation(controller.conversation_id).title == "Right question"
    window.history.rename(controller.conversation_id, "Mine")
    with qtbot.waitSignal(controller.answerDone, timeout=60_000):
        controller.edit_last_user("Third")
    assert window.history.conversation(controller.conversation_id).title == "Mine"


def test_chart_axis_labels_get_the_room_they_need(qtbot):
    from PySide6.QtGui import QColor

    from app.inspector.charts import LineChart, Series

    chart = LineChart("p")
    qtbot.addWidget(chart)
    chart.resize(300, 150)
    chart.set_series([Series("p", [8.8e-05, 0.00378, 0.5], QColor("red"))])
    widest = chart.fontMetrics().horizontalAdvance("8.8e-05")      # the bottom label
    assert chart._plot().left() >= widest + 4


def test_every_panel_tab_stays_in_sight_when_narrow(qtbot):
    from app.inspector.panel import MIN_WIDTH, DebugPanel

    panel = DebugPanel()
    qtbot.addWidget(panel)
    panel.resize(320, 600)                 # the narrowest it goes
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.width() == MIN_WIDTH
    buttons = panel.page_buttons.buttons()
    assert panel.tabs.tabBar().isHidden() and len(buttons) == panel.tabs.count()
    for button in buttons:                 # every page's name whole, none out of sight
        assert button.isVisible() and button.width() >= button.sizeHint().width()
        assert button.geometry().right() <= panel.page_buttons.width()
    buttons[6].click()
    assert panel.tabs.currentWidget() is panel.opinion and buttons[6].isChecked()
    panel.tabs.setCurrentIndex(2)
    assert buttons[2].isChecked() and not buttons[6].isChecked()


def test_the_sampler_reasons_fit_the_narrowest_panel(qtbot):
    """At its narrowest (a screen under 1280 pixels wide, a short one: the Token page
    scrolls) the panel shows the reasons' every column without a scroll bar, "cut by"
    wide enough for one filter's name."""
    from app.inspector.panel import CELL_PADDING, DebugPanel

    panel = DebugPanel()
    qtbot.addWidget(panel)
    panel.resize(320, 500)
    panel.show()
    qtbot.waitExposed(panel)
    table = panel.reasons_table
    header = table.horizontalHeader()
    qtbot.waitUntil(lambda: header.length() > 0)
    assert header.length() <= table.viewport().width()
    assert table.horizontalScrollBar().maximum() == 0
    cut_by = [panel.reasons_model.columns[i].header for i in range(header.count())].index("cut by")
    assert header.sectionSize(cut_by) >= \
        table.fontMetrics().horizontalAdvance("top_p") + CELL_PADDING


def test_a_piece_no_font_can_draw_shows_its_code_point(qtbot):
    from app.inspector.rows import visible_piece

    # U+10FFFD is a private-use code point no font draws; é is in every text font
    assert visible_piece(" caf\u00e9\U0010fffd") == "·café<U+10FFFD>"
    assert visible_piece("a\x01\tb\n") == "a<U+0001>⇥b⏎"          # a control character too
