"""The question before a tool call that touches the outside world: a window-modal box
that never blocks the GUI thread (the worker waits for the answer, not the GUI)."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QMessageBox, QWidget

from app.chat.tool_gate import Answer
from engine.chat.tools import ToolCall


def ask_allow(parent: QWidget, call: ToolCall, where: str, answer: Answer) -> QMessageBox:
    """Open the question; Allow or Deny (or closing it) answers the waiting worker."""
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    box = QMessageBox(QMessageBox.Question, "Allow this tool call?",
                      f"The model wants to run {call.name} on {where} with {arguments}.\n\n"
                      "Allow it? (Settings → Tools can always allow a whole server.)",
                      QMessageBox.NoButton, parent)
    box.setObjectName("toolConfirm")
    allow = box.addButton("Allow", QMessageBox.AcceptRole)
    always = box.addButton(f"Always allow {call.name}", QMessageBox.AcceptRole)
    always.setObjectName("alwaysAllow")
    box.addButton("Deny", QMessageBox.RejectRole)
    box.finished.connect(lambda _: answer.give(box.clickedButton() in (allow, always),
                                               always=box.clickedButton() is always))
    box.open()
    return box
