"""The saved conversations as a list model over History: pinned first, then newest; or,
while a search runs, the conversations that match with the text around the match."""

from __future__ import annotations

import time

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, Qt

from app.conversations.history import Conversation, History


def when(updated: float, now: float | None = None) -> str:
    """A short age: "just now", "5 min ago", "3 h ago", "2 d ago", else the date."""
    seconds = max(0.0, (now or time.time()) - updated)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)} d ago"
    return time.strftime("%Y-%m-%d", time.localtime(updated))


class ConversationListModel(QAbstractListModel):
    ConversationRole = Qt.UserRole + 1
    DetailsRole = Qt.UserRole + 2

    def __init__(self, history: History, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.query = ""
        self.conversations: list[Conversation] = []
        self.answering: int | None = None     # the conversation being answered (marked)
        self.refresh()

    def roleNames(self) -> dict[int, bytes]:  # noqa: N802 (Qt override)
        return {Qt.DisplayRole: b"title", self.ConversationRole: b"conversation",
                self.DetailsRole: b"details"}

    def refresh(self) -> None:
        self.beginResetModel()
        self.conversations = (self.history.search(self.query) if self.query.strip()
                              else self.history.conversations())
        self.endResetModel()

    def set_query(self, query: str) -> None:
        """Show only conversations matching `query` (both sides' text, titles); "" all."""
        self.query = query
        self.refresh()

    def set_answering(self, conversation_id: int | None) -> None:
        """Mark the conversation whose answer is being written (None: none is)."""
        marked = {self.answering, conversation_id} - {None}
        self.answering = conversation_id
        for row in (self.row_of(c) for c in marked):
            if row >= 0:
                self.dataChanged.emit(self.index(row), self.index(row), [self.DetailsRole])

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.conversations)

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole) -> object:
        if not index.isValid():
            return None
        conversation = self.conversations[index.row()]
        if role == Qt.DisplayRole:
            return conversation.title
        if role == self.DetailsRole:
            if conversation.snippet:
                return conversation.snippet
            pin = "★ " if conversation.pinned else ""
            if conversation.id == self.answering:
                return f"{pin}● answering… · {conversation.model}"
            return f"{pin}{conversation.model} · {when(conversation.updated)}"
        if role == Qt.ToolTipRole:
            return f"{conversation.title}\n{conversation.model}"
        if role == self.ConversationRole:
            return conversation
        return None

    def row_of(self, conversation_id: int) -> int:
        return next((r for r, c in enumerate(self.conversations) if c.id == conversation_id), -1)
