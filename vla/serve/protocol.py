"""The request/reply protocol (docs/SERVING.md): message shapes, methods, parameter validation.

Request: ``{"id": <int or str>, "method": <name>, "params": {...}}``. Reply: ``{"id", "ok": true,
"result": ...}`` or ``{"id", "ok": false, "error": {"code", "message"}}``. On connect the server
pushes ``{"event": "metadata", "result": {...}}``. Binary frames carry msgpack, text frames JSON;
a reply uses the frame type of its request.
"""

from __future__ import annotations

import math
from typing import Any

PROTOCOL_VERSION = 1

CONTROL_METHODS = ("reset", "attach", "infer", "close")
QUERY_METHODS = ("map.objects", "map.query", "map.topdown", "map.snapshot")
INFO_METHODS = ("health", "metadata", "sessions")
METHODS = INFO_METHODS + CONTROL_METHODS + QUERY_METHODS

# error codes
BAD_REQUEST = "bad_request"  # malformed message or parameters
UNKNOWN_METHOD = "unknown_method"
NO_SESSION = "no_session"  # no such session, or this connection controls none
NOT_FOUND = "not_found"  # the memory has no such object / nothing yet
POLICY_ERROR = "policy_error"  # the policy raised on this observation
FORBIDDEN = "forbidden"  # e.g. attach without the session's secret
LIMIT = "limit"  # a server limit was reached (e.g. max_sessions)
INTERNAL = "internal"


class RequestError(Exception):
    """A request that gets an error reply: ``code`` and a message saying what was wrong."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def bad(message: str) -> RequestError:
    return RequestError(BAD_REQUEST, message)


def parse_request(msg: Any) -> tuple[Any, str, dict[str, Any]]:
    """``(id, method, params)`` of a decoded message, or ``RequestError``."""
    if not isinstance(msg, dict):
        raise bad(f"a request is a map with 'method' (and 'id', 'params'), got {type(msg).__name__}")
    rid = msg.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (int, str))):
        raise bad(f"request 'id' must be an int or a string, got {type(rid).__name__}")
    if isinstance(rid, str) and len(rid) > 128:
        raise bad("request 'id' is longer than 128 characters")
    extra = sorted(set(msg) - {"id", "method", "params"})
    if extra:
        raise bad(f"unknown request field(s) {extra[:8]}; a request has id, method, params")
    method = msg.get("method")
    if not isinstance(method, str):
        raise bad(f"request 'method' must be a string, got {type(method).__name__}")
    if method not in METHODS:
        raise RequestError(UNKNOWN_METHOD, f"unknown method {method[:64]!r}; methods: {list(METHODS)}")
    params = msg.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise bad(f"request 'params' must be a map, got {type(params).__name__}")
    return rid, method, params


class Params:
    """Typed access to a request's params; every wrong one is a ``RequestError`` naming it."""

    def __init__(self, method: str, params: dict[str, Any], allowed: tuple[str, ...]) -> None:
        self.method, self.p = method, params
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise bad(f"{method}: unknown parameter(s) {unknown[:8]}; it takes {list(allowed)}")

    def _get(self, name: str, default: Any, required: bool) -> Any:
        if name not in self.p or self.p[name] is None:
            if required:
                raise bad(f"{self.method}: parameter {name!r} is required")
            return default
        return self.p[name]

    def str(
        self, name: str, default: str | None = None, required: bool = False, choices=None, max_len: int = 1000
    ) -> Any:
        v = self._get(name, default, required)
        if v is default and not required:
            return v
        if not isinstance(v, str):
            raise bad(f"{self.method}: parameter {name!r} must be a string, got {type(v).__name__}")
        if len(v) > max_len:
            raise bad(f"{self.method}: parameter {name!r} is longer than {max_len} characters")
        if choices is not None and v not in choices:
            raise bad(f"{self.method}: parameter {name!r} must be one of {list(choices)}, got {v[:64]!r}")
        return v

    def int(self, name: str, default: int | None = None, lo: int | None = None, hi: int | None = None) -> Any:
        v = self._get(name, default, False)
        if v is default:
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise bad(f"{self.method}: parameter {name!r} must be an int, got {type(v).__name__}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise bad(f"{self.method}: parameter {name!r} must be in [{lo}, {hi}], got {v}")
        return v

    def float(self, name: str, default: float | None = None, lo: float | None = None, hi: float | None = None):
        v = self._get(name, default, False)
        if v is default:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise bad(f"{self.method}: parameter {name!r} must be a finite number, got {v!r}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise bad(f"{self.method}: parameter {name!r} must be in [{lo}, {hi}], got {v}")
        return float(v)

    def bool(self, name: str, default: bool) -> bool:
        v = self._get(name, default, False)
        if not isinstance(v, bool):
            raise bad(f"{self.method}: parameter {name!r} must be true or false, got {type(v).__name__}")
        return v

    def str_list(self, name: str, default: list[str], choices=None, max_items: int = 64) -> list[str]:
        v = self._get(name, default, False)
        if isinstance(v, str):
            v = [x.strip() for x in v.split(",") if x.strip()]
        if not isinstance(v, list) or not all(isinstance(x, str) and len(x) <= 200 for x in v):
            raise bad(f"{self.method}: parameter {name!r} must be a list of strings")
        if len(v) > max_items:
            raise bad(f"{self.method}: parameter {name!r} has more than {max_items} items")
        if choices is not None:
            wrong = sorted(set(v) - set(choices))
            if wrong:
                raise bad(
                    f"{self.method}: parameter {name!r} has unknown item(s) {wrong[:8]}; choose from {list(choices)}"
                )
        return v

    def map(self, name: str, required: bool = True) -> Any:
        v = self._get(name, None, required)
        if v is not None and not isinstance(v, dict):
            raise bad(f"{self.method}: parameter {name!r} must be a map, got {type(v).__name__}")
        return v

    def seed(self, name: str = "seed") -> Any:
        v = self._get(name, None, False)
        if v is None:
            return None
        if isinstance(v, list) and 1 <= len(v) <= 8 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return tuple(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise bad(f"{self.method}: parameter {name!r} must be an int or a list of at most 8 ints")


def ok_reply(rid: Any, result: Any) -> dict[str, Any]:
    return {"id": rid, "ok": True, "result": result}


def error_reply(rid: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": rid, "ok": False, "error": {"code": code, "message": message[:2000]}}
