"""Settings: sampling options under Ollama's names (empty = the model's own value, shown
as the placeholder), system prompt, context size, provider, exact mode, weights (the
GGUF's own, or an opt-in re-quantization labelled NOT exact), image size cap.

Only values the user typed are stored, so a model's params layer keeps supplying the
rest. The options are checked with the engine's own Options.resolve before the dialog
closes, so a typo is reported here rather than at the next message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.scrolling_page import ScrollingPage
from app.settings.connections import ConnectionsDialog, describe
from app.settings.store import Settings
from app.settings.tools_box import ToolsBox
from app.workers import JobRunner
from engine.chat.options import Options
from engine.errors import LanternError
from engine.runtime.loader import REQUANTIZATIONS
from engine.runtime.providers import available_providers
from engine.runtime.speculation import CHOICES as SPECULATE_CHOICES

SAMPLING = ("temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty",
            "repeat_last_n", "presence_penalty", "frequency_penalty", "seed", "num_predict")
KINDS = {f.name: f.type for f in fields(Options)}
HINTS = {
    "temperature": "0 = always the most likely token",
    "top_k": "keep the k most likely tokens (0: off)",
    "top_p": "keep tokens up to this cumulative probability",
    "min_p": "drop tokens below this fraction of the best one",
    "typical_p": "locally typical sampling (1: off)",
    "repeat_penalty": "penalise recently seen tokens (1: off)",
    "repeat_last_n": "how far back the penalties look (-1: all)",
    "presence_penalty": "subtract once per seen token",
    "frequency_penalty": "subtract per occurrence",
    "seed": "-1: a new random seed each time",
    "num_predict": "most tokens per answer (-1: until done)",
}
PROVIDER_LABELS = {"cpu": "CPU", "cuda": "CUDA (NVIDIA GPU)", "coreml": "Core ML (Apple)"}


def parse_option(name: str, text: str) -> object:
    """The typed value of a field's text ("" is not set); ValueError names the option."""
    text = text.strip()
    kind = KINDS[name]
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ValueError(f"{name} must be {what}, got {text!r}") from None


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, params_layer: Mapping[str, object] | None = None,
                 system_layer: str | None = None, parent: QWidget | None = None,
                 runner: JobRunner | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.connections = [dict(r) for r in settings.connections]
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.setMinimumWidth(560)
        self.original = settings
        self.params_layer = dict(params_layer or {})
        defaults = Options.resolve(self.params_layer)
        outer = QVBoxLayout(self)
        self.scroll = ScrollingPage(outer, "settingsScroll")
        layout = self.scroll.groups

        layout.addWidget(self._sampling_box(settings, defaults))
        layout.addWidget(self._conversation_box(settings, system_layer))
        layout.addWidget(self._engine_box(settings))
        layout.addWidget(self._connections_box(runner is not None))
        self.tools = ToolsBox(settings, runner)
        layout.addWidget(self.tools)

        self.error = QLabel("")
        self.error.setObjectName("dialogError")
        self.error.setWordWrap(True)
        self.error.hide()
        outer.addWidget(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        outer.addWidget(buttons)
        self.scroll.fit_screen(self)

    def _sampling_box(self, settings: Settings, defaults: Options) -> QGroupBox:
        """The sampling options, each empty where the model's value holds."""
        sampling = QGroupBox("Sampling (empty: the model's value, shown in grey)")
        form = QFormLayout(sampling)
        self.option_edits: dict[str, QLineEdit] = {}
        for name in SAMPLING:
            edit = QLineEdit()
            edit.setPlaceholderText(str(getattr(defaults, name)))
            edit.setToolTip(HINTS[name])
            if name in settings.options:
                edit.setText(str(settings.options[name]))
            self.option_edits[name] = edit
            form.addRow(name, edit)
        self.stop_edit = QPlainTextEdit()
        self.stop_edit.setPlaceholderText("\n".join(defaults.stop) or "one stop string per line")
        self.stop_edit.setFixedHeight(60)
        if isinstance(settings.options.get("stop"), list):
            self.stop_edit.setPlainText("\n".join(settings.options["stop"]))
        form.addRow("stop", self.stop_edit)
        return sampling

    def _conversation_box(self, settings: Settings, system_layer: str | None) -> QGroupBox:
        """System prompt, context size and thinking."""
        conversation = QGroupBox("Conversation")
        form = QFormLayout(conversation)
        self.system_edit = QPlainTextEdit(settings.system)
        self.system_edit.setPlaceholderText(system_layer or "the model's own system prompt")
        self.system_edit.setFixedHeight(70)
        form.addRow("system prompt", self.system_edit)
        self.num_ctx = QSpinBox()
        self.num_ctx.setRange(256, 131072)
        self.num_ctx.setSingleStep(1024)
        self.num_ctx.setValue(settings.num_ctx)
        self.num_ctx.setToolTip("num_ctx: tokens the model can see at once (reloads the model)")
        form.addRow("context size (num_ctx)", self.num_ctx)
        self.think = QCheckBox("let thinking models (Qwen3, DeepSeek-R1) think before answering")
        self.think.setChecked(settings.think)
        self.think.setToolTip("Off sends Ollama's think=false: models whose template allows "
                              "it answer at once")
        form.addRow("thinking", self.think)
        return conversation

    def _engine_box(self, settings: Settings) -> QGroupBox:
        """How the model runs here: provider, exact mode, weights, speculation, images."""
        engine = QGroupBox("Engine (changes reload the model)")
        form = QFormLayout(engine)
        self.provider = QComboBox()
        for name in available_providers():
            self.provider.addItem(PROVIDER_LABELS.get(name, name), name)
        index = self.provider.findData(settings.provider)
        self.provider.setCurrentIndex(max(0, index))
        form.addRow("provider", self.provider)
        self.exact = QCheckBox("fp32 activations: slower, closest to the reference")
        self.exact.setChecked(settings.exact)
        form.addRow("exact mode", self.exact)
        self.requantize = QComboBox()
        self.requantize.addItem("the GGUF's own weights, exactly", "")
        for spec in REQUANTIZATIONS:
            block = spec.partition("/")[2] or "32"
            self.requantize.addItem(f"re-quantized to 4-bit, blocks of {block}: faster, "
                                    "NOT exact", spec)
        self.requantize.setCurrentIndex(max(0, self.requantize.findData(settings.requantize)))
        self.requantize.setToolTip("Rounds every weight again to 4 bits for speed: answers "
                                   "change slightly. Exact mode always runs the GGUF's own.")
        self.requantize.setEnabled(not settings.exact)
        self.exact.toggled.connect(lambda on: self.requantize.setEnabled(not on))
        form.addRow("weights", self.requantize)
        self.speculate = QComboBox()
        self.speculate.setEditable(True)  # or type a draft model's name from the store
        for choice in SPECULATE_CHOICES:
            self.speculate.addItem(choice)
        self.speculate.setCurrentText(settings.speculate)
        self.speculate.setToolTip(
            "Speculative decoding: the same answer, faster where the reply repeats text. "
            "auto: prompt lookup, or a draft model when one in the store pays (off on CUDA "
            "and CoreML, whose verify steps may round differently); ngram: prompt lookup only "
            "(there a near-tie token may differ); off; or the name of a smaller model with "
            "the same vocabulary.")
        form.addRow("speculative decoding", self.speculate)
        pixels = QHBoxLayout()
        self.max_pixels = QSpinBox()
        self.max_pixels.setRange(3136, 12_845_056)
        self.max_pixels.setSingleStep(262_144)
        self.max_pixels.setGroupSeparatorShown(True)
        self.max_pixels.setValue(settings.max_pixels)
        pixels.addWidget(self.max_pixels)
        pixels.addWidget(QLabel("pixels (larger images are scaled down)"))
        form.addRow("max image size", pixels)
        return engine

    def _connections_box(self, can_manage: bool) -> QGroupBox:
        """The servers whose models join the list."""
        remote = QGroupBox("Connections (remote engines: Ollama, vLLM, SGLang, llama-server)")
        row = QHBoxLayout(remote)
        self.connections_label = QLabel("")
        self.connections_label.setWordWrap(True)
        row.addWidget(self.connections_label, 1)
        manage = QPushButton("Connections…")
        manage.setObjectName("manageConnections")
        manage.clicked.connect(self.edit_connections)
        manage.setEnabled(can_manage)
        row.addWidget(manage)
        self._show_connections()
        return remote

    def options(self) -> dict[str, object]:
        """The sampling values the user set (ValueError when one is not a number)."""
        chosen: dict[str, object] = {}
        for name, edit in self.option_edits.items():
            if edit.text().strip():
                chosen[name] = parse_option(name, edit.text())
        stops = [line for line in self.stop_edit.toPlainText().splitlines() if line]
        if stops:
            chosen["stop"] = stops
        return chosen

    def result_settings(self) -> Settings:
        return replace(
            self.original,
            options=self.options(),
            system=self.system_edit.toPlainText().strip(),
            num_ctx=self.num_ctx.value(),
            think=self.think.isChecked(),
            provider=self.provider.currentData() or "cpu",
            exact=self.exact.isChecked(),
            requantize="" if self.exact.isChecked() else self.requantize.currentData() or "",
            speculate=self.speculate.currentText().strip() or "auto",
            max_pixels=self.max_pixels.value(),
            connections=[dict(r) for r in self.connections],
            builtin_tools=self.tools.builtin.isChecked(),
            mcp_servers=self.tools.records(),
            allowed_tools=self.tools.allowed_tools,
        )

    def edit_connections(self) -> None:
        dialog = ConnectionsDialog(self.connections, self.runner, self)
        if dialog.exec():
            self.connections = dialog.records
            self._show_connections()

    def _show_connections(self) -> None:
        hosts = [describe(r) for r in self.connections]
        self.connections_label.setText("\n".join(hosts) if hosts else
                                       "none: only the models on this computer are listed")

    def accept(self) -> None:
        try:
            Options.resolve(self.params_layer, self.options())
        except (ValueError, LanternError) as error:
            self.error.setText(str(error))
            self.error.show()
            return
        super().accept()
