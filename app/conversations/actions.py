"""What a user does to a saved conversation: rename, pin, delete (with Undo in the
banner), export as Markdown or JSON, import a JSON export, and edit its own system
prompt and sampling options. Dialogs ask; History and the controller do the work."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QInputDialog, QWidget

from app.chat.banner import Banner
from app.chat.conversation import ConversationController
from app.conversations import transfer
from app.conversations.history import Snapshot
from app.conversations.settings_dialog import ConversationSettingsDialog
from engine.chat.options import Options
from engine.errors import LanternError

FILTERS = {"md": "Markdown (*.md)", "json": "JSON with log-probabilities (*.json)"}


class ConversationActions(QObject):
    def __init__(self, window: QWidget, controller: ConversationController,
                 banner: Banner) -> None:
        super().__init__(window)
        self.window, self.controller, self.banner = window, controller, banner
        self.history = controller.history
        self.deleted: Snapshot | None = None       # the last deletion, for Undo
        banner.actionRequested.connect(self.undo_delete)

    def rename(self, conversation_id: int, title: str | None = None) -> None:
        stored = self.history.conversation(conversation_id)
        if stored is None:
            return
        if title is None:
            title, ok = QInputDialog.getText(self.window, "Rename conversation", "Title:",
                                             text=stored.title)
            if not ok:
                return
        if title.strip():
            self.history.rename(conversation_id, title.strip())
            self.controller.listChanged.emit()

    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        self.history.set_pinned(conversation_id, pinned)
        self.controller.listChanged.emit()

    def delete(self, conversation_id: int) -> None:
        snapshot = self.controller.delete(conversation_id)
        if snapshot is not None:
            self.deleted = snapshot
            self.banner.show_message("info", f"Deleted “{snapshot.conversation.title}”.",
                                     action="Undo")

    def undo_delete(self) -> None:
        if self.deleted is not None:
            snapshot, self.deleted = self.deleted, None
            self.controller.undelete(snapshot)

    def export(self, conversation_id: int, kind: str, path: str | None = None) -> None:
        stored = self.history.conversation(conversation_id)
        if stored is None:
            return
        if path is None:
            suggested = transfer.file_name(stored.title) + "." + kind
            path, _ = QFileDialog.getSaveFileName(self.window, "Export conversation",
                                                  suggested, FILTERS[kind])
            if not path:
                return
        target = Path(path)
        if target.suffix.lower() != "." + kind:
            target = target.with_name(target.name + "." + kind)
        try:
            transfer.export(self.history, conversation_id, target)
        except (OSError, LanternError) as error:
            self.banner.show_message("error", f"Could not export to {target}: {error}")
            return
        self.banner.show_message("info", f"Exported “{stored.title}” to {target}.")

    def import_file(self, path: str | None = None) -> int | None:
        """Import a JSON export; returns the new conversation's id."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self.window, "Import a conversation", "",
                                                  FILTERS["json"])
            if not path:
                return None
        try:
            conversation = transfer.import_json(self.history, Path(path))
        except LanternError as error:
            self.banner.show_message("error", str(error))
            return None
        self.controller.listChanged.emit()
        self.banner.show_message("info", f"Imported “{conversation.title}”.")
        return conversation.id

    def edit_settings(self) -> None:
        controller = self.controller
        system, options = controller.conversation_settings()
        model = controller.model
        defaults = Options.resolve(model.params if model else {},
                                   controller.settings.options)
        default_system = controller.settings.system or (model.system if model else "") or ""
        title = self.history.conversation(controller.conversation_id).title \
            if controller.conversation_id is not None else "New chat"
        dialog = ConversationSettingsDialog(title, system, options, defaults, default_system,
                                            self.window, controller.conversation_format())
        if dialog.exec():
            controller.set_conversation_format(dialog.answer_format())
            controller.set_conversation_settings(dialog.system(), dialog.options())
