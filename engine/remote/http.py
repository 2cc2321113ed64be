"""HTTP to a remote engine with the standard library: TLS verified by the default context,
a timeout on connecting, none while a long answer streams, and ``abort`` from any thread
ends a blocked read (that is how Stop closes the request).

Every failure becomes one RemoteError line naming the host and what to do; the API key
travels only in the Authorization header.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from urllib.parse import urlsplit

from engine.errors import Remedy, RemoteError
from engine.remote.connection import Connection

CONNECT_TIMEOUT_S = 10.0
METADATA_TIMEOUT_S = 30.0       # listing models and the like; a streamed answer has none
ERROR_DETAIL_CHARS = 300


class Stream:
    """One request's answer, read line by line by one thread; ``abort`` may come from
    another."""

    def __init__(self, connection: http.client.HTTPConnection,
                 response: http.client.HTTPResponse, host: str) -> None:
        self._connection, self._response, self.host = connection, response, host
        self._socket = connection.sock

    def lines(self) -> Iterator[bytes]:
        """Non-empty lines as they arrive; ends at the end of the answer. A connection lost
        mid-answer ends it too: the protocol layer notices the missing final message."""
        try:
            while True:
                line = self._response.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield line
        except (OSError, ValueError, http.client.HTTPException):
            return  # cut, or closed by ``close``: the caller tells which

    def read(self) -> bytes:
        """The whole (non-streamed) body."""
        try:
            return self._response.read()
        except (OSError, http.client.HTTPException) as error:
            raise RemoteError(f"{self.host} cut its answer ({type(error).__name__})") from None

    def abort(self) -> None:
        """End the request from any thread: a read blocked on it returns at once (the
        reading thread then closes the stream)."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the connection (from the reading thread)."""
        self.abort()
        self._response.close()
        self._connection.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_request(connection: Connection, method: str, path: str, body: object = None,
                 read_timeout: float | None = None) -> Stream:
    """Send a request and return its answer once the status is 2xx."""
    parts = urlsplit(connection.base)
    host = connection.host
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=CONNECT_TIMEOUT_S,
            context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT_S)
    try:
        conn.connect()
    except ssl.SSLCertVerificationError as error:
        raise RemoteError(f"{host}'s TLS certificate is not trusted ({error.verify_message}): "
                          "fix the server's certificate or its URL") from None
    except TimeoutError:
        raise RemoteError(f"cannot reach {host}: no answer to the connection within "
                          f"{CONNECT_TIMEOUT_S:.0f} s; check the URL and the network") from None
    except ConnectionRefusedError:
        raise RemoteError(f"cannot reach {host}: connection refused. Is the server running, "
                          "and is the port right?") from None
    except socket.gaierror:
        raise RemoteError(f"cannot reach {host}: the host name does not resolve; "
                          "check the URL") from None
    except OSError as error:
        raise RemoteError(f"cannot reach {host}: {error.strerror or error}") from None
    headers = {"Accept": "application/json, text/event-stream, application/x-ndjson"}
    if connection.api_key:
        headers["Authorization"] = f"Bearer {connection.api_key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.sock.settimeout(read_timeout)
        conn.request(method, parts.path.rstrip("/") + path, body=data, headers=headers)
        response = conn.getresponse()
    except TimeoutError:
        conn.close()
        raise RemoteError(f"{host} did not answer {path} within {read_timeout:.0f} s: is "
                          "this the server's URL?") from None
    except (OSError, http.client.HTTPException) as error:
        conn.close()
        raise RemoteError(f"{host} dropped the connection on {path} ({type(error).__name__}): "
                          "is this the server's URL and protocol (http or https)?") from None
    if response.status >= 400:
        detail = _error_detail(response)
        conn.close()
        raise _status_error(host, path, response.status, detail)
    return Stream(conn, response, host)


def get_json(connection: Connection, path: str) -> object:
    return _json_answer(connection, "GET", path, None, METADATA_TIMEOUT_S)


def post_json(connection: Connection, path: str, body: object,
              read_timeout: float | None = METADATA_TIMEOUT_S) -> object:
    """A JSON request and its JSON answer; ``read_timeout=None`` for a whole generated answer
    (it may take minutes)."""
    return _json_answer(connection, "POST", path, body, read_timeout)


def _json_answer(connection: Connection, method: str, path: str, body: object,
                 read_timeout: float | None) -> object:
    with open_request(connection, method, path, body, read_timeout=read_timeout) as stream:
        raw = stream.read()
    try:
        return json.loads(raw)
    except ValueError:
        raise RemoteError(f"{connection.host} answered {path} with something that is not "
                          f"JSON ({raw[:60]!r}…): is this the server's URL?") from None


def _error_detail(response: http.client.HTTPResponse) -> str:
    try:
        raw = response.read(64 * 1024)
    except (OSError, http.client.HTTPException):
        return ""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:ERROR_DETAIL_CHARS]
    error = data.get("error", data.get("detail", data)) if isinstance(data, dict) else data
    if isinstance(error, dict):
        error = error.get("message", error)
    return str(error)[:ERROR_DETAIL_CHARS]


def _status_error(host: str, path: str, status: int, detail: str) -> RemoteError:
    said = f": {detail}" if detail else ""
    if status in (401, 403):
        return RemoteError(f"{host} refused the request ({status}){said}. The API key is "
                           "missing or wrong: set it for this connection", remedy=Remedy.API_KEY)
    if status == 404:
        return RemoteError(f"{host} has no {path} ({status}){said}")
    return RemoteError(f"{host} answered {path} with {status}{said}")


def detect_kind(connection: Connection) -> Connection:
    """The connection with its kind settled: Ollama answers /api/tags, an OpenAI-compatible
    server /v1/models. A chosen kind is kept as it is."""
    if connection.kind != "auto":
        return connection
    failures = []
    for kind, path in (("ollama", "/api/tags"), ("openai", "/v1/models")):
        try:
            answer = get_json(connection, path)
        except RemoteError as error:
            if "cannot reach" in str(error) or "did not answer" in str(error):
                raise
            failures.append(str(error))
            continue
        if isinstance(answer, dict) and isinstance(answer.get("models" if kind == "ollama"
                                                             else "data"), list):
            return connection.with_kind(kind)
    raise RemoteError(f"{connection.host} answered neither Ollama's /api/tags nor an "
                      "OpenAI-compatible /v1/models: check the URL"
                      + (f" ({failures[-1]})" if failures else ""))
