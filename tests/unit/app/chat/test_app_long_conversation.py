"""A long conversation reopens without freezing the window: its latest exchange shows at
once, the older messages fill in above over the next turns of the event loop up to the
bubbles a chat keeps, scrolled to the end (or as far from it as the user scrolled), with
the saved tokens' colouring and Edit / Regenerate where they belong; the rest come when
the user scrolls up to them. A chat that grows while followed lets its oldest bubbles go
and builds them again from the history when scrolled up to."""

from collections import Counter

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from app.chat import page
from app.chat.page import KEPT_MESSAGES, MORE_AT_TOP
from app.chat.view import TOKEN_PROPERTY, MessageWidget
from app.conversations.history import History, StoredMessage
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.synthetic_gguf import write_model
from tests.unit.app.chat.test_app_chat import load, send

EXCHANGES = 60
TIMEOUT_MS = 30_000


def answer_rows(text: str) -> list[dict]:
    """Saved tokens that spell ``text``: one per word, as the history keeps them."""
    words = text.split(" ")
    pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
    return [{"token": p, "text": p, "logprob": -0.1 * (i % 7), "top": [[p, -0.1]]}
            for i, p in enumerate(pieces)]


def stored_chat(history: History, title: str, exchanges: int) -> int:
    conversation = history.create(title, "tiny:latest").id
    for n in range(exchanges):
        history.add(conversation, "user", f"{title} question {n}")
        text = f"{title} answer {n} with a few more words"
        history.add_message(conversation, StoredMessage(0, "assistant", text, (), True,
                                                        logprobs=tuple(answer_rows(text))))
    return conversation


@pytest.fixture
def window(qtbot, tmp_path) -> MainWindow:
    models = tmp_path / "models"
    import_gguf(Store.open(models), write_model(tmp_path / "t.gguf", "qwen2"), "tiny")
    history = History(tmp_path / "h.sqlite3")
    stored_chat(history, "long", EXCHANGES)
    stored_chat(history, "short", 1)
    window = MainWindow(Settings(models_dir=str(models)), history, auto_load=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.pages.currentWidget() is window.chat, timeout=TIMEOUT_MS)
    return window


def chat_id(window: MainWindow, title: str) -> int:
    return next(c.id for c in window.history.conversations() if c.title == title)


def texts(window: MainWindow) -> list[str]:
    return [w.text for w in window.chat.view.messages]


def coloured_tokens(widget: MessageWidget) -> list[int]:
    """The token indices the answer's text spans carry (colouring by probability)."""
    found = []
    for browser in widget._blocks:
        block = browser.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                value = it.fragment().charFormat().property(TOKEN_PROPERTY)
                if value is not None:
                    found.append(int(value))
                it += 1
            block = block.next()
    return found


