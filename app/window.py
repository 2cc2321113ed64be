"""The main window: composes the sidebar, the chat page (or the empty state), the debug
panel dock, the banner and the status bar, and wires their signals together. The work
itself lives in ModelsController (the store's models, the one loaded; ModelsView shows
what it reports), ConversationController (the conversation shown and its answers) and the
jobs they start.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QPaintEvent,
)
from PySide6.QtWidgets import (
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.chat.banner import Banner
from app.chat.conversation import ConversationController
from app.chat.document_tray import local_files_of
from app.chat.empty_state import EmptyState
from app.chat.page import ChatPage, no_video_text, no_vision_text
from app.chat.tool_confirm import ask_allow
from app.chat.tool_gate import Answer
from app.conversations.actions import ConversationActions
from app.conversations.history import History
from app.conversations.list_model import ConversationListModel
from app.desktop import shortcuts
from app.desktop.about import AboutDialog, about_facts
from app.inspector.checks import Checks
from app.inspector.crosscheck import CrossCheckDialog
from app.inspector.inspector import Inspector
from app.inspector.model_comparer import ModelComparer
from app.inspector.panel import MIN_WIDTH, DebugPanel
from app.models.controller import ModelsController
from app.models.list_model import ModelListModel
from app.models.manager import ModelManager
from app.models.view import ModelsView
from app.settings.connections import ConnectionsDialog
from app.settings.dialog import SettingsDialog
from app.settings.store import Settings
from app.sidebar import Sidebar
from app.workers import JobRunner
from engine.chat.events import DoneEvent, TokenEvent
from engine.chat.tools import ToolCall
from engine.errors import LanternError
from engine.paths import data_dir

RELOAD_FIELDS = ("provider", "exact", "requantize", "num_ctx", "layer_stats")


def history_path() -> Path:
    return data_dir() / "history.sqlite3"


PANEL_WIDTH = 570
FIRST_PAINT_WAIT_MS = 500   # the longest the store scan waits for the window's first paint


class MainWindow(QMainWindow):
    def __init__(self, settings: Settings | None = None, history: History | None = None,
                 auto_load: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("Lantern")
        self.setObjectName("mainWindow")
        available = self.screen().availableGeometry()     # a 1280x720 laptop included
        self.resize(min(1320, available.width()), min(840, available.height()))
        self.setAcceptDrops(True)
        self.settings = settings or Settings.load()
        self.history = history or History(history_path())
        self.runner = JobRunner(self)
        self.models = ModelListModel(self)
        self.conversations = ConversationListModel(self.history, self)
        self.models_controller = ModelsController(self.models, self.history,
                                                  lambda: self.settings, self.runner,
                                                  auto_load, self)
        self.controller = ConversationController(self.history, self.settings, self.runner, self)
        self.manager = ModelManager(self.runner, self.models_controller.store, self)
        self.crosscheck: CrossCheckDialog | None = None

        self.sidebar = Sidebar(self.models, self.conversations)
        self.banner = Banner()
        self.empty = EmptyState()
        self.chat = ChatPage(self.controller)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.chat)
        self.pages.addWidget(self.empty)
        centre = QWidget()
        centre.setObjectName("centre")
        centre_layout = QVBoxLayout(centre)
        centre_layout.setContentsMargins(0, 0, 0, 0)
        centre_layout.setSpacing(0)
        centre_layout.addWidget(self.banner)
        centre_layout.addWidget(self.pages, 1)
        splitter = QSplitter(Qt.Horizontal)
        splitter.setObjectName("mainSplitter")
        splitter.addWidget(self.sidebar)
        splitter.addWidget(centre)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([270, 900])
        splitter.setChildrenCollapsible(False)
        self.setCentralWidget(splitter)
        self.panel = DebugPanel(self)
        self.checks = Checks(self.controller, self)
        self.inspector = Inspector(self.panel, self.controller, self.runner, self)
        self.comparer = ModelComparer(self.panel, self.controller, self.inspector,
                                      self.runner, self.models_controller.store, self)
        self.addDockWidget(Qt.RightDockWidgetArea, self.panel)
        # roomy where the screen allows, else as narrow as the panel goes
        self.resizeDocks([self.panel], [PANEL_WIDTH if available.width() >= 1280 else MIN_WIDTH],
                         Qt.Horizontal)
        self.panel.layers.stats_toggle.setChecked(self.settings.layer_stats)
        self.panel.color_toggle.setChecked(self.settings.color_by_probability)
        self.chat.set_color_tokens(self.settings.color_by_probability)
        self.actions = ConversationActions(self, self.controller, self.banner)
        self.models_view = ModelsView(self)
        self.shortcut_actions = shortcuts.bind(self, {
            "new_chat": self.new_chat, "focus_input": self.focus_input,
            "pick_model": self.pick_model, "search": self.focus_search,
            "escape": self.escape, "copy_answer": self.copy_last_answer,
            "show_shortcuts": self.show_shortcuts})
        self._build_menus()
        self._build_status_bar()
        self._connect()
        self._connect_tools()
        self.refresh_conversations()
        self.focus_input()                 # typing goes to the input from the start
        self._unpainted = True
        QTimer.singleShot(0, self._scan_unless_painting)

    def _scan_unless_painting(self) -> None:
        """The store is read once the window on screen has been painted: its first paint
        would otherwise share the GIL with the scan's Python, waiting many times over.
        A window shown but not painted (minimised) waits a moment, not for ever."""
        if self.isVisible() and self._unpainted:
            QTimer.singleShot(FIRST_PAINT_WAIT_MS, self._first_scan)
        else:
            self._first_scan()

    def _first_scan(self) -> None:
        if self.models_controller.scan_job is None:
            self.models_controller.rescan()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        super().paintEvent(event)
        if self._unpainted:
            self._unpainted = False
            QTimer.singleShot(0, self._first_scan)

    # -- construction ----------------------------------------------------------------------

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        file_menu.addAction(self.shortcut_actions["new_chat"])
        file_menu.addAction("Get a model…").triggered.connect(self.manager.get_model)
        file_menu.addAction("Import a GGUF…").triggered.connect(self.models_view.choose_gguf)
        file_menu.addAction("Import a conversation…").triggered.connect(
            self._import_conversation)
        file_menu.addAction("Choose model folder…").triggered.connect(
            self.models_view.choose_folder)
        file_menu.addAction("Look for models again").triggered.connect(
            self.models_controller.rescan)
        file_menu.addAction("Connections…").triggered.connect(self.open_connections)
        file_menu.addSeparator()
        settings = file_menu.addAction("Settings…")
        settings.setShortcut(QKeySequence.Preferences)
        settings.triggered.connect(self.open_settings)
        file_menu.addSeparator()
        quit_action = file_menu.addAction("Quit")
        quit_action.setShortcut(QKeySequence.Quit)
        quit_action.triggered.connect(self.close)
        view_menu = self.menuBar().addMenu("&View")
        toggle: QAction = self.panel.toggleViewAction()
        toggle.setText("Debug panel")
        toggle.setShortcut(QKeySequence("Ctrl+D"))
        view_menu.addAction(toggle)
        tools = self.menuBar().addMenu("&Tools")
        self.crosscheck_action = tools.addAction("Cross-check with a server…")
        self.crosscheck_action.triggered.connect(self.open_crosscheck)
        help_menu = self.menuBar().addMenu("&Help")
        keys = self.shortcut_actions["show_shortcuts"]
        keys.setText("Keyboard shortcuts")
        help_menu.addAction(keys)
        about = help_menu.addAction("About Lantern")
        about.setMenuRole(QAction.AboutRole)
        about.triggered.connect(self.show_about)

    def _build_status_bar(self) -> None:
        self.status_speed = QLabel("")
        for label in (self.models_view.status_model, self.models_view.status_provider,
                      self.status_speed):
            label.setObjectName("statusItem")
            self.statusBar().addPermanentWidget(label)

    def _connect_tools(self) -> None:
        """Tool calls ask here; an answer that ends takes its open question with it."""
        self._tool_question: QMessageBox | None = None
        self.controller.tools.confirmRequested.connect(self._confirm_tool)
        self.controller.tools.alwaysAllowed.connect(self._always_allow)
        self.controller.busyChanged.connect(
            lambda busy: busy or self._tool_question is None or self._tool_question.reject())

    def _confirm_tool(self, call: ToolCall, where: str, answer: Answer) -> None:
        self._tool_question = ask_allow(self, call, where, answer)

    def _always_allow(self, tool: str) -> None:
        if tool not in self.settings.allowed_tools:
            self.save_settings(allowed_tools=[*self.settings.allowed_tools, tool])

    def _connect(self) -> None:
        sidebar, controller, models = self.sidebar, self.controller, self.models_controller
        sidebar.newChatRequested.connect(self.new_chat)
        sidebar.conversationChosen.connect(self.open_conversation)
        sidebar.conversationDeleteRequested.connect(self.delete_conversation)
        sidebar.conversationRenameRequested.connect(self.actions.rename)
        sidebar.conversationPinRequested.connect(self.actions.set_pinned)
        sidebar.conversationExportRequested.connect(self.actions.export)
        self.chat.header.editRequested.connect(self.actions.edit_settings)
        sidebar.settingsRequested.connect(self.open_settings)
        sidebar.getModelRequested.connect(self.manager.get_model)
        sidebar.modelCopyRequested.connect(self.manager.copy)
        sidebar.modelRemoveRequested.connect(self.manager.remove)
        self.manager.storeChanged.connect(models.rescan)
        self.manager.message.connect(self.banner.show_message)
        controller.conversationChanged.connect(self.refresh_conversations)
        controller.listChanged.connect(self.refresh_conversations)
        controller.answeringChanged.connect(self.conversations.set_answering)
        controller.token.connect(self._token)
        controller.answerDone.connect(self._done)
        controller.notice.connect(lambda text: self.banner.show_message("info", text))
        controller.promptReady.connect(self.panel.prompt.show_prompt)
        self.checks.checkDone.connect(self.panel.reference.show_check)
        self.checks.checkFailed.connect(self.panel.reference.show_check_failed)
        self.chat.message.connect(self.banner.show_message)
        self.chat.tokenHovered.connect(lambda event: self.panel.show_token(event, latest=False))
        self.chat.tokenClicked.connect(self.inspector.select_token)
        self.chat.input.imagesAttached.connect(self._images_attached)
        self.chat.input.imagesCleared.connect(self._images_cleared)
        self.chat.input.imageRejected.connect(lambda text: self.banner.show_message("error",
                                                                                    text))
        self.chat.input.documentRejected.connect(
            lambda text: self.banner.show_message("error", text))
        self.panel.colorTokensToggled.connect(self._color_tokens)
        self.panel.layers.statsToggled.connect(self._layer_stats)
        self.panel.reference.checkRequested.connect(self._check)
        self.panel.reference.cancelRequested.connect(self._cancel_check)
        self.empty.getModelRequested.connect(self.manager.get_model)

    # -- conversations ---------------------------------------------------------------------

    def new_chat(self) -> None:
        self.controller.new_chat()
        self.chat.clear()
        self.panel.clear()
        self.inspector.clear()
        self.comparer.clear()
        self.status_speed.setText("")           # the speed was the other chat's
        self.focus_input()

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete (Undo in the banner); the open conversation gives way to a new chat."""
        if conversation_id == self.controller.conversation_id:
            self.new_chat()
        self.actions.delete(conversation_id)

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.controller.conversation_id:
            return
        conversation = next((c for c in self.conversations.conversations
                             if c.id == conversation_id), None)
        messages = self.controller.open(conversation_id)
        self.chat.show_conversation(messages, conversation.model if conversation else "")
        self.panel.clear()
        self.inspector.clear()
        self.comparer.clear()
        self.status_speed.setText("")
        self.panel.show_saved_answer(self.chat.last_answer_tokens())
        answers = [m for m in messages if m.role == "assistant"]
        self.panel.show_steering(answers[-1].steering if answers else "")

    def refresh_conversations(self) -> None:
        self.conversations.refresh()
        self.sidebar.select_conversation(self.controller.conversation_id)
        self.chat.refresh_header()
        self.setWindowTitle(" — ".join(
            [self.chat.header.title.text(), self.controller.model_name or "no model",
             "Lantern"]))

    def _import_conversation(self) -> None:
        conversation_id = self.actions.import_file()
        if conversation_id is not None:
            self.open_conversation(conversation_id)

    # -- keyboard --------------------------------------------------------------------------

    def focus_input(self) -> None:
        self.chat.input.editor.setFocus()

    def pick_model(self) -> None:
        """Ctrl+K: the model list takes the keyboard (arrows, Enter loads)."""
        view = self.sidebar.model_view
        entry = self.models_controller.entry
        row = self.models.row_of(entry.name) if entry else 0
        if self.models.rowCount():
            view.setCurrentIndex(self.models.index(max(row, 0)))
        view.setFocus()

    def focus_search(self) -> None:
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def escape(self) -> None:
        """Esc: stop the answer (of the chat shown); else leave editing; else clear the
        search."""
        if self.controller.busy:
            self.controller.answer.stop()
        elif self.chat.input.waiting or self.chat.input.editing:
            self.chat.input.escape()
        elif self.sidebar.search.text():
            self.sidebar.search.clear()
            self.focus_input()

    def copy_last_answer(self) -> None:
        if self.chat.copy_last_answer():
            self.statusBar().showMessage("Copied the last answer", 3000)

    def show_shortcuts(self) -> None:
        shortcuts.ShortcutsDialog(self).exec()

    # -- streaming and the panel -----------------------------------------------------------

    def _token(self, event: TokenEvent) -> None:
        speed = self.controller.answer.tokens_per_second
        self.panel.show_timing(event.elapsed_ns / 1e6, speed)
        self.status_speed.setText(f"{speed:.1f} tok/s")

    def _done(self, event: DoneEvent) -> None:
        self.panel.flush()
        speed = event.eval_count / (event.eval_duration / 1e9) if event.eval_duration else 0.0
        step = event.eval_duration / 1e6 / event.eval_count if event.eval_count else 0.0
        self.panel.show_timing(step, speed, event.prompt_eval_count,
                               event.prompt_eval_duration / 1e9)
        self.panel.show_steering(event.steering)
        status = f"{speed:.1f} tok/s · {event.eval_count} tokens"
        if event.draft_count:
            status += (f" · drafted {event.draft_count}, accepted {event.draft_accepted} "
                       f"({event.acceptance:.0%})")
        self.status_speed.setText(status)

    def _color_tokens(self, enabled: bool) -> None:
        self.chat.set_color_tokens(enabled)
        self.save_settings(color_by_probability=enabled)

    def _layer_stats(self, enabled: bool) -> None:
        if enabled != self.settings.layer_stats:
            self.save_settings(layer_stats=enabled)
            self.models_controller.reload()

    def _check(self) -> None:
        try:
            self.checks.check()
        except LanternError as error:
            self.panel.reference.show_check_failed(str(error))
            return
        self.panel.reference.show_check_running()

    def _cancel_check(self) -> None:
        self.controller.give_up_check()
        self.panel.reference.show_check_cancelled()

    def _images_attached(self, paths: list[str]) -> None:
        if self.controller.model is not None and not self.controller.vision:
            self.banner.show_message(
                "warning", no_vision_text(self.controller.model_name, len(paths)))
            return
        animated = [t.path for t in self.chat.input.thumbnails()
                    if t.path in paths and t.animated]
        if animated and self.controller.model is not None and not self.chat.input.video:
            self.banner.show_message(
                "warning", no_video_text(self.controller.model_name, animated))

    def _images_cleared(self) -> None:
        """The images the warning was about are gone, so is the warning."""
        if self.banner.level == "warning" and any(
                words in self.banner.text.text() for words in ("cannot see images",
                                                               "cannot read video")):
            self.banner.dismiss()

    # -- settings --------------------------------------------------------------------------

    def open_settings(self) -> None:
        model = self.controller.model
        dialog = SettingsDialog(self.settings, model.params if model else None,
                                model.system if model else None, self, runner=self.runner)
        if dialog.exec():
            before = self.settings
            self.settings = dialog.result_settings()
            self.controller.settings = self.settings
            self.settings.save()
            if before.connections != self.settings.connections:
                self.models_controller.rescan_remote()
            if (before.builtin_tools, before.mcp_servers) != \
                    (self.settings.builtin_tools, self.settings.mcp_servers):
                self.controller.tools.reset()
            entry = self.models_controller.entry
            if any(getattr(before, f) != getattr(self.settings, f) for f in RELOAD_FIELDS) \
                    and (entry is None or entry.remote is None):
                self.models_controller.reload()

    def open_connections(self) -> None:
        dialog = ConnectionsDialog(self.settings.connections, self.runner, self)
        if dialog.exec() and dialog.records != self.settings.connections:
            self.save_settings(connections=dialog.records)
            self.models_controller.rescan_remote()

    def open_crosscheck(self) -> None:
        """Lantern's loaded model against a server's copy, on the current conversation."""
        if self.crosscheck is None:
            self.crosscheck = CrossCheckDialog(self.checks, self.models, self)
        self.crosscheck.refresh()
        self.crosscheck.show()
        self.crosscheck.raise_()

    def show_about(self) -> None:
        AboutDialog(about_facts(self.models_controller.store().root, self.history.path),
                    self).exec()

    def save_settings(self, **changes: object) -> None:
        self.settings = replace(self.settings, **changes)
        self.controller.settings = self.settings
        self.settings.save()

    # -- drag & drop, closing --------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        mime = event.mimeData()
        if local_files_of(mime) or mime.hasImage():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        mime = event.mimeData()
        for path in _gguf_paths(mime):
            self.models_view.import_gguf(path)
        files = [p for p in local_files_of(mime) if p not in _gguf_paths(mime)]
        if files:                                   # images and documents
            self.chat.input.attach(files)
        elif mime.hasImage():
            self.chat.input.editor.insertFromMimeData(mime)
        event.acceptProposedAction()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        """Stop what runs, saving an answer in progress as far as it got."""
        self.controller.shutdown()
        self.models_controller.loader.cancel()
        self.runner.shutdown()
        super().closeEvent(event)


def _gguf_paths(mime) -> list[str]:
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls()
            if u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf")]
