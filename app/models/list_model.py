"""The models of the store as a list model: listed at once from the manifests, then
described one by one on a worker thread (opening a GGUF reads its whole header).

Models that cannot run stay in the list, disabled, with the reason on their second line
after what they are (family, size, quantization), so a user sees why their download is
not usable instead of wondering where it went.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, Qt, Signal

from app.hints import explain, with_hint
from app.workers import Job
from engine.catalog.runnable import open_checked
from engine.errors import LanternError
from engine.prompt import template_kind
from engine.remote.connection import Connection
from engine.remote.session import RemoteModel, list_remote_models
from engine.store import LocalModel, Store, StoreProblem
from engine.store.humanize import human_bytes

COMPLETION_ONLY = "completion only"
COMPLETION_ONLY_WHY = ("Completion only: the model has no chat template (a base model), so "
                       "your message is its prompt as typed, with no turns, as Ollama runs "
                       "it. Chat works best with an instruct model.")


@dataclass(frozen=True)
class ModelEntry:
    """What the sidebar shows about one model."""

    name: str                           # display name, e.g. "qwen2.5vl:latest"
    size: int = 0                       # bytes on disk (all layers)
    family: str = ""                    # GGUF architecture
    parameter_size: str = ""            # "494.03M"
    quantization: str = ""              # "Q4_K_M"
    vision: bool = False
    problem: str | None = None          # why it cannot run; None when it can
    checked: bool = False               # the GGUF has been opened (family etc. confirmed)
    completion_only: bool = False       # no chat template: the prompt goes in as typed
    model: LocalModel | None = None
    remote: RemoteModel | None = None   # a model on a server (then `model` is None)
    server: str = ""                    # host of the server it is on ("" for the store)

    @property
    def runnable(self) -> bool:
        return self.problem is None and (self.model is not None or self.remote is not None)

    @property
    def host(self) -> str:
        """The server a remote model runs on; "" for a local one."""
        return self.server

    @property
    def brief_problem(self) -> str | None:
        """The problem in one short line: file paths cut to their names, digests shortened,
        the "where:" prefix dropped (the tooltip keeps the whole message)."""
        return brief(self.problem) if self.problem else None

    @property
    def line(self) -> str:
        """The second line: what the model is, then why it cannot run, if it cannot."""
        return " — ".join(p for p in (self.details, self.brief_problem) if p)

    @property
    def details(self) -> str:
        if self.remote is not None:
            return " · ".join(p for p in (f"on {self.host}", self.remote.info.details) if p)
        parts = [self.parameter_size, self.family, self.quantization,
                 human_bytes(self.size) if self.size else "",
                 COMPLETION_ONLY if self.completion_only else ""]
        return " · ".join(p for p in parts if p)


def brief(message: str) -> str:
    text = re.sub(r"(?:/[^\s/:;,]+)+/?", lambda m: Path(m.group()).name or m.group(), message)
    text = re.sub(r"\b([0-9a-f]{8})[0-9a-f]{8,}\b", r"\1…", text)
    head, sep, tail = text.partition(": ")
    return tail if sep and tail else text


def listed_entry(model: LocalModel) -> ModelEntry:
    """An entry from the manifest and config blob alone (fast; not yet checked)."""
    config = model.config
    return ModelEntry(
        name=model.name.display,
        size=model.size,
        family=str(config.get("model_family") or ""),
        parameter_size=str(config.get("model_type") or ""),
        quantization=str(config.get("file_type") or ""),
        vision=model.projector_path is not None,
        model=model,
    )


def described_entry(entry: ModelEntry) -> ModelEntry:
    """Open the GGUF (and projector) to confirm what the model is and that it can run: its
    architecture and its tokenizer's kind are ones Lantern runs."""
    if entry.model is None:          # a broken manifest: nothing to open
        return entry
    try:
        config = open_checked(entry.model).config
    except LanternError as error:
        return replace(entry, problem=explain(error), checked=True)
    return replace(
        entry,
        family=config.architecture,
        # the store's own figure first: `lantern show` and Ollama print it (a GGUF that also
        # stores a tied embedding as output.weight would count it twice)
        parameter_size=entry.parameter_size or config.parameter_size,
        quantization=config.quantization or entry.quantization,
        vision=config.vision is not None,
        checked=True,
        completion_only=template_kind(entry.model.template, config.chat_template) == "default",
    )