def test_a_long_conversation_shows_its_end_at_once_and_fills_in_above(qtbot, window):
    long_chat = chat_id(window, "long")
    stored = window.history.messages(long_chat)
    window.open_conversation(long_chat)
    assert window.chat.building and 2 <= len(window.chat.view.messages) < len(stored)
    assert texts(window)[-2:] == [m.content for m in stored[-2:]]
    assert window.panel.reply and len(window.panel.reply) == len(stored[-1].logprobs)

    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    assert texts(window) == [m.content for m in stored[-KEPT_MESSAGES:]]
    assert [w.message_id for w in window.chat.view.messages] == \
        [m.id for m in stored[-KEPT_MESSAGES:]]
    assert window.chat.older_unbuilt == len(stored) - KEPT_MESSAGES
    bar = window.chat.view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    messages = window.chat.view.messages
    assert [not w.buttons["Edit"].isHidden() for w in messages if w.role == "user"] == \
        [False] * (KEPT_MESSAGES // 2 - 1) + [True]
    assert [not w.buttons["Regenerate"].isHidden() for w in messages
            if w.role == "assistant"] == [False] * (KEPT_MESSAGES // 2 - 1) + [True]


def scroll_to_the_top_for_more(qtbot, window: MainWindow) -> None:
    """Scroll to the top and wait for the older bubbles it brings; the bubble that was at
    the top stays where the user saw it."""
    view = window.chat.view
    bar = view.verticalScrollBar()
    shown, top = len(view.messages), view.messages[0]
    bar.setValue(0)
    seen_at = top.mapTo(view.viewport(), top.rect().topLeft()).y()
    qtbot.waitUntil(lambda: len(view.messages) == shown + min(MORE_AT_TOP, shown + 1000)
                    or not window.chat.older_unbuilt, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    qtbot.wait(50)
    assert abs(top.mapTo(view.viewport(), top.rect().topLeft()).y() - seen_at) <= 24


def test_scrolling_to_the_top_brings_the_older_messages(qtbot, window):
    long_chat = chat_id(window, "long")
    stored = window.history.messages(long_chat)
    window.open_conversation(long_chat)
    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    view, bar = window.chat.view, window.chat.view.verticalScrollBar()
    qtbot.waitUntil(lambda: view.messages[0].y() > 0 and bar.value() == bar.maximum() > 0,
                    timeout=TIMEOUT_MS)              # laid out, at the end
    qtbot.wait(100)
    scroll_to_the_top_for_more(qtbot, window)
    assert texts(window) == [m.content for m in stored[-KEPT_MESSAGES - MORE_AT_TOP:]]
    while window.chat.older_unbuilt:
        scroll_to_the_top_for_more(qtbot, window)
    assert [w.message_id for w in view.messages] == [m.id for m in stored]
    assert not any(w.buttons["Edit"].isVisibleTo(w) for w in view.messages[:-2]
                   if w.role == "user")


def test_saved_tokens_colour_every_answer_built_later(qtbot, window):
    window.panel.color_toggle.setChecked(True)
    window.open_conversation(chat_id(window, "long"))
    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    answers = [w for w in window.chat.view.messages if w.role == "assistant"]
    assert len(answers) == KEPT_MESSAGES // 2
    for widget in answers:
        assert "".join(t.text for t in widget.tokens) == widget.text
        assert coloured_tokens(widget) == list(range(len(widget.tokens)))
    window.panel.color_toggle.setChecked(False)
    assert all(coloured_tokens(w) == [] for w in answers)


def test_switching_away_mid_build_stops_it(qtbot, window):
    window.open_conversation(chat_id(window, "long"))
    assert window.chat.building
    short = chat_id(window, "short")
    window.open_conversation(short)
    assert not window.chat.building
    qtbot.wait(300)
    assert texts(window) == [m.content for m in window.history.messages(short)]


def test_scrolled_up_the_view_keeps_its_distance_from_the_end(qtbot, window, monkeypatch):
    """Older messages arrive above: scrolled up, the user's place does not slide away."""
    # a bubble a turn: on a fast machine most of the chat was built before the user
    # scrolled, and too little arrived above afterwards to tell anything
    monkeypatch.setattr(page, "BUILD_SLICE_S", 0.0005)
    window.open_conversation(chat_id(window, "long"))
    view = window.chat.view
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: len(view.messages) >= 20 and bar.value() == bar.maximum() > 400,
                    timeout=TIMEOUT_MS)                # at the end so far
    assert window.chat.building
    bar.setValue(bar.maximum() - 300)                 # the user scrolls up a little
    grown_from = bar.maximum()
    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    qtbot.wait(100)
    # (the newest bubbles may still settle their heights by a line: a few pixels)
    assert bar.maximum() > grown_from + 1000 and abs(bar.maximum() - bar.value() - 300) <= 24


def test_leaving_a_long_conversation_clears_the_view_at_once(qtbot, window):
    window.open_conversation(chat_id(window, "long"))
    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    view = window.chat.view
    window.new_chat()
    assert view.messages == [] and view.hint.isVisibleTo(view)
    assert view.widget().layout().count() == 2                       # the hint, the stretch
    assert all(not w.geometry().intersects(view.widget().rect())
               for w in view.widget().findChildren(MessageWidget))   # out of sight meanwhile
    qtbot.waitUntil(lambda: view.widget().findChildren(MessageWidget) == [],
                    timeout=TIMEOUT_MS)


def test_opening_reads_only_the_latest_answers_tokens(qtbot, window, monitor_reads):
    """Older answers' saved tokens are read when first wanted (hover, colouring), not
    while their bubbles are built: a long chat's token rows were most of its opening."""
    long_chat = chat_id(window, "long")
    stored = window.history.messages(long_chat)
    window.open_conversation(long_chat)
    qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
    assert monitor_reads == [stored[-1].id]                   # the panel's latest answer
    first = next(w for w in window.chat.view.messages if w.role == "assistant")
    kept = stored[-KEPT_MESSAGES:]
    assert first.message_id == kept[1].id
    assert [t.text for t in first.tokens] == [r["text"] for r in kept[1].logprobs]
    assert monitor_reads == [stored[-1].id, kept[1].id]
    window.panel.color_toggle.setChecked(True)
    assert coloured_tokens(first) == list(range(len(kept[1].logprobs)))


@pytest.fixture
def monitor_reads(window, monkeypatch) -> list[int]:
    """The messages whose token rows the history was asked for."""
    reads: list[int] = []
    read = window.history.logprobs
    monkeypatch.setattr(window.history, "logprobs",
                        lambda message: reads.append(message) or read(message))
    return reads


class BubbleResizes(QObject):
    """How often each bubble was resized."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Resize and isinstance(watched, MessageWidget):
            self.counts[id(watched)] += 1
        return False


def test_bubbles_added_above_leave_the_others_their_size(qtbot, window):
    """Each turn that adds older bubbles lays out the others only to move them: squeezed
    and given back their height on every turn, a long chat's bubbles were resized
    thousands of times while it opened."""
    resizes = BubbleResizes()
    QApplication.instance().installEventFilter(resizes)
    try:
        window.open_conversation(chat_id(window, "long"))
        qtbot.waitUntil(lambda: not window.chat.building, timeout=TIMEOUT_MS)
        qtbot.wait(100)
    finally:
        QApplication.instance().removeEventFilter(resizes)
    assert len(resizes.counts) == KEPT_MESSAGES
    assert max(resizes.counts.values()) <= 6


def test_older_messages_come_back_after_the_chat_let_some_go(qtbot, window):
    """Scrolled up for more, back at the end, an answer lets the oldest go: scrolling up
    again still brings them (the view once waited for bubbles it no longer wanted)."""
    long_chat = chat_id(window, "long")
    window.open_conversation(long_chat)
    view, bar = window.chat.view, window.chat.view.verticalScrollBar()
    qtbot.waitUntil(lambda: not window.chat.building and view.messages[0].y() > 0
                    and bar.value() == bar.maximum() > 0, timeout=TIMEOUT_MS)
    qtbot.wait(100)
    scroll_to_the_top_for_more(qtbot, window)
    assert len(view.messages) == KEPT_MESSAGES + MORE_AT_TOP
    bar.setValue(bar.maximum())
    load(qtbot, window, "tiny:latest")
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, "one more")
    assert len(view.messages) == KEPT_MESSAGES and window.chat.older_unbuilt > 0
    qtbot.waitUntil(lambda: view.messages[0].y() > 0, timeout=TIMEOUT_MS)
    qtbot.wait(100)
    scroll_to_the_top_for_more(qtbot, window)
    assert len(view.messages) == KEPT_MESSAGES + MORE_AT_TOP
    stored = window.history.messages(long_chat)
    assert [w.message_id for w in view.messages] == \
        [m.id for m in stored[-KEPT_MESSAGES - MORE_AT_TOP:]]


def chatting_window(qtbot, tmp_path, monkeypatch, *, kept: int, slack: int,
                    height: int) -> MainWindow:
    """A shown window with the tiny model loaded (three-token answers), keeping ``kept``
    bubbles and letting the oldest go ``slack`` past them."""
    monkeypatch.setattr("app.chat.page.KEPT_MESSAGES", kept)
    monkeypatch.setattr("app.chat.page.LET_GO_SLACK", slack)
    models = tmp_path / "models"
    import_gguf(Store.open(models), write_model(tmp_path / "t.gguf", "qwen2"), "tiny")
    window = MainWindow(Settings(models_dir=str(models), options={"num_predict": 3}),
                        History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    window.resize(1000, height)
    window.show()
    load(qtbot, window, "tiny:latest")
    return window


def test_a_followed_chat_lets_its_oldest_bubbles_go_and_brings_them_back(
        qtbot, tmp_path, monkeypatch):
    """The soak's memory: every bubble of a 200-turn chat stayed alive. Followed at its
    end, a chat keeps its newest bubbles; the rest come back from the history, in order,
    when scrolled up to."""
    window = chatting_window(qtbot, tmp_path, monkeypatch, kept=6, slack=4, height=600)
    view, shown = window.chat.view, []
    for n in range(9):
        with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
            send(window, f"question {n}" + "\nand a line more" * 12)   # tall: 6 fill 2 views
        shown.append(len(view.messages))
    assert max(shown) <= 6 + 4 and shown[-1] < 18
    stored = window.history.messages(window.controller.conversation_id)
    assert len(stored) == 18
    assert window.chat.older_unbuilt == 18 - len(view.messages)
    assert [w.message_id for w in view.messages] == [m.id for m in stored[-len(view.messages):]]
    qtbot.waitUntil(lambda: len(view.widget().findChildren(MessageWidget)) == len(view.messages),
                    timeout=TIMEOUT_MS)                     # the others are destroyed
    while window.chat.older_unbuilt:
        scroll_to_the_top_for_more(qtbot, window)
    assert [(w.role, w.text) for w in view.messages] == [(m.role, m.content) for m in stored]


def test_what_fits_in_the_view_is_not_let_go(qtbot, tmp_path, monkeypatch):
    """Short messages that fit in the view stay built (let go, they would be built again
    at once: the view would be at its top)."""
    window = chatting_window(qtbot, tmp_path, monkeypatch, kept=2, slack=2, height=900)
    for n in range(4):
        with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
            send(window, f"q{n}")
        qtbot.wait(50)
        if n == 0:
            first = window.chat.view.messages[0]
    qtbot.wait(100)
    assert len(window.chat.view.messages) == 8 and window.chat.older_unbuilt == 0
    assert window.chat.view.messages[0] is first              # never let go and rebuilt
