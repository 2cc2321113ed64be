"""The drafted mark in the window: with speculative decoding on, tokens kept from a draft
are underlined in the token view with "drafted" in their tooltip, the panel says so, and
the status bar reports drafted / accepted counts."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor

from app.chat.view import TOKEN_PROPERTY
from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from tests.unit.app.chat.test_app_chat import TIMEOUT_MS, load, send, tiny_store  # noqa: F401 (fixture)


def char_formats(widget):
    """(token index, QTextCharFormat) of every token span in a message's token view."""
    document = widget._blocks[0].document()
    cursor = QTextCursor(document)
    seen = {}
    for position in range(1, document.characterCount()):
        cursor.setPosition(position)
        fmt = cursor.charFormat()
        index = fmt.property(TOKEN_PROPERTY)
        if index is not None and index not in seen:
            seen[index] = fmt
    return seen


def open_window(qtbot, tmp_path, store, speculate: str, num_predict: int) -> MainWindow:
    settings = Settings(models_dir=str(store), speculate=speculate,
                        options={"temperature": 0, "num_predict": num_predict})
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    load(qtbot, window, "tiny:latest")
    return window


def test_drafted_tokens_are_marked(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = open_window(qtbot, tmp_path, tiny_store, "ngram", 40)
    tokens = []
    window.controller.token.connect(tokens.append)
    notices = []
    window.controller.notice.connect(notices.append)
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        send(window, "the cat is on the mat " * 6)
    event = done.args[0]
    # a fast-mode model on the CPU: speculation cannot change its answer, nothing to say
    assert not window.controller.model.exact
    assert not [n for n in notices if "differ" in n]
    drafted = [t.index for t in tokens if t.drafted]
    assert event.draft_count > 0 and len(drafted) == event.draft_accepted > 0
    assert f"drafted {event.draft_count}, accepted {event.draft_accepted}" in \
        window.status_speed.text()

    answer = window.chat.view.messages[-1]
    answer.set_color_tokens(True)
    formats = char_formats(answer)
    for index, fmt in formats.items():
        assert fmt.fontUnderline() == (index in drafted), f"token {index}"
        assert ("drafted" in fmt.toolTip()) == (index in drafted)
    assert set(drafted) <= set(formats)

    window.panel.show_token(tokens[drafted[0]], latest=False)
    assert "drafted" in window.panel.token_title.text()
    window.panel.show_token(next(t for t in tokens if not t.drafted), latest=False)
    assert "drafted" not in window.panel.token_title.text()


def test_auto_drafts_for_a_fast_mode_model(qtbot, tmp_path, tiny_store):  # noqa: F811
    """The default (auto, fast mode): prompt lookup runs, and the answer is the one
    speculation off gives."""
    answers = {}
    for speculate in ("auto", "off"):
        window = open_window(qtbot, tmp_path, tiny_store, speculate, 40)
        with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
            send(window, "the cat is on the mat " * 6)
        answers[speculate] = done.args[0]
        window.close()
    assert answers["auto"].draft_count > 0 and answers["off"].draft_count == 0
    assert answers["auto"].text == answers["off"].text
