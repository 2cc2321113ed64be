"""A connection to a remote engine: its URL, its kind, its API key; and what the URL's
answers say about the kind when the user did not choose one."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from engine.errors import RemoteError

KINDS = ("openai", "ollama")
API_KEY_ENV = "LANTERN_API_KEY"


@dataclass(frozen=True)
class Connection:
    url: str                        # e.g. "http://127.0.0.1:11434" or "https://gpu.lab/v1"
    kind: str = "auto"              # "auto", "openai" or "ollama"
    api_key: str = field(default="", repr=False)  # never logged, in history or in messages

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteError(f"{self.url!r} is not a server URL: write it as "
                              "http://HOST:PORT or https://HOST (e.g. http://127.0.0.1:11434)")
        if self.kind not in ("auto", *KINDS):
            raise RemoteError(f"unknown server kind {self.kind!r}: choose auto, "
                              + " or ".join(KINDS))

    @property
    def base(self) -> str:
        """The URL without a trailing slash or a trailing /v1 (each API adds its own path)."""
        url = self.url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url

    @property
    def host(self) -> str:
        """host[:port], the label shown beside the server's models."""
        return urlsplit(self.url).netloc.rpartition("@")[2]

    @property
    def plain_http_warning(self) -> str | None:
        """Why sending to this URL is unsafe (plain http to another machine), else None."""
        parts = urlsplit(self.url)
        if parts.scheme == "https" or is_loopback(parts.hostname or ""):
            return None
        return (f"{self.host} is reached over plain http: prompts, answers"
                + (" and the API key" if self.api_key else "")
                + " cross the network unencrypted. Use https unless you trust that network.")

    def with_kind(self, kind: str) -> Connection:
        return replace(self, kind=kind)


def is_loopback(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False
