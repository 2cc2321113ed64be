"""A bubble's header never widens the chat column: a long model name or note elides
(whole in the tooltip), and the other bubbles of the conversation keep their width, so
they do not lay their text out again (what made a model switch stall with a long chat).
The mouse over a bubble's token names that token, a click inspects it."""

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtGui import QTextCharFormat, QTextCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.chat.view import TOKEN_PROPERTY, AutoHeightBrowser, ChatView, MessageWidget

NOTE = "interrupted by the model switch, " * 4
NAME = "hf.co/someone/a-model-with-a-very-long-name-indeed-GGUF:Q4_K_M"


class Events(QObject):
    """What ``note`` says of each widget of ``kind`` that received an ``event_type`` event
    (installed on the application: every widget's events)."""

    def __init__(self, event_type: QEvent.Type, kind: type, note=lambda widget: widget) -> None:
        super().__init__()
        self.event_type, self.kind, self.note = event_type, kind, note
        self.seen: list = []

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == self.event_type and isinstance(watched, self.kind):
            self.seen.append(self.note(watched))
        return False


def test_a_long_header_elides_and_leaves_the_other_bubbles_alone(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(420, 600)
    for n in range(6):
        view.add(MessageWidget("user", "You", f"question {n}"))
        view.add(MessageWidget("assistant", "tiny", f"answer {n} " * 12))
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(50)
    widths = [w.width() for w in view.messages]
    resizes = Events(QEvent.Resize, AutoHeightBrowser)  # the text views resized
    QApplication.instance().installEventFilter(resizes)
    try:
        last = view.messages[-1]
        last.set_status(NOTE)
        named = view.add(MessageWidget("assistant", NAME, "short"))
        qtbot.wait(50)
    finally:
        QApplication.instance().removeEventFilter(resizes)
    assert [w.width() for w in view.messages[:-1]] == widths
    assert not any(b in resizes.seen for w in view.messages[:-2] for b in w._blocks)
    assert not view.horizontalScrollBar().isVisible()
    assert view.widget().width() <= view.viewport().width()
    assert last.status.text() == NOTE and NOTE in last.status.toolTip()
    name = named.findChild(type(last.status), "messageRole")
    assert name.text() == NAME and NAME in name.toolTip()
    assert name.width() < name.fontMetrics().horizontalAdvance(NAME)
    beside_note = last.findChild(type(last.status), "messageRole")     # the note elides first
    assert beside_note.width() >= beside_note.fontMetrics().horizontalAdvance("tiny")
    assert last.status.width() < last.status.fontMetrics().horizontalAdvance(NOTE)


def test_the_mouse_over_a_token_names_it_and_a_click_inspects_it(qtbot):
    browser = AutoHeightBrowser()
    qtbot.addWidget(browser)
    cursor = QTextCursor(browser.document())
    for index, text in enumerate(("first ", "second ", "third")):
        fmt = QTextCharFormat()
        fmt.setProperty(TOKEN_PROPERTY, index)
        cursor.insertText(text, fmt)
    browser.resize(400, 80)
    browser.show()
    qtbot.waitExposed(browser)
    find = QTextCursor(browser.document())
    find.setPosition(len("first ") + 2)                 # inside "second"
    point = browser.cursorRect(find).center()
    with qtbot.waitSignal(browser.tokenHovered, timeout=2000) as hovered:
        QTest.mouseMove(browser.viewport(), point)
    assert hovered.args == [1]
    with qtbot.waitSignal(browser.tokenClicked, timeout=2000) as clicked:
        QTest.mouseClick(browser.viewport(), Qt.LeftButton, Qt.NoModifier, point)
    assert clicked.args == [1]


def test_a_bubble_of_each_role_is_styled_ahead_and_leaves_nothing_behind(qtbot):
    """Once shown, an empty view styles a user and an answer bubble while idle (a class's
    first polish is what made the first send slower than later ones); neither becomes a
    message, and both are destroyed."""
    polished = Events(QEvent.Polish, MessageWidget, lambda bubble: bubble.role)  # styled
    QApplication.instance().installEventFilter(polished)
    try:
        view = ChatView()
        qtbot.addWidget(view)
        view.show()
        qtbot.waitUntil(lambda: len(polished.seen) >= 2)
    finally:
        QApplication.instance().removeEventFilter(polished)
    assert polished.seen == ["user", "assistant"] and view.messages == []
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    assert view.widget().findChildren(MessageWidget) == []
    assert view.hint.isVisible()
