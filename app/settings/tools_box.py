"""Settings → Tools: the built-in tools on or off and the MCP servers the model may use,
each asking before every call or always allowed; "Test" starts a server and lists its
tools (off the GUI thread); the tools the user always allowed from a call's question can
be asked about again."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from app.chat.tool_gate import server_of
from app.settings.store import Settings
from app.verdict import set_verdict, verdict_label
from app.workers import CallJob, JobRunner
from engine.tools.mcp_client import list_tools

ASK, ALWAYS = "ask before each call", "always allow"


def describe_server(record: dict) -> str:
    return f"{record['name']}: {record['target']} ({ASK if record.get('ask', True) else ALWAYS})"


class ToolsBox(QGroupBox):
    def __init__(self, settings: Settings, runner: JobRunner | None = None) -> None:
        super().__init__("Tools (the model may call them; every call is shown in the chat)")
        self.setObjectName("toolsBox")
        self.runner = runner
        self.test_job: CallJob | None = None
        self._testing: dict = {}
        self.allowed_tools = list(settings.allowed_tools)
        layout = QVBoxLayout(self)
        self.builtin = QCheckBox("built-in tools: calculator and current time")
        self.builtin.setChecked(settings.builtin_tools)
        layout.addWidget(self.builtin)
        self.servers = QListWidget()
        self.servers.setMaximumHeight(80)
        self.servers.setToolTip("MCP servers (stdio command line or streamable HTTP URL)")
        for record in settings.mcp_servers:
            self._show(dict(record))
        layout.addWidget(self.servers)
        row = QHBoxLayout()
        self.name = QLineEdit()
        self.name.setPlaceholderText("name")
        self.name.setMaximumWidth(110)
        self.target = QLineEdit()
        self.target.setPlaceholderText("command line, or http://host/mcp")
        self.target.setMinimumWidth(220)
        self.ask = QComboBox()
        self.ask.addItems([ASK, ALWAYS])
        add, remove = QPushButton("Add"), QPushButton("Remove")
        add.setObjectName("addServer")
        remove.setObjectName("removeServer")
        add.clicked.connect(self.add_server)
        remove.clicked.connect(self.remove_server)
        self.test_button = QPushButton("Test")
        self.test_button.setObjectName("testServer")
        self.test_button.setToolTip("Start the selected server and list its tools")
        self.test_button.clicked.connect(self.test_server)
        self.test_button.setEnabled(False)
        self.servers.itemSelectionChanged.connect(
            lambda: self.test_button.setEnabled(runner is not None and self._selected()
                                                is not None))
        for widget in (self.name, self.target, self.ask, add, remove, self.test_button):
            row.addWidget(widget)
        row.setStretchFactor(self.target, 1)
        layout.addLayout(row)
        self.status = verdict_label(name="testStatus")
        self.status.hide()
        layout.addWidget(self.status)
        allowed = QHBoxLayout()
        self.allowed_label = QLabel("")
        self.allowed_label.setWordWrap(True)
        self.ask_again = QPushButton("Ask again")
        self.ask_again.setObjectName("askAgain")
        self.ask_again.setToolTip("Ask before every call of these tools again")
        self.ask_again.clicked.connect(self._ask_again)
        allowed.addWidget(self.allowed_label, 1)
        allowed.addWidget(self.ask_again)
        layout.addLayout(allowed)
        self._show_allowed()

    def _show(self, record: dict) -> None:
        item = QListWidgetItem(describe_server(record))
        item.setData(Qt.UserRole, record)
        self.servers.addItem(item)

    def add_server(self) -> None:
        """The typed server joins the list (a name defaults to the command's first word)."""
        target = self.target.text().strip()
        if not target:
            return
        name = self.name.text().strip() or target.split()[0].rsplit("/", 1)[-1]
        self._show({"name": name, "target": target, "ask": self.ask.currentText() == ASK})
        self.name.clear()
        self.target.clear()

    def remove_server(self) -> None:
        for item in self.servers.selectedItems():
            self.servers.takeItem(self.servers.row(item))

    def _selected(self) -> dict | None:
        items = self.servers.selectedItems()
        return dict(items[0].data(Qt.UserRole)) if items else None

    def test_server(self) -> None:
        """Start the selected server and list its tools (off the GUI thread)."""
        record = self._selected()
        if record is None or self.runner is None:
            return
        self._say(f"Starting {record['name']} and asking for its tools…", None)
        self.test_job = job = CallJob(lambda: list_tools(server_of(record)))
        self._testing = record
        # bound slots only: a lambda would run on the job's thread and touch widgets there
        job.result.connect(self._tested)
        job.failed.connect(self._test_failed)
        self.test_button.setEnabled(False)
        self.runner.start(job)

    def _test_failed(self, message: str) -> None:
        self.test_button.setEnabled(True)
        self._say(message, False)

    def _tested(self, tools: list) -> None:
        record = self._testing
        self.test_button.setEnabled(True)
        names = ", ".join(t.name for t in tools)
        self._say(f"{record['name']} answers with {len(tools)} tool(s)"
                  + (f": {names}" if names else " (it offers none)"), True)
        for i in range(self.servers.count()):
            item = self.servers.item(i)
            if item.data(Qt.UserRole) == record:
                item.setToolTip("\n".join(f"{t.name}: {t.description}" for t in tools)
                                or "no tools")

    def _say(self, text: str, ok: bool | None) -> None:
        set_verdict(self.status, text, ok)
        self.status.show()

    def _show_allowed(self) -> None:
        names = ", ".join(self.allowed_tools)
        self.allowed_label.setText(f"Always allowed from a call's question: {names}"
                                   if names else "")
        self.allowed_label.setVisible(bool(names))
        self.ask_again.setVisible(bool(names))

    def _ask_again(self) -> None:
        self.allowed_tools = []
        self._show_allowed()

    def records(self) -> list[dict]:
        return [dict(self.servers.item(i).data(Qt.UserRole)) for i in range(self.servers.count())]
