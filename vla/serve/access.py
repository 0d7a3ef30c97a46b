"""Who may talk to the server: the token, the ``Origin`` of browser pages, the ``Host`` they asked
for, and how many connections one peer may hold.

Checked on every handshake, websocket and plain HTTP alike, before any message is read
(docs/SERVING.md, "Security"):

* **Token** (``token=``): ``Authorization: Bearer <token>`` (our clients), ``Authorization: Api-Key
  <token>`` (openpi's client) or ``?token=`` (the live page), compared in constant time.
* **Origin.** A browser names the page that opened a websocket or made a cross-origin request in
  ``Origin``; any web page the user visits can otherwise reach ``ws://127.0.0.1:PORT``. Allowed:
  no ``Origin`` (programs, not pages), the server's own live page opened on this machine
  (``http://127.0.0.1:PORT``, ``http://localhost:PORT``, ``http://[::1]:PORT``), the server's own
  page opened by any name when a token is set (the page must know the token) or ``insecure=true``,
  and the exact origins listed in ``origins=``. Everything else -- another port, another host, ``null`` -- is 403.
* **Host.** Without a token, a request must name the server by a loopback name or its bound
  address: a page on ``evil.example`` whose name is re-pointed at 127.0.0.1 (DNS rebinding) is
  same-origin with itself and sends no ``Origin`` on plain GETs, but still names ``evil.example``.
  The unspecified address (``0.0.0.0``, ``::``: openpi's clients connect there by default) is
  accepted on websockets without ``Origin`` only -- programs; a browser sends ``Origin`` on every
  websocket -- and refused on plain HTTP, the way browsers let remote pages reach local services.
* **Peers.** At most ``max_connections_per_peer`` websockets from one address (and
  ``max_connections`` in all).
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """``host`` (a name or an address, without brackets or port) names this machine only."""
    h = host.strip().lower().strip("[]")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def is_unspecified(host: str) -> bool:
    """``host`` is the unspecified address (``0.0.0.0``, ``::``), which connects to this machine."""
    try:
        return ipaddress.ip_address(host.strip().lower().strip("[]")).is_unspecified
    except ValueError:
        return False


def split_host(hostport: str) -> tuple[str, int | None]:
    """``("example.org", 8765)`` of ``"example.org:8765"`` (brackets of IPv6 literals removed);
    ``ValueError`` for a malformed one."""
    u = urlsplit("//" + hostport.strip())
    return (u.hostname or "").lower(), u.port


class Access:
    """The checks above for one server (``cfg``: its :class:`~.server.ServeConfig`)."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.origins = {self._normal_origin(o) for o in (cfg.origins or ())}
        self.peers: dict[str, int] = {}  # open websockets per remote address

    @staticmethod
    def _normal_origin(origin: str) -> str:
        u = urlsplit(origin.strip())
        if u.scheme not in ("http", "https") or not u.hostname or u.path not in ("", "/") or u.query:
            raise ValueError(f"origins: {origin!r} is not an origin like http://host:port")
        default = 443 if u.scheme == "https" else 80
        host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
        return f"{u.scheme}://{host}:{u.port or default}"

    # ------------------------------------------------------------------ the token
    def authorized(self, headers: Any, query: dict[str, list[str]]) -> bool:
        if self.cfg.token is None:
            return True
        auth = (headers.get("Authorization", "") or "").strip()
        scheme, _, given = auth.partition(" ")
        if scheme.lower() not in ("bearer", "api-key") or not given:
            given = (query.get("token") or [""])[0]
        return hmac.compare_digest(given.strip().encode("utf-8", "replace"), self.cfg.token.encode("utf-8"))

    # ------------------------------------------------------------------ Origin and Host
    def origin_refusal(self, headers: Any, port: int | None) -> str | None:
        """Why this request's ``Origin`` is refused, or ``None`` if it is allowed."""
        origin = headers.get("Origin")
        if origin is None:
            return None
        try:
            normal = self._normal_origin(origin)
        except ValueError:
            return f"origin {origin[:100]!r} is not allowed (a page of no origin, e.g. a file or a sandbox)"
        if normal in self.origins:
            return None
        u = urlsplit(normal)
        if u.port == port and u.scheme == "http":
            if is_loopback(u.hostname or ""):
                return None  # the live page, opened on this machine
            if self.cfg.token is not None or self.cfg.insecure:
                try:
                    host, hport = split_host(headers.get("Host") or "")
                except ValueError:
                    host, hport = "", None
                if host == (u.hostname or "").lower() and hport == port:
                    return None  # the live page, opened by the server's name (the token is checked too)
        return (
            f"origin {origin[:100]!r} is not allowed: this server accepts its own page "
            f"(http://127.0.0.1:{port}/) and the origins in its origins= list"
        )

    def host_refusal(self, headers: Any, port: int | None = None) -> str | None:
        """Why the ``Host`` a tokenless request names is refused (DNS rebinding), or ``None``."""
        if self.cfg.token is not None or self.cfg.insecure:
            return None
        given = headers.get("Host")
        if given is None:
            return None
        try:
            host, _ = split_host(given)
        except ValueError:
            return f"malformed Host header {given[:100]!r}"
        bound = str(self.cfg.host).lower().strip("[]")
        allowed = {urlsplit(o).hostname for o in self.origins}
        if is_loopback(host) or host == bound or host in allowed:
            return None
        if is_unspecified(host):
            websocket = (headers.get("Upgrade") or "").lower() == "websocket"
            if websocket and headers.get("Origin") is None:
                return None  # a program (openpi's clients default to 0.0.0.0): browsers send Origin on websockets
            return (
                f"host {given[:100]!r} is the unspecified address: a page or plain request naming it is refused "
                f"(browsers let remote pages reach local services that way); open http://127.0.0.1:{port}/"
            )
        return (
            f"host {given[:100]!r} is not this server's name: without a token it answers only requests "
            "for its loopback or bound address"
        )

    # ------------------------------------------------------------------ peers
    def peer_full(self, peer: str) -> bool:
        return self.peers.get(peer, 0) >= int(self.cfg.max_connections_per_peer)

    def opened(self, peer: str) -> None:
        self.peers[peer] = self.peers.get(peer, 0) + 1

    def closed(self, peer: str) -> None:
        n = self.peers.get(peer, 0) - 1
        if n > 0:
            self.peers[peer] = n
        else:
            self.peers.pop(peer, None)


def peer_of(connection: Any) -> str:
    """The remote address of a connection (its IP), ``"?"`` when unknown."""
    addr = getattr(connection, "remote_address", None)
    return str(addr[0]) if addr else "?"
