"""Settings → Connections: the remote engines whose models join the picker.

Each connection is a URL, a kind (detected from the server's answers unless chosen) and
an optional API key, shown masked. Plain http to another machine is accepted only after
the user confirms the warning. "Test" lists the server's models off the GUI thread.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.verdict import set_verdict, verdict_label
from app.workers import CallJob, JobRunner
from engine.errors import LanternError
from engine.remote.connection import Connection
from engine.remote.session import list_remote_models

KIND_LABELS = {"auto": "detect from the server", "openai": "OpenAI-compatible (vLLM, SGLang, "
               "llama-server, LM Studio)", "ollama": "Ollama (native API)"}


def connection_of(record: dict) -> Connection:
    """A stored record as a Connection (RemoteError when it no longer parses)."""
    return Connection(str(record.get("url", "")), str(record.get("kind", "auto")),
                      str(record.get("api_key", "")))


def record_of(connection: Connection) -> dict:
    return {"url": connection.url, "kind": connection.kind, "api_key": connection.api_key}


def describe(record: dict) -> str:
    key = " · API key set" if record.get("api_key") else ""
    kind = record.get("kind", "auto")
    return f"{record.get('url')}  ({'kind: detect' if kind == 'auto' else kind}{key})"


class ConnectionsDialog(QDialog):
    def __init__(self, records: list[dict], runner: JobRunner,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connections")
        self.setObjectName("connectionsDialog")
        self.setMinimumWidth(620)
        self.runner = runner
        self.records = [dict(r) for r in records]
        self.test_job: CallJob | None = None
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Servers whose models appear in the model list, beside the "
                                "local ones, labelled with their host."))
        self.list = QListWidget()
        self.list.setObjectName("connectionList")
        self.list.currentRowChanged.connect(self._selected)
        layout.addWidget(self.list, 1)

        form = QFormLayout()
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:11434  or  https://gpu-box.example/v1")
        form.addRow("URL", self.url)
        self.kind = QComboBox()
        for kind, label in KIND_LABELS.items():
            self.kind.addItem(label, kind)
        form.addRow("kind", self.kind)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.Password)
        self.api_key.setPlaceholderText("optional; sent only to this server")
        form.addRow("API key", self.api_key)
        layout.addLayout(form)

        buttons = QHBoxLayout()
        for text, slot, name in (("Add", self.add, "addButton"),
                                 ("Update", self.update_selected, "updateButton"),
                                 ("Remove", self.remove, "removeButton"),
                                 ("Test", self.test, "testButton")):
            button = QPushButton(text)
            button.setObjectName(name)
            button.clicked.connect(slot)
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.status = verdict_label(name="connectionStatus")
        layout.addWidget(self.status)
        box = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        box.accepted.connect(self.accept)
        box.rejected.connect(self.reject)
        layout.addWidget(box)
        self._refresh()

    # -- editing ------------------------------------------------------------------------------

    def _typed(self) -> Connection | None:
        """The connection in the fields, after the plain-http confirmation; None if refused."""
        try:
            connection = Connection(self.url.text().strip(), self.kind.currentData(),
                                    self.api_key.text().strip())
        except LanternError as error:
            self._say(str(error), ok=False)
            return None
        warning = connection.plain_http_warning
        if warning and not self.confirm_plain_http(warning):
            self._say("Not saved: use an https URL, or confirm plain http.", ok=False)
            return None
        return connection

    def confirm_plain_http(self, warning: str) -> bool:
        answer = QMessageBox.warning(self, "Unencrypted connection", warning + "\n\nUse it anyway?",
                                     QMessageBox.Yes | QMessageBox.No, QMessageBox.No)
        return answer == QMessageBox.Yes

    def add(self) -> None:
        connection = self._typed()
        if connection is None:
            return
        self.records.append(record_of(connection))
        self._refresh(len(self.records) - 1)
        self._say(f"Added {connection.host}.", ok=True)

    def update_selected(self) -> None:
        row = self.list.currentRow()
        connection = self._typed() if row >= 0 else None
        if connection is not None:
            self.records[row] = record_of(connection)
            self._refresh(row)

    def remove(self) -> None:
        row = self.list.currentRow()
        if row >= 0:
            del self.records[row]
            self._refresh(min(row, len(self.records) - 1))

    def _selected(self, row: int) -> None:
        if 0 <= row < len(self.records):
            record = self.records[row]
            self.url.setText(record.get("url", ""))
            self.kind.setCurrentIndex(max(0, self.kind.findData(record.get("kind", "auto"))))
            self.api_key.setText(record.get("api_key", ""))

    def _refresh(self, select: int = -1) -> None:
        self.list.clear()
        for record in self.records:
            QListWidgetItem(describe(record), self.list)
        if select >= 0:
            self.list.setCurrentRow(select)

    # -- testing --------------------------------------------------------------------------------

    def test(self) -> None:
        """List the typed server's models (off the GUI thread): the quickest proof that the
        URL, the kind and the key are right."""
        try:
            connection = Connection(self.url.text().strip(), self.kind.currentData(),
                                    self.api_key.text().strip())
        except LanternError as error:
            self._say(str(error), ok=False)
            return
        self._say(f"Asking {connection.host} for its models…", ok=None)
        self.test_job = job = CallJob(lambda: list_remote_models(connection))
        # bound slots only: a lambda would run on the job's thread and touch widgets there
        job.result.connect(self._tested)
        job.failed.connect(self._test_failed)
        self.runner.start(job)

    def _test_failed(self, message: str) -> None:
        self._say(message, ok=False)

    def _tested(self, result: tuple) -> None:
        connection, models = result
        names = ", ".join(m.name for m in models[:8]) + (" …" if len(models) > 8 else "")
        self._say(f"{connection.host} answers as {KIND_LABELS[connection.kind]}: "
                  f"{len(models)} model(s){': ' + names if names else ''}", ok=True)

    def _say(self, text: str, ok: bool | None) -> None:
        set_verdict(self.status, text, ok)
