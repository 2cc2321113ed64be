"""Settings → Tools: the built-in tools on or off and the MCP servers the model may use,
each asking before every call or always allowed."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from app.settings.store import Settings

ASK, ALWAYS = "ask before each call", "always allow"


def describe_server(record: dict) -> str:
    return f"{record['name']}: {record['target']} ({ASK if record.get('ask', True) else ALWAYS})"


class ToolsBox(QGroupBox):
    def __init__(self, settings: Settings) -> None:
        super().__init__("Tools (the model may call them; every call is shown in the chat)")
        self.setObjectName("toolsBox")
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
        for widget in (self.name, self.target, self.ask, add, remove):
            row.addWidget(widget)
        row.setStretchFactor(self.target, 1)
        layout.addLayout(row)

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

    def records(self) -> list[dict]:
        return [dict(self.servers.item(i).data(Qt.UserRole)) for i in range(self.servers.count())]
