"""One Lantern per user: a second start hands its files to the running window and exits.

The running app listens on a local socket named after the user's config dir (so test
sessions with their own dirs never reach a real Lantern). A later start connects, sends
one JSON line ``{"open": [paths]}`` and waits for ``ok``; the first instance emits
``requested`` with the paths, and the window comes to the front and offers to import them.
macOS hands files to a running app as FileOpen events instead; ``FileOpenEvents`` turns
those into the same request.
"""

from __future__ import annotations

import hashlib
import json
import logging

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

from engine.paths import config_dir

log = logging.getLogger(__name__)
REPLY = b"ok\n"


def server_name() -> str:
    digest = hashlib.sha256(str(config_dir().resolve()).encode()).hexdigest()[:16]
    return f"lantern-{digest}"


def send_to_running(name: str, paths: list[str], timeout_ms: int = 2000) -> bool:
    """True when a running Lantern took the request (it shows itself and opens ``paths``)."""
    socket = QLocalSocket()
    socket.connectToServer(name)
    if not socket.waitForConnected(timeout_ms):
        return False
    socket.write(json.dumps({"open": paths}).encode() + b"\n")
    socket.waitForBytesWritten(timeout_ms)
    reply = b""
    while not reply.endswith(b"\n") and socket.waitForReadyRead(timeout_ms):
        reply += socket.readAll().data()
    socket.disconnectFromServer()
    return reply == REPLY


class InstanceServer(QObject):
    """Listens for later starts; ``requested`` carries the files they were given."""

    requested = Signal(list)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.server = QLocalServer(self)
        self.server.newConnection.connect(self._accept)

    def listen(self) -> bool:
        """Take the name (call after ``send_to_running`` found nobody: a socket file left
        by a crashed instance is removed first). False when the name cannot be taken:
        Lantern then runs on its own."""
        QLocalServer.removeServer(self.name)
        if not self.server.listen(self.name):
            log.warning("single instance: cannot listen on %s: %s", self.name,
                        self.server.errorString())
            return False
        return True

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            socket.readyRead.connect(lambda s=socket: self._read(s))
            socket.disconnected.connect(socket.deleteLater)

    def _read(self, socket: QLocalSocket) -> None:
        if not socket.canReadLine():            # the socket buffers until the line is whole
            return
        line = socket.readLine().data()
        try:
            paths = [str(p) for p in json.loads(line).get("open", [])]
        except (ValueError, AttributeError):
            log.warning("single instance: ignored a malformed request %r", line[:200])
            socket.disconnectFromServer()
            return
        socket.write(REPLY)
        socket.flush()
        log.info("another start asked to open %s", paths or "the window")
        self.requested.emit(paths)


class FileOpenEvents(QObject):
    """An application event filter turning macOS FileOpen events into ``opened(path)``."""

    opened = Signal(str)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.FileOpen and event.file():
            self.opened.emit(event.file())
            return True
        return super().eventFilter(watched, event)


def bring_to_front(window: QWidget) -> None:
    """Show, un-minimise, raise and activate (the window manager may still only flash it)."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()
