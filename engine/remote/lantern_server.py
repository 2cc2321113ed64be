"""Where a Lantern server listens, and whether one that serves a given store answers there.
Kept free of the engine's heavy imports: `lantern run` asks before it loads anything."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

from engine.errors import LanternError, RemoteError
from engine.remote.connection import Connection
from engine.remote.http import open_request

HOST_ENV = "LANTERN_HOST"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 11435            # Ollama's 11434 plus one: both may run side by side
PROBE_TIMEOUT_S = 2.0


def server_address(host: str | None = None, port: int | None = None) -> tuple[str, int]:
    """``host``/``port`` where given, else $LANTERN_HOST ("HOST", "HOST:PORT" or
    "http://HOST:PORT"), else 127.0.0.1:11435."""
    text = os.environ.get(HOST_ENV, "").strip()
    parts = urlsplit(text if "//" in text else f"//{text}") if text else None
    try:
        env_port = parts.port if parts else None
    except ValueError:
        raise LanternError(f"${HOST_ENV}={text!r} is not HOST:PORT") from None
    return (host or (parts.hostname if parts else None) or DEFAULT_HOST,
            port or env_port or DEFAULT_PORT)


def server_url(host: str | None = None, port: int | None = None) -> str:
    host, port = server_address(host, port)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def find_server(url: str, models_dir: Path) -> Connection | None:
    """The connection to a Lantern server at ``url`` that serves the store at
    ``models_dir``; None when nothing answers there, or another server (Ollama, another
    store) does."""
    connection = Connection(url, "ollama")
    try:
        with open_request(connection, "GET", "/api/version",
                          read_timeout=PROBE_TIMEOUT_S) as stream:
            answer = json.loads(stream.read())
    except (RemoteError, ValueError):
        return None
    lantern = answer.get("lantern") if isinstance(answer, dict) else None
    if not isinstance(lantern, dict) or not lantern.get("models_dir"):
        return None
    served = Path(str(lantern["models_dir"]))
    return connection if _same_folder(served, models_dir) else None


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