def problem_entry(problem: StoreProblem) -> ModelEntry:
    """A manifest that does not load as a model: damaged, or a sound model in a form Lantern
    does not run (then with its size, and what to do)."""
    size = problem.listing.size if problem.listing is not None else 0
    return ModelEntry(problem.name, size=size,
                      problem=with_hint(problem.message, problem.remedy), checked=True)


class StoreScanJob(Job):
    """Lists the store, then describes each model; cancel stops between models."""

    listed = Signal(object)        # list[ModelEntry]
    described = Signal(int, object)  # row, ModelEntry

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def work(self) -> None:
        models, problems = self.store.scan()
        entries = [listed_entry(m) for m in models]
        entries += [problem_entry(p) for p in problems]
        self.listed.emit(entries)
        for row, entry in enumerate(entries):
            if self.cancel_event.is_set():
                return
            if not entry.checked:
                self.described.emit(row, described_entry(entry))


def remote_entries(connection: Connection) -> list[ModelEntry]:
    """A server's models as entries named "model @ host"; an unreachable server is one
    disabled entry whose second line says why."""
    try:
        connection, models = list_remote_models(connection)
    except LanternError as error:
        return [ModelEntry(f"{connection.host} (server)", problem=explain(error), checked=True,
                           server=connection.host)]
    return [ModelEntry(f"{info.name} @ {connection.host}", vision=info.vision is True,
                       checked=True, remote=RemoteModel(connection, info),
                       server=connection.host) for info in models]


class RemoteScanJob(Job):
    """Lists every connection's models (each server asked in turn, off the GUI thread)."""

    listed = Signal(object)        # list[ModelEntry]

    def __init__(self, connections: list[Connection]) -> None:
        super().__init__()
        self.connections = connections

    def work(self) -> None:
        entries: list[ModelEntry] = []
        for connection in self.connections:
            if self.cancel_event.is_set():
                return
            entries += remote_entries(connection)
        self.listed.emit(entries)


class ModelListModel(QAbstractListModel):
    """Rows of ModelEntry; models that cannot run are disabled, their reason as tooltip."""

    EntryRole = Qt.UserRole + 1
    DetailsRole = Qt.UserRole + 2
    VisionRole = Qt.UserRole + 3
    ProblemRole = Qt.UserRole + 4
    CheckedRole = Qt.UserRole + 5

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.entries: list[ModelEntry] = []

    def roleNames(self) -> dict[int, bytes]:  # noqa: N802 (Qt override)
        return {Qt.DisplayRole: b"name", self.EntryRole: b"entry", self.DetailsRole: b"details",
                self.VisionRole: b"vision", self.ProblemRole: b"problem",
                self.CheckedRole: b"checked"}

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.entries)

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole) -> object:
        if not index.isValid():
            return None
        entry = self.entries[index.row()]
        if role == Qt.DisplayRole:
            return entry.name
        if role == self.DetailsRole:
            return entry.line
        if role == self.ProblemRole:
            return entry.brief_problem
        if role == self.VisionRole:
            return entry.vision
        if role == self.CheckedRole:
            return entry.checked
        if role == self.EntryRole:
            return entry
        if role == Qt.ToolTipRole:
            return entry.problem or "\n".join(
                [entry.name, entry.details] + ([COMPLETION_ONLY_WHY] if entry.completion_only
                                               else []))
        return None

    def flags(self, index: QModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.NoItemFlags
        entry = self.entries[index.row()]
        return Qt.ItemIsEnabled | Qt.ItemIsSelectable if entry.problem is None \
            else Qt.NoItemFlags

    def set_entries(self, entries: list[ModelEntry]) -> None:
        self.beginResetModel()
        self.entries = list(entries)
        self.endResetModel()

    def update_entry(self, row: int, entry: ModelEntry) -> None:
        if 0 <= row < len(self.entries) and self.entries[row].name == entry.name:
            self.entries[row] = entry
            index = self.index(row)
            self.dataChanged.emit(index, index)

    def row_of(self, name: str) -> int:
        return next((r for r, e in enumerate(self.entries) if e.name == name), -1)

    def entry(self, row: int) -> ModelEntry:
        return self.entries[row]
