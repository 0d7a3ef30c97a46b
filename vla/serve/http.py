"""Plain HTTP on the server's port (requests that are not websocket upgrades).

``GET /`` the live page (``page.html``: plain HTML and JavaScript, no build step); ``GET /healthz``
the health JSON; ``GET /map.png?session=&level=&width=&height=&frame=`` the session's top-down map
(rendered on a query thread). The token, when the server has one, is checked before any of these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Response

from . import protocol as P
from .host import HttpHost
from .mapquery import NotFound
from vla.wire.codec import dumps_json

PAGE = Path(__file__).with_name("page.html")


def _response(status: int, reason: str, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Connection", "close"),
        ]
    )
    return Response(status, reason, headers, body)


def _json(status: int, reason: str, obj: Any) -> Response:
    return _response(status, reason, dumps_json(obj).encode("utf-8") + b"\n", "application/json")


async def handle_http(server: HttpHost, connection: Any, path: str, query: dict[str, list[str]]) -> Response:
    if path in ("/", "/index.html"):
        return _response(200, "OK", PAGE.read_bytes(), "text/html; charset=utf-8")
    if path == "/healthz":
        return _json(200, "OK", server.health())
    if path == "/map.png":
        one = {k: v[0] for k, v in query.items() if v and k != "token" and k != "t"}
        params: dict[str, Any] = {}
        try:
            for k, v in one.items():
                params[k] = (
                    int(v) if k in ("width", "height") else (v.lower() == "true" if k in ("trajectory", "agent") else v)
                )
            s = server.query_session(params.pop("session", None))
            result = await server.run_query(s, "map.topdown", params)
        except ValueError as exc:
            return _json(400, "Bad Request", {"error": {"code": P.BAD_REQUEST, "message": str(exc)}})
        except P.RequestError as exc:
            return _json(
                404 if exc.code == P.NO_SESSION else 400, "Error", {"error": {"code": exc.code, "message": str(exc)}}
            )
        except NotFound as exc:
            return _json(404, "Not Found", {"error": {"code": P.NOT_FOUND, "message": str(exc)}})
        return _response(200, "OK", result["png"], "image/png")
    return _json(
        404,
        "Not Found",
        {
            "error": {
                "code": P.NOT_FOUND,
                "message": f"no page {path[:100]!r}; pages: /, /healthz, /map.png, websocket on /",
            }
        },
    )
