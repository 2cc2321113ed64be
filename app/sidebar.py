"""The left column: model picker, new chat, saved conversations, settings.

It only shows the two list models and reports choices as signals; the window decides
what a choice means.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.conversations.list_model import ConversationListModel
from app.models.list_model import ModelEntry, ModelListModel

ROW_HEIGHT = 46
MODEL_ROWS_SHOWN = 8        # the model list grows with the store up to this many rows
ERROR_COLOUR = QColor(200, 60, 50)


def elide_model_name(name: str, metrics: QFontMetrics, width: int) -> str:
    """An Ollama name cut where it says least: the tag's middle, then its end, so family and
    size stay ("qwen2.5-coder:1.5b-…-q4_K_M", "qwen2.5-coder:1.5b-…"); else the middle."""
    if metrics.horizontalAdvance(name) <= width:
        return name
    family, colon, tag = name.rpartition(":")
    parts = tag.split("-")
    shorter = ([f"{family}:{parts[0]}-…-{parts[-1]}"] if len(parts) > 2 else []) + \
        ([f"{family}:{parts[0]}-…"] if colon and len(parts) > 1 else [])
    fitting = (s for s in shorter if metrics.horizontalAdvance(s) <= width)
    return next(fitting, metrics.elidedText(name, Qt.ElideMiddle, width))


def elide_right(text: str, metrics: QFontMetrics, width: int) -> str:
    return metrics.elidedText(text, Qt.ElideRight, width)


class TwoLineDelegate(QStyledItemDelegate):
    """Name on the first line, details below (in red when the row has a problem: then the
    details say why), optional badge."""

    def __init__(self, details_role: int, problem_role: int | None = None,
                 badge_role: int | None = None, badge: str = "",
                 elide_title: Callable[[str, QFontMetrics, int], str] = elide_right,
                 parent=None) -> None:
        super().__init__(parent)
        self.details_role, self.problem_role = details_role, problem_role
        self.badge_role, self.badge = badge_role, badge
        self.elide_title = elide_title

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:  # noqa: N802
        return QSize(option.rect.width(), ROW_HEIGHT)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        painter.save()
        painter.setRenderHint(QPainter.Antialiasing)
        palette = option.palette
        rect = option.rect.adjusted(4, 2, -4, -2)
        selected = bool(option.state & QStyle.State_Selected)
        hovered = bool(option.state & QStyle.State_MouseOver)
        enabled = bool(index.flags() & Qt.ItemIsEnabled)
        if selected or (hovered and enabled):
            path = QPainterPath()
            path.addRoundedRect(rect, 7, 7)
            colour = QColor(palette.color(QPalette.Highlight))
            colour.setAlpha(46 if selected else 18)
            painter.fillPath(path, colour)
        text_rect = rect.adjusted(10, 5, -10, -5)
        badge_width = 0
        if self.badge_role is not None and index.data(self.badge_role):
            badge_width = self._paint_badge(painter, text_rect, palette)
        title_font = QFont(option.font)
        title_font.setWeight(QFont.DemiBold if enabled else QFont.Normal)
        painter.setFont(title_font)
        primary = palette.color(QPalette.Text if enabled else QPalette.PlaceholderText)
        painter.setPen(primary)
        line = text_rect.height() // 2
        title_rect = QRect(text_rect.x(), text_rect.y(), text_rect.width() - badge_width, line)
        painter.drawText(title_rect, Qt.AlignLeft | Qt.AlignVCenter,
                         self.elide_title(str(index.data() or ""), painter.fontMetrics(),
                                          title_rect.width()))
        problem = index.data(self.problem_role) if self.problem_role is not None else None
        details = index.data(self.details_role) or ""
        small = QFont(option.font)
        small.setPointSizeF(max(7.0, option.font.pointSizeF() * 0.85))
        painter.setFont(small)
        painter.setPen(ERROR_COLOUR if problem else palette.color(QPalette.PlaceholderText))
        detail_rect = QRect(text_rect.x(), text_rect.y() + line, text_rect.width(), line)
        painter.drawText(detail_rect, Qt.AlignLeft | Qt.AlignVCenter,
                         painter.fontMetrics().elidedText(str(details), Qt.ElideRight,
                                                          detail_rect.width()))
        painter.restore()

    def _paint_badge(self, painter: QPainter, rect: QRect, palette: QPalette) -> int:
        font = QFont(painter.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.8))
        font.setWeight(QFont.DemiBold)
        painter.setFont(font)
        width = painter.fontMetrics().horizontalAdvance(self.badge) + 12
        height = painter.fontMetrics().height() + 2
        badge = QRect(rect.right() - width, rect.y() + 1, width, height)
        path = QPainterPath()
        path.addRoundedRect(badge, height / 2, height / 2)
        painter.fillPath(path, QColor(124, 92, 230, 40))
        painter.setPen(QColor(104, 72, 210))
        painter.drawText(badge, Qt.AlignCenter, self.badge)
        return width + 6


def _section(text: str) -> QLabel:
    label = QLabel(text.upper())
    label.setObjectName("sectionLabel")
    return label


class ModelListView(QListView):
    """As tall as the store's models, up to MODEL_ROWS_SHOWN rows (then it scrolls), so a
    small store is seen whole on a 720-pixel screen and the conversations get the rest."""

    def setModel(self, model) -> None:  # noqa: N802 (Qt's name)
        super().setModel(model)
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset):
            signal.connect(self.updateGeometry)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        rows = min(self.model().rowCount() if self.model() else 0, MODEL_ROWS_SHOWN)
        return QSize(super().sizeHint().width(),
                     max(rows, 1) * ROW_HEIGHT + 2 * self.frameWidth())


def _list_view(model, delegate: QStyledItemDelegate,
               view_class: type[QListView] = QListView) -> QListView:
    view = view_class()
    view.setModel(model)
    view.setItemDelegate(delegate)
    view.setMouseTracking(True)
    view.setFrameShape(QFrame.NoFrame)
    view.setEditTriggers(QAbstractItemView.NoEditTriggers)
    view.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    view.setVerticalScrollMode(QAbstractItemView.ScrollPerPixel)
    view.setUniformItemSizes(True)
    return view


class Sidebar(QFrame):
    modelChosen = Signal(object)            # ModelEntry
    getModelRequested = Signal()
    modelCopyRequested = Signal(object)     # ModelEntry
    modelRemoveRequested = Signal(object)   # ModelEntry
    newChatRequested = Signal()
    conversationChosen = Signal(int)
    conversationDeleteRequested = Signal(int)
    conversationRenameRequested = Signal(int)
    conversationPinRequested = Signal(int, bool)
    conversationExportRequested = Signal(int, str)     # id, "md" or "json"
    settingsRequested = Signal()

    def __init__(self, models: ModelListModel, conversations: ConversationListModel,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.models, self.conversations = models, conversations
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 14, 10, 10)
        layout.setSpacing(6)
        title = QLabel("Lantern")
        title.setObjectName("appTitle")
        layout.addWidget(title)

        header = QHBoxLayout()
        header.addWidget(_section("Models"))
        header.addStretch(1)
        self.get_model = QPushButton("+ Get a model")
        self.get_model.setObjectName("getModel")
        self.get_model.setFlat(True)
        self.get_model.setCursor(Qt.PointingHandCursor)
        self.get_model.setToolTip("Download a model from a registry into the store")
        self.get_model.clicked.connect(self.getModelRequested)
        header.addWidget(self.get_model)
        layout.addLayout(header)
        self.model_view = _list_view(models, TwoLineDelegate(
            ModelListModel.DetailsRole, ModelListModel.ProblemRole, ModelListModel.VisionRole,
            "vision", elide_title=elide_model_name), ModelListView)
        self.model_view.setObjectName("modelList")
        self.model_view.clicked.connect(self._model_clicked)
        self.model_view.activated.connect(self._model_clicked)     # Enter after Ctrl+K
        self.model_view.setContextMenuPolicy(Qt.CustomContextMenu)
        self.model_view.customContextMenuRequested.connect(self._model_menu)
        layout.addWidget(self.model_view)

        self.new_chat = QPushButton("+  New chat")
        self.new_chat.setObjectName("newChat")
        self.new_chat.setCursor(Qt.PointingHandCursor)
        self.new_chat.clicked.connect(self.newChatRequested)
        layout.addWidget(self.new_chat)

        layout.addWidget(_section("Conversations"))
        self.search = QLineEdit()
        self.search.setObjectName("conversationSearch")
        self.search.setPlaceholderText("Search conversations (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(conversations.set_query)
        layout.addWidget(self.search)
        self.conversation_view = _list_view(
            conversations, TwoLineDelegate(ConversationListModel.DetailsRole))
        self.conversation_view.setObjectName("conversationList")
        self.conversation_view.clicked.connect(self._conversation_clicked)
        self.conversation_view.setContextMenuPolicy(Qt.CustomContextMenu)
        self.conversation_view.customContextMenuRequested.connect(self._conversation_menu)
        layout.addWidget(self.conversation_view, 1)

        self.settings = QPushButton("⚙  Settings")
        self.settings.setObjectName("settingsButton")
        self.settings.setCursor(Qt.PointingHandCursor)
        self.settings.clicked.connect(self.settingsRequested)
        layout.addWidget(self.settings)

    def select_model(self, name: str) -> None:
        row = self.models.row_of(name)
        if row >= 0:
            self.model_view.setCurrentIndex(self.models.index(row))

    def select_conversation(self, conversation_id: int | None) -> None:
        row = -1 if conversation_id is None else self.conversations.row_of(conversation_id)
        if row < 0:
            self.conversation_view.clearSelection()
        else:
            self.conversation_view.setCurrentIndex(self.conversations.index(row))

    def _model_clicked(self, index: QModelIndex) -> None:
        entry: ModelEntry = index.data(ModelListModel.EntryRole)
        if entry is not None and entry.problem is None:
            self.modelChosen.emit(entry)

    def model_menu(self, entry: ModelEntry) -> QMenu:
        """Copy / Remove for one model (a broken one can only be removed; a server's
        models are the server's business)."""
        menu = QMenu(self)
        if entry.server:
            menu.addAction(f"On {entry.server}: see File → Connections…").setEnabled(False)
            return menu
        copy = menu.addAction("Copy…")
        copy.setEnabled(entry.model is not None)
        copy.triggered.connect(lambda: self.modelCopyRequested.emit(entry))
        menu.addAction("Remove…").triggered.connect(
            lambda: self.modelRemoveRequested.emit(entry))
        return menu

    def _model_menu(self, point: QPoint) -> None:
        entry = self.model_view.indexAt(point).data(ModelListModel.EntryRole)
        if entry is not None:
            menu = self.model_menu(entry)
            menu.exec(self.model_view.viewport().mapToGlobal(point))
            menu.deleteLater()

    def _conversation_clicked(self, index: QModelIndex) -> None:
        conversation = index.data(ConversationListModel.ConversationRole)
        if conversation is not None:
            self.conversationChosen.emit(conversation.id)

    def _conversation_menu(self, point: QPoint) -> None:
        index = self.conversation_view.indexAt(point)
        conversation = index.data(ConversationListModel.ConversationRole)
        if conversation is None:
            return
        menu = QMenu(self)
        actions = {
            menu.addAction("Rename…"): lambda: self.conversationRenameRequested.emit(
                conversation.id),
            menu.addAction("Unpin" if conversation.pinned else "Pin to the top"):
                lambda: self.conversationPinRequested.emit(conversation.id,
                                                           not conversation.pinned),
            menu.addAction("Export as Markdown…"): lambda: self.conversationExportRequested.emit(
                conversation.id, "md"),
            menu.addAction("Export as JSON…"): lambda: self.conversationExportRequested.emit(
                conversation.id, "json"),
        }
        menu.addSeparator()
        actions[menu.addAction("Delete conversation")] = \
            lambda: self.conversationDeleteRequested.emit(conversation.id)
        chosen = menu.exec(self.conversation_view.viewport().mapToGlobal(point))
        if chosen in actions:
            actions[chosen]()
