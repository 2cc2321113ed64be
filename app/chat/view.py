"""The conversation: one widget per message, markdown rendered as it grows, code blocks
monospaced with a copy button, and (when colouring by probability) one span per token
that reports which token is under the mouse.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QPixmap,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.chat.elided_label import ElidedLabel
from app.chat.markdown_blocks import split_blocks
from app.chat.sent_document import SentDocument
from app.chat.thinking_section import ThinkingSection
from app.discard import discard
from engine.chat.documents import split

TOKEN_PROPERTY = QTextFormat.UserProperty + 1
NAME_KEPT = 16                    # a bubble's header shows this much of a model's name
DESTROY_SLICE = 2                 # bubbles of a conversation left destroyed per turn
OUT_OF_SIGHT = QPoint(-1_000_000, 0)   # where a bubble waits to be destroyed (no hiding:
# hiding a bubble hides each of its many child widgets, which is what costs)
NEAR_TOP = 48                     # pixels from the top at which older messages are wanted
STYLE_AHEAD_MS = 250              # after the view shows, when a bubble is styled ahead


def probability_colour(probability: float) -> QColor:
    """Green for confident tokens through amber to red for unlikely ones."""
    p = max(0.0, min(1.0, probability))
    hue = int(120 * p)           # 0 red .. 120 green
    return QColor.fromHsv(hue, 200, 235, 90)   # translucent: readable on light and dark


def _token_format(event, index: int) -> QTextCharFormat:
    """A token's run in the coloured view: its probability as the background, its
    details as the tooltip, its index for hovering and clicking."""
    probability = math.exp(event.logprob)
    fmt = QTextCharFormat()
    fmt.setBackground(probability_colour(probability))
    fmt.setProperty(TOKEN_PROPERTY, index)
    logit = "" if event.logit is None else f"  logit={event.logit:.2f}"
    tip = f"{event.piece!r}  p={probability:.3f}{logit}"
    if event.drafted:  # kept from a speculative draft
        fmt.setFontUnderline(True)
        tip += "  drafted"
    fmt.setToolTip(tip)
    return fmt


class AutoHeightBrowser(QTextBrowser):
    """A read-only rich-text view as tall as its content (the chat scrolls, not it)."""

    tokenHovered = Signal(int)
    tokenClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenExternalLinks(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.viewport().setMouseTracking(True)
        self._last_token = -1

    def _fit(self) -> None:
        height = int(self.document().size().height()) + 4
        if self.height() != height:
            self.setFixedHeight(height)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # a new text width lays the whole text out again: only when the width changed
        # (each bubble's own height fitting resizes it too)
        if self.document().textWidth() != self.viewport().width():
            self.document().setTextWidth(self.viewport().width())
            self._fit()

    # The viewport's mouse events, not an event filter: a filter is Python called for
    # every event of every bubble (a long chat's bubbles get thousands when a dialog closes).
    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().mouseMoveEvent(event)
        self._hover(event.position().toPoint())

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().mouseReleaseEvent(event)
        if event.button() == Qt.LeftButton:
            index = self._token_at(event.position().toPoint())
            if index is not None:
                self.tokenClicked.emit(index)

    def _token_at(self, point: QPoint) -> int | None:
        value = self.cursorForPosition(point).charFormat().property(TOKEN_PROPERTY)
        return None if value is None else int(value)

    def _hover(self, point: QPoint) -> None:
        index = self._token_at(point)
        if index is None:
            return
        if index != self._last_token:
            self._last_token = index
            self.tokenHovered.emit(index)


class CodeBlock(QFrame):
    def __init__(self, code: str, language: str) -> None:
        super().__init__()
        self.setObjectName("codeBlock")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        header = QHBoxLayout()
        self.language = QLabel(language or "code")
        self.language.setObjectName("codeLanguage")
        copy = QPushButton("Copy")
        copy.setObjectName("copyCode")
        copy.setCursor(Qt.PointingHandCursor)
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.editor.toPlainText()))
        header.addWidget(self.language)
        header.addStretch(1)
        header.addWidget(copy)
        layout.addLayout(header)
        self.editor = QPlainTextEdit(readOnly=True)
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.editor.setFrameShape(QFrame.NoFrame)
        self.editor.setLineWrapMode(QPlainTextEdit.NoWrap)
        self.editor.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        layout.addWidget(self.editor)
        self.set_code(code, language)

    def set_code(self, code: str, language: str) -> None:
        if self.editor.toPlainText() != code:
            self.editor.setPlainText(code)
        self.language.setText(language or "code")
        lines = max(1, code.count("\n") + 1)
        metrics = self.editor.fontMetrics()
        scrollbar = self.editor.horizontalScrollBar().sizeHint().height()
        self.editor.setFixedHeight(lines * metrics.lineSpacing() + 12 + scrollbar)


class MessageWidget(QFrame):
    """One message. Assistant messages can show token spans coloured by probability."""

    tokenHovered = Signal(object, int)       # (this widget, token index)
    tokenClicked = Signal(object, int)       # (this widget, token index)
    copyRequested = Signal(object)
    editRequested = Signal(object)
    regenerateRequested = Signal(object)
    continueRequested = Signal(object)
    versionRequested = Signal(object, int)   # (this widget, the version to show)

    def __init__(self, role: str, title: str, text: str = "",
                 images: tuple[str, ...] = (), message_id: int | None = None) -> None:
        super().__init__()
        self.role = role
        self.text = text
        self.images = images
        self.message_id = message_id         # row in History
        self.unfinished = False              # an answer that stopped short (Continue applies)
        self._tokens: list = []
        self._read_tokens: Callable[[], list] | None = None
        self.color_tokens = False
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(6)
        header = QHBoxLayout()
        header.setSpacing(6)
        self.name = ElidedLabel(title, keep=NAME_KEPT)  # (none of the three widens the bubble)
        self.name.setObjectName("messageRole")
        header.addWidget(self.name)
        self.status = ElidedLabel("")
        self.status.setObjectName("messageStatus")
        header.addWidget(self.status)
        self.steered = ElidedLabel("")
        self.steered.setObjectName("steeredMark")
        self.steered.hide()
        header.addWidget(self.steered)
        header.addStretch(1)
        self.buttons: dict[str, QPushButton] = {}
        layout.addLayout(header)
        # an answer's actions go under it, which leaves its header room for its note
        actions = header if role == "user" else self._answer_actions()
        for label, signal in ([("Copy", self.copyRequested), ("Edit", self.editRequested)]
                              if role == "user" else
                              [("Continue", self.continueRequested), ("Copy", self.copyRequested),
                               ("Regenerate", self.regenerateRequested)]):
            actions.addWidget(self._action(label, signal))
        self.set_action_enabled("Continue", False)
        if images:
            layout.addLayout(_image_strip(images))
        self.thinking = ThinkingSection()
        layout.addWidget(self.thinking)
        # the answer's tool calls above its text: the calls came first, the answer after
        self.tool_calls: list[QLabel] = []
        self._calls = QVBoxLayout()
        self._calls.setSpacing(2)
        layout.addLayout(self._calls)
        self.body = QVBoxLayout()
        self.body.setSpacing(6)
        layout.addLayout(self.body)
        if role != "user":
            layout.addLayout(actions)
        self._blocks: list[QWidget] = []
        self._coloured: list = []       # the tokens the coloured view holds, in order
        self._render_timer = QTimer(self, singleShot=True, interval=40)
        self._render_timer.timeout.connect(self.render)
        self.render()

    def _action(self, label: str, signal: Signal) -> QPushButton:
        button = QPushButton(label)
        button.setObjectName("messageAction")
        button.setCursor(Qt.PointingHandCursor)
        button.clicked.connect(lambda _=False: signal.emit(self))
        self.buttons[label] = button
        return button

    def _answer_actions(self) -> QHBoxLayout:
        """The row under an answer: ‹ 2/3 › between its versions, then its actions."""
        row = QHBoxLayout()
        row.setSpacing(4)
        self.version, self.versions = 1, 1
        self.previous = QPushButton("‹")
        self.next = QPushButton("›")
        self.version_label = QLabel("")
        self.version_label.setObjectName("versionLabel")
        for widget, step in ((self.previous, -1), (self.version_label, 0), (self.next, 1)):
            widget.setVisible(False)
            row.addWidget(widget)
            if step:
                widget.setObjectName("versionStep")
                widget.setCursor(Qt.PointingHandCursor)
                widget.setToolTip("Earlier version" if step < 0 else "Later version")
                widget.clicked.connect(
                    lambda _=False, s=step: self.versionRequested.emit(self, self.version + s))
        row.addStretch(1)
        return row

    def set_versions(self, version: int, versions: int) -> None:
        """Which of the answer's versions this is (regenerate keeps the earlier ones);
        the switcher shows from two on."""
        self.version, self.versions = version, versions
        self.version_label.setText(f"{version}/{versions}")
        for widget in (self.previous, self.version_label, self.next):
            widget.setVisible(versions > 1)
        self.previous.setEnabled(version > 1)
        self.next.setEnabled(version < versions)

    def set_title(self, title: str) -> None:
        self.name.setText(title)

    @property
    def tokens(self) -> list:
        """The answer's TokenEvents: streamed this session, or a reopened answer's saved
        ones, read on first use (a long chat's bubbles are built without reading them)."""
        if self._read_tokens is not None:
            self._tokens, self._read_tokens = self._read_tokens(), None
        return self._tokens

    @tokens.setter
    def tokens(self, events: list) -> None:
        self._tokens, self._read_tokens = events, None

    def read_tokens_with(self, read: Callable[[], list]) -> None:
        """Where the saved tokens come from when first asked for."""
        self._tokens, self._read_tokens = [], read

    def set_status(self, text: str) -> None:
        """A short note beside the role ("writing…", "stopped", "interrupted")."""
        self.status.setText(text)

    def set_steering(self, label: str) -> None:
        """Mark an answer control vectors steered ("" unmarks), naming them."""
        self.steered.setText(f"steered: {label}" if label else "")
        self.steered.setToolTip("Control vectors were added to the model's residual stream "
                                "for this answer" if label else "")
        self.steered.setVisible(bool(label))

    def add_tool_call(self, line: str, full: str) -> None:
        """A call the model made and what came back (the whole result in the tooltip)."""
        label = QLabel(line)
        label.setObjectName("toolCall")
        label.setToolTip(full)
        label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self._calls.addWidget(label)
        self.tool_calls.append(label)

    def set_action_enabled(self, label: str, enabled: bool) -> None:
        if label in self.buttons:
            self.buttons[label].setVisible(enabled)

    # -- content --------------------------------------------------------------------------

    def set_text(self, text: str, *, immediate: bool = False) -> None:
        self.text = text
        if immediate:
            self.render()
        elif not self._render_timer.isActive():
            self._render_timer.start()

    def set_color_tokens(self, enabled: bool) -> None:
        self.color_tokens = enabled
        self.render()

    def render(self) -> None:
        if self.color_tokens and self.tokens:
            self._render_tokens()
        else:
            self._render_markdown()

    def _clear_blocks(self) -> None:
        for widget in self._blocks:
            discard(widget)
        self._blocks = []
        self._coloured = []

    def _render_user(self) -> None:
        """Attached documents as chips that open to their text, then what the user typed."""
        documents, typed = split(self.text)
        self._clear_blocks()
        for document in documents:
            self._blocks.append(SentDocument(document))
            self.body.addWidget(self._blocks[-1])
        if typed or not documents:
            self._blocks.append(self._new_browser())
            self.body.addWidget(self._blocks[-1])
            self._blocks[-1].setPlainText(typed)

    def _render_markdown(self) -> None:
        self._coloured = []             # the blocks, kept or not, hold no coloured tokens
        if self.role != "assistant":
            self._render_user()
            return
        blocks = split_blocks(self.text)
        kinds = ["prose" if b is None else b.kind for b in blocks]
        current = ["code" if isinstance(w, CodeBlock) else "prose" for w in self._blocks]
        if kinds != current:
            self._clear_blocks()
            for kind in kinds:
                widget = CodeBlock("", "") if kind == "code" else self._new_browser()
                self.body.addWidget(widget)
                self._blocks.append(widget)
        for widget, block in zip(self._blocks, blocks, strict=True):
            if block is None:
                widget.setPlainText(self.text)
            elif isinstance(widget, CodeBlock):
                widget.set_code(block.text, block.language)
            else:
                widget.setMarkdown(block.text)

    def _render_tokens(self) -> None:
        """Each token on its probability's colour. A streamed answer only appends the
        tokens that came since the last frame: all of them again each frame cost the
        window more than a frame once an answer ran to a few hundred tokens."""
        tokens, shown = self.tokens, len(self._coloured)
        if not (0 < shown <= len(tokens) and tokens[shown - 1] is self._coloured[-1]):
            self._clear_blocks()
            self._blocks.append(self._new_browser())
            self.body.addWidget(self._blocks[0])
            shown = 0
        cursor = QTextCursor(self._blocks[0].document())
        cursor.movePosition(QTextCursor.End)
        cursor.beginEditBlock()                 # one layout for the lot
        for index in range(shown, len(tokens)):
            cursor.insertText(tokens[index].text or "", _token_format(tokens[index], index))
        cursor.endEditBlock()
        self._coloured = list(tokens)

    def _new_browser(self) -> AutoHeightBrowser:
        browser = AutoHeightBrowser()
        browser.setObjectName("messageText")
        font = QFont(browser.font())
        browser.setFont(font)
        browser.tokenHovered.connect(lambda i: self.tokenHovered.emit(self, i))
        browser.tokenClicked.connect(lambda i: self.tokenClicked.emit(self, i))
        return browser


def _image_strip(images: tuple[str, ...]) -> QHBoxLayout:
    strip = QHBoxLayout()
    for path in images:
        thumb = QLabel()
        thumb.setObjectName("messageImage")
        pixmap = QPixmap(path)
        if pixmap.isNull():
            thumb.setText(f"[image unavailable: {path}]")
        else:
            thumb.setPixmap(pixmap.scaled(180, 180, Qt.KeepAspectRatio, Qt.SmoothTransformation))
        thumb.setToolTip(path)
        strip.addWidget(thumb)
    strip.addStretch(1)
    return strip


class ChatView(QScrollArea):
    """A vertical list of messages that follows the newest one while the user is at the end.
    Older messages can arrive above the others (a reopened conversation is built from its
    end, a long one's oldest are let go and built again when scrolled up to): the view
    stays at the end, or on what the user scrolled to."""

    reachedTop = Signal()        # the top is in sight: older messages, if any, are wanted

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        # PySide resolves the first viewport() of the process against every widget class
        # it knows, creating their enums: paid here, while the window is being built,
        # rather than by the first message's bubble
        self.viewport()
        inner = QWidget()
        inner.setObjectName("chatInner")
        self._layout = QVBoxLayout(inner)
        # the list grows to hold what is added before it lays the bubbles out: laid out in
        # its old height first, every bubble was squeezed by a few pixels and given them
        # back on each turn that added bubbles (two resizes of each, a long chat's many)
        self._layout.setSizeConstraint(QVBoxLayout.SetMinimumSize)
        self._layout.setContentsMargins(16, 16, 16, 16)
        self._layout.setSpacing(12)
        self._layout.addStretch(1)
        self.setWidget(inner)
        self.hint = QLabel("")
        self.hint.setObjectName("chatHint")
        self.hint.setAlignment(Qt.AlignCenter)
        self.hint.setWordWrap(True)
        self.hint.setMinimumHeight(220)
        self._layout.insertWidget(0, self.hint)
        self.messages: list[MessageWidget] = []
        self._follow = True
        # since messages came in above (and none at the end), what grows grows above what
        # is shown: scrolled away from the end, the view keeps its distance from the end
        self._grown_above = False
        self._maximum = 0
        self._leaving: list[MessageWidget] = []      # out of sight, to be destroyed
        self._destroy_timer = QTimer(self, singleShot=True, interval=0)
        self._destroy_timer.timeout.connect(self._destroy_some)
        self.verticalScrollBar().rangeChanged.connect(self._keep_in_place)
        self.verticalScrollBar().valueChanged.connect(self._track_follow)
        # a bubble of each role styled while the window is idle after it shows (below)
        self._unstyled_roles = ["user", "assistant"]
        self._style_timer = QTimer(self, singleShot=True, interval=STYLE_AHEAD_MS)
        self._style_timer.timeout.connect(self._style_a_bubble)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self._unstyled_roles:
            self._style_timer.start()

    def _style_a_bubble(self) -> None:
        """Qt matches the style sheet's rules against a widget class when it first polishes
        one, and a bubble holds a dozen classes: the first message's bubbles cost the send
        a frame's worth more than later ones. One role's bubble is styled (never shown:
        a widget given a parent stays hidden, then destroyed) per idle turn after the view
        shows, so the first send does not pay."""
        if not self._unstyled_roles or self.messages:
            self._unstyled_roles = []
            return
        bubble = MessageWidget(self._unstyled_roles.pop(0), "")
        bubble.setParent(self.widget())
        for widget in (bubble, *bubble.findChildren(QWidget)):
            widget.ensurePolished()
        bubble.deleteLater()
        if self._unstyled_roles:
            self._style_timer.start()

    def add(self, widget: MessageWidget) -> MessageWidget:
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.messages.append(widget)
        self._follow, self._grown_above = True, False
        self.hint.hide()
        return widget

    def prepend(self, widget: MessageWidget) -> MessageWidget:
        """An older message, above all the others."""
        self._layout.insertWidget(1, widget)      # under the (hidden) hint
        self.messages.insert(0, widget)
        self._grown_above = True
        self.hint.hide()
        return widget

    def set_hint(self, text: str) -> None:
        """What an empty chat says (what to do next)."""
        self.hint.setText(text)
        self.hint.setVisible(not self.messages)

    def remove_from(self, widget: MessageWidget) -> None:
        """Remove a message and all after it."""
        index = self.messages.index(widget)
        for w in self.messages[index:]:
            discard(w)
        del self.messages[index:]
        self.hint.setVisible(not self.messages)

    @property
    def following(self) -> bool:
        """The user is at the end: what comes in is shown as it comes."""
        return self._follow

    def clear(self) -> None:
        """Every message leaves the view at once."""
        self._leave(self.messages)
        self.messages = []
        self.hint.show()
        self._follow, self._grown_above = True, False

    def screens_from(self, index: int) -> float:
        """How many heights of the view the messages from ``index`` on fill."""
        span = self.widget().height() - self.messages[index].y()
        return span / max(1, self.viewport().height())

    def drop_oldest(self, count: int) -> None:
        """The oldest ``count`` messages leave the view (the others stay where they are)."""
        self._leave(self.messages[:count])
        del self.messages[:count]

    def _leave(self, widgets: list[MessageWidget]) -> None:
        """The widgets leave the layout at once and are destroyed a slice per turn of the
        event loop (a long chat's all at once would freeze it)."""
        for widget in widgets:
            self._layout.removeWidget(widget)
            widget.move(OUT_OF_SIGHT)
        self._leaving += widgets
        if self._leaving:
            self._destroy_timer.start()

    def _destroy_some(self) -> None:
        for widget in self._leaving[:DESTROY_SLICE]:
            widget.deleteLater()
        del self._leaving[:DESTROY_SLICE]
        if self._leaving:
            self._destroy_timer.start()

    def _track_follow(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 24
        if value <= NEAR_TOP:
            self.reachedTop.emit()

    def _keep_in_place(self, _minimum: int, maximum: int) -> None:
        bar = self.verticalScrollBar()
        if self._follow:
            bar.setValue(maximum)
        elif self._grown_above:
            bar.setValue(bar.value() + maximum - self._maximum)
        self._maximum = maximum
        if bar.value() <= NEAR_TOP:           # e.g. all of it fits: nothing to scroll up
            self.reachedTop.emit()
