"""The ``map.*`` methods, answered on a query thread from a read-only snapshot of a session's memory.

Each call waits (at most ``query_defer_ms``) until no inference batch is running, takes the
session's snapshot from the shared cache (one copy per new frame), computes the answer with
:mod:`.mapquery` (or finds it in the result cache: the same question to the same snapshot is
computed once) and encodes its own reply, so the event loop only sends bytes.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from spatial_memory.topdown import LEVELS

from . import protocol as P
from .mapquery import QUERY_FIELDS, NotFound, map_frame, objects_table, query, snapshot_npz, topdown_png
from .sessions import Session

if TYPE_CHECKING:
    from .server import PolicyServer

log = logging.getLogger("vla.serve")
_FRAME_PARAMS = ("session", "width", "height", "frame", "extent_m")


class QueryRunner:
    def __init__(self, server: "PolicyServer", cache_size: int = 512) -> None:
        self.server, self.cache_size = server, int(cache_size)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, tuple[Any, dict[str, Any]]] = OrderedDict()
        self.hits = 0

    def memory(self, s: Session) -> Any:
        """A read-only snapshot of the session's memory (``NotFound`` if it keeps none)."""
        srv = self.server
        srv.batcher.idle.wait(srv.cfg.query_defer_ms / 1000.0)
        mem = s.final if s.state == "ended" else srv.policy.live_memory(s.id)
        snap = srv.snapshots.get(s.id, mem)
        if snap is None:
            agent = srv.metadata().get("agent")
            raise NotFound(
                f"session {s.id} has no spatial memory (yet): agent {agent!r} keeps none, or no frame was fused; "
                "serve agent=memory or a policy with memory inputs"
            )
        return snap

    @staticmethod
    def _frame(p: P.Params, snap: Any, width: int = 640, height: int = 512):
        return map_frame(
            snap,
            p.int("width", width, lo=16, hi=4096),
            p.int("height", height, lo=16, hi=4096),
            p.str("frame", "fit", choices=("fit", "ego")),
            p.float("extent_m", 8.0, lo=0.1, hi=1000.0),
        )

    def _session_info(self, s: Session) -> dict[str, Any]:
        return {"session": s.id, "state": s.state, "episode": s.episode, "step": s.steps, "instruction": s.instruction}

    def run(self, s: Session, method: str, params: dict[str, Any]) -> Any:
        """The result of one ``map.*`` call. Results are cached per snapshot (so per frame fused):
        many clients asking the same thing of the same map cost one computation."""
        snap = self.memory(s)
        try:
            key = (s.id, id(snap), method, json.dumps(params, sort_keys=True))
        except (TypeError, ValueError):
            key = None  # parameters that are not JSON (bytes, arrays): computed, and refused below
        with self._lock:
            hit = self._cache.get(key) if key is not None else None
            if hit is not None and hit[0] is snap:
                self._cache.move_to_end(key)
                self.hits += 1
                return {**self._session_info(s), **hit[1]}
        result = self._compute(snap, method, params)
        if key is not None and method != "map.snapshot":
            with self._lock:
                self._cache[key] = (snap, result)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return {**self._session_info(s), **result}

    def _compute(self, snap: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "map.objects":
            p = P.Params(method, params, _FRAME_PARAMS)
            return objects_table(snap, self._frame(p, snap) if snap.n_frames else None)
        if method == "map.query":
            p = P.Params(method, params, _FRAME_PARAMS + ("target", "question", "what"))
            target, question = p.str("target", max_len=200), p.str("question", max_len=1000)
            if (target is None) == (question is None):
                raise P.bad("map.query: give exactly one of 'target' (an id or category) and 'question' (words)")
            what = p.str_list("what", list(QUERY_FIELDS), choices=QUERY_FIELDS)
            frame = self._frame(p, snap)
            return query(snap, target or question, what, frame)
        if method == "map.topdown":
            p = P.Params(method, params, _FRAME_PARAMS + ("level", "trajectory", "agent", "objects"))
            png, frame = topdown_png(
                snap,
                p.str("level", "medium", choices=LEVELS),
                p.int("width", 640, lo=16, hi=4096),
                p.int("height", 512, lo=16, hi=4096),
                trajectory=p.bool("trajectory", True),
                agent=p.bool("agent", True),
                objects=p.str_list("objects", []),
                frame=p.str("frame", "fit", choices=("fit", "ego")),
                extent_m=p.float("extent_m", 8.0, lo=0.1, hi=1000.0),
            )
            return {"png": png, "frame": frame, "frames": int(snap.n_frames)}
        if method == "map.snapshot":
            P.Params(method, params, ("session",))
            data = snapshot_npz(snap)
            return {"npz": data, "bytes": len(data), "frames": int(snap.n_frames)}
        raise P.RequestError(P.UNKNOWN_METHOD, f"unknown method {method!r}")  # pragma: no cover

    def answer(self, s: Session, method: str, params: dict[str, Any], rid: Any, json_mode: bool) -> str | bytes:
        """The encoded reply (runs on a query thread)."""
        srv = self.server
        try:
            reply = P.ok_reply(rid, self.run(s, method, params))
        except P.RequestError as exc:
            reply = P.error_reply(rid, exc.code, str(exc))
        except NotFound as exc:
            reply = P.error_reply(rid, P.NOT_FOUND, str(exc).strip("'\""))
        except (ValueError, KeyError) as exc:
            reply = P.error_reply(rid, P.BAD_REQUEST, f"{method}: {str(exc).strip(chr(39) + chr(34))}")
        except Exception as exc:  # noqa: BLE001 - a failing query answers itself, the server goes on
            log.error("query %s failed: %s", method, traceback.format_exc())
            reply = P.error_reply(rid, P.INTERNAL, f"{method}: {type(exc).__name__}: {exc}")
        if not reply["ok"]:
            srv.stats["errors"] += 1
        return srv._encode(reply, json_mode)
