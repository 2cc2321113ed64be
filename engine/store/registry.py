"""A client for the OCI distribution API that Ollama's registry (registry.ollama.ai) speaks:
``GET /v2/<namespace>/<model>/manifests/<tag>`` and ``GET /v2/<namespace>/<model>/blobs/<digest>``.

Standard library only. Blob requests may be redirected to a storage host: redirects are
followed by hand so that the registry's Authorization header never travels to another
host. A 401 with ``WWW-Authenticate: Bearer realm=...`` is answered with the anonymous
token flow (``GET realm?service=..&scope=..`` -> ``{"token"}``); anything else that is
refused becomes one ``Unauthorized`` line. Plain http only with ``insecure``.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import threading
from urllib.parse import urlencode, urljoin, urlsplit

from engine import __version__
from engine.errors import ModelNotFound, RegistryError, Remedy, Unauthorized
from engine.store.manifest import MANIFEST_MEDIA_TYPE
from engine.store.names import ModelName

TIMEOUT_S = 30
MAX_REDIRECTS = 5
MAX_MANIFEST_BYTES = 4 << 20
USER_AGENT = f"lantern/{__version__}"
_REDIRECTS = (301, 302, 303, 307, 308)
_LISTS = ("manifest.list.v2+json", "image.index.v1+json")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class Unreachable(RegistryError):
    """No connection, or it broke: worth another try."""


class RegistryClient:
    """One model's repository on one registry; safe to share between download threads."""

    def __init__(self, name: ModelName, insecure: bool = False) -> None:
        self.name = name
        self.insecure = insecure
        self.base = f"{'http' if insecure else 'https'}://{name.host}"
        self.repository = f"{name.namespace}/{name.model}"
        self._token: str | None = None
        self._token_lock = threading.Lock()

    # -- the two requests a pull makes ---------------------------------------------------

    def manifest(self) -> bytes:
        """The manifest's bytes exactly as the registry sent them."""
        response = self.get(f"/v2/{self.repository}/manifests/{self.name.tag}",
                            {"Accept": MANIFEST_MEDIA_TYPE})
        with response:
            if response.status == 404:
                raise ModelNotFound(
                    f"model {self.name.display!r} not found in registry {self.name.host} "
                    f"(404); check the spelling and the tag")
            self._expect(response, (200,), "the manifest")
            media_type = response.getheader("Content-Type", "").split(";")[0].strip()
            if media_type.endswith(_LISTS):      # several platforms' images, not a model
                raise RegistryError(
                    f"registry {self.name.host} sent a {media_type} manifest for "
                    f"{self.name.display}; Lantern pulls Ollama models ({MANIFEST_MEDIA_TYPE})")
            data = response.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            raise RegistryError(f"registry {self.name.host} sent a manifest over "
                                f"{MAX_MANIFEST_BYTES} bytes for {self.name.display}")
        return data

    def blob(self, digest: str, start: int, end: int) -> http.client.HTTPResponse:
        """An open response for bytes [start, end) of a blob (status 206, or 200 when the
        server ignored the Range: then the body starts at byte 0). The caller closes it."""
        response = self.get(f"/v2/{self.repository}/blobs/{digest}",
                            {"Range": f"bytes={start}-{end - 1}"})
        if response.status == 404:
            response.close()
            raise RegistryError(f"registry {self.name.host} has no blob {digest} that the "
                                f"manifest of {self.name.display} lists (404)")
        self._expect(response, (200, 206), f"blob {digest}")
        return response

    # -- plumbing ------------------------------------------------------------------------

    def get(self, path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        """GET with redirects and the anonymous token flow; 401/403 raise Unauthorized."""
        url = self.base + path
        for attempt in range(2):
            token = self._token
            response = self._follow(url, headers, token)
            if response.status not in (401, 403):
                return response
            challenge = response.getheader("WWW-Authenticate", "")
            response.close()
            if attempt == 0 and challenge.lower().startswith("bearer"):
                self._refresh_token(challenge, token)
                continue
            break
        raise Unauthorized(
            f"registry {self.name.host} refused access to {self.name.display} "
            f"({response.status} {response.reason}); the model may be private, or the "
            f"name misspelt")

    def _follow(self, url: str, headers: dict[str, str], token: str | None
                ) -> http.client.HTTPResponse:
        origin = urlsplit(url).netloc
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            send = {"User-Agent": USER_AGENT, **headers}
            if token and parts.netloc == origin:      # never hand the token to another host
                send["Authorization"] = f"Bearer {token}"
            response = self._send(parts.scheme, parts.netloc,
                                  parts.path + (f"?{parts.query}" if parts.query else ""), send)
            if response.status not in _REDIRECTS:
                return response
            location = response.getheader("Location", "")
            response.close()
            url = urljoin(url, location)
            if urlsplit(url).scheme == "http" and not self.insecure:
                raise RegistryError(f"registry {self.name.host} redirected to plain http "
                                    f"({url}); allow plain http for it to follow that",
                                    remedy=Remedy.PLAIN_HTTP)
        raise RegistryError(f"registry {self.name.host} redirected more than "
                            f"{MAX_REDIRECTS} times for {url}")

    def _send(self, scheme: str, netloc: str, target: str, headers: dict[str, str]
              ) -> http.client.HTTPResponse:
        if scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                netloc, timeout=TIMEOUT_S, context=ssl.create_default_context())
        elif scheme == "http" and self.insecure:
            connection = http.client.HTTPConnection(netloc, timeout=TIMEOUT_S)
        else:
            raise RegistryError(f"cannot fetch {scheme}://{netloc}: only https is allowed; "
                                "allow plain http for a plain-http registry",
                                remedy=Remedy.PLAIN_HTTP)
        try:
            connection.request("GET", target, headers=headers)
            return connection.getresponse()
        except ssl.SSLCertVerificationError as error:
            connection.close()
            raise RegistryError(f"the certificate of {netloc} is not trusted "
                                f"({error.verify_message or error})") from None
        except ssl.SSLError as error:         # typically: the server speaks plain http
            connection.close()
            raise RegistryError(f"no secure connection to {netloc} ({error.reason or error}); "
                                "if it is a plain-http registry, allow plain http for it",
                                remedy=Remedy.PLAIN_HTTP) from None
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            raise Unreachable(f"cannot reach registry {netloc} ({_reason(error)}); check "
                                "the name and your network") from None

    def _refresh_token(self, challenge: str, stale: str | None) -> None:
        """Fetch an anonymous token for the realm in a Bearer challenge (once per stale one)."""
        with self._token_lock:
            if self._token != stale:         # another thread already refreshed it
                return
            params = dict(_CHALLENGE_PARAM.findall(challenge))
            realm = params.pop("realm", "")
            parts = urlsplit(realm)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise Unauthorized(f"registry {self.name.host} asked for a token without a "
                                   f"usable realm ({challenge!r})")
            query = urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
            url = realm + ("&" if parts.query else "?") + query
            with self._follow(url, {"Accept": "application/json"}, None) as response:
                body = response.read(MAX_MANIFEST_BYTES)
                if response.status != 200:
                    raise Unauthorized(
                        f"registry {self.name.host} refused an anonymous token for "
                        f"{self.name.display} ({response.status} {response.reason} from "
                        f"{parts.netloc}); the model may be private, or the name misspelt")
            try:
                record = json.loads(body)
                self._token = str(record.get("token") or record["access_token"])
            except (ValueError, KeyError, AttributeError):
                raise Unauthorized(f"the token service {parts.netloc} of registry "
                                   f"{self.name.host} sent no token") from None

    def _expect(self, response: http.client.HTTPResponse, statuses: tuple[int, ...],
                what: str) -> None:
        if response.status in statuses:
            return
        detail = _error_detail(response.read(4096))
        response.close()
        raise RegistryError(f"registry {self.name.host} answered {response.status} "
                            f"{response.reason} for {what} of {self.name.display}{detail}")


def _error_detail(body: bytes) -> str:
    """The registry's own error message (``{"errors": [{"message"}]}``), when it sent one."""
    try:
        message = json.loads(body)["errors"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    return f": {message}"


def _reason(error: BaseException) -> str:
    if isinstance(error, socket.gaierror):
        return "unknown host"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, TimeoutError | socket.timeout):
        return f"no answer in {TIMEOUT_S} s"
    return str(error) or type(error).__name__
