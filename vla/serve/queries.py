"""The ``map.*`` methods, answered on a query thread from a read-only snapshot of a session's memory.

Each call first checks its parameters (all of them, whatever the memory holds), then waits (at
most ``query_defer_ms``) until no inference batch is running, takes the session's snapshot from
the shared cache (one copy per new frame), computes the answer with :mod:`.mapquery` (or finds it
in the result cache: the same question to the same snapshot is computed once) and encodes its
own reply, so the event loop only sends bytes.

The result cache holds plain results only (never a snapshot), at most ``cache_bytes`` of them,
least recently used first out; a session's entries go when its memory moves on to a new frame,
when it starts a new episode and when it ends.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections import OrderedDict
from typing import Any

from spatial_memory.topdown import LEVELS

from . import protocol as P
from .host import QueryHost
from .mapquery import QUERY_FIELDS, NotFound, map_frame, objects_table, query, snapshot_npz, topdown_png
from .sessions import Session


log = logging.getLogger("vla.serve")
_FRAME_PARAMS = ("session", "width", "height", "frame", "extent_m")


def _frame_args(p: P.Params) -> tuple[int, int, str, float]:
    return (
        p.int("width", 640, lo=16, hi=4096),
        p.int("height", 512, lo=16, hi=4096),
        p.str("frame", "fit", choices=("fit", "ego")),
        p.float("extent_m", 8.0, lo=0.1, hi=1000.0),
    )


def parse(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The checked arguments of one ``map.*`` call (``RequestError`` naming a wrong one)."""
    if method == "map.objects":
        return {"frame": _frame_args(P.Params(method, params, _FRAME_PARAMS))}
    if method == "map.query":
        p = P.Params(method, params, _FRAME_PARAMS + ("target", "question", "what"))
        target, question = p.str("target", max_len=200), p.str("question", max_len=1000)
        if (target is None) == (question is None):
            raise P.bad("map.query: give exactly one of 'target' (an id or category) and 'question' (words)")
        what = tuple(p.str_list("what", list(QUERY_FIELDS), choices=QUERY_FIELDS))
        return {"target": target or question, "what": what, "frame": _frame_args(p)}
    if method == "map.topdown":
        p = P.Params(method, params, _FRAME_PARAMS + ("level", "trajectory", "agent", "objects"))
        return {
            "level": p.str("level", "medium", choices=LEVELS),
            "trajectory": p.bool("trajectory", True),
            "agent": p.bool("agent", True),
            "objects": tuple(p.str_list("objects", [])),
            "frame": _frame_args(p),
        }
    if method == "map.snapshot":
        P.Params(method, params, ("session",))
        return {}
    raise P.RequestError(P.UNKNOWN_METHOD, f"unknown method {method!r}")  # pragma: no cover


def result_bytes(obj: Any) -> int:
    """About how many bytes a plain result holds (what the cache counts)."""
    if isinstance(obj, (bytes, str)):
        return 49 + len(obj)
    if isinstance(obj, dict):
        return 64 + sum(result_bytes(k) + result_bytes(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return 56 + sum(result_bytes(v) for v in obj)
    return 32


class QueryRunner:
    def __init__(self, server: QueryHost, cache_bytes: int = 64 * 2**20) -> None:
        self.server, self.cache_bytes = server, int(cache_bytes)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, tuple[int, dict[str, Any]]] = OrderedDict()  # key -> (bytes, result)
        self._generation: dict[str, Any] = {}  # session -> the snapshot its cached results belong to
        self.bytes = 0
        self.hits = 0

    def memory(self, s: Session) -> tuple[Any, Any]:
        """A read-only snapshot of the session's memory and its generation (``NotFound`` if it keeps none)."""
        srv = self.server
        srv.batcher.idle.wait(srv.cfg.query_defer_ms / 1000.0)
        mem = s.final if s.state == "ended" else srv.policy.live_memory(s.id)
        snap, generation = srv.snapshots.get(s.id, mem)
        if snap is None:
            agent = srv.metadata().get("agent")
            raise NotFound(
                f"session {s.id} has no spatial memory (yet): agent {agent!r} keeps none, or no frame was fused; "
                "serve agent=memory or a policy with memory inputs"
            )
        return snap, generation

    def _session_info(self, s: Session) -> dict[str, Any]:
        return {"session": s.id, "state": s.state, "episode": s.episode, "step": s.steps, "instruction": s.instruction}

    def run(self, s: Session, method: str, params: dict[str, Any]) -> Any:
        """The result of one ``map.*`` call. Results are cached per snapshot (so per frame fused):
        many clients asking the same thing of the same map cost one computation."""
        args = parse(method, params)
        snap, generation = self.memory(s)
        key = (s.id, generation, method, repr(sorted(args.items())))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return {**self._session_info(s), **hit[1]}
        result = self._compute(snap, method, args)
        if method != "map.snapshot":
            self._put(s.id, generation, key, result)
        return {**self._session_info(s), **result}

    def _put(self, sid: str, generation: Any, key: tuple, result: dict[str, Any]) -> None:
        size = result_bytes(result)
        if size > self.cache_bytes:
            return
        with self._lock:
            if self._generation.get(sid) != generation:
                self._drop_locked(sid)  # the session's memory moved on: its older answers are dead
                self._generation[sid] = generation
            old = self._cache.pop(key, None)
            if old is not None:
                self.bytes -= old[0]
            self._cache[key] = (size, result)
            self.bytes += size
            while self.bytes > self.cache_bytes:
                _, (n, _) = self._cache.popitem(last=False)
                self.bytes -= n

    def _drop_locked(self, sid: str) -> None:
        for key in [k for k in self._cache if k[0] == sid]:
            self.bytes -= self._cache.pop(key)[0]
        self._generation.pop(sid, None)

    def drop(self, sid: str) -> None:
        """Forget every cached answer about session ``sid`` (a new episode, or the session ended)."""
        with self._lock:
            self._drop_locked(sid)

    def entries(self, sid: str | None = None) -> int:
        with self._lock:
            return sum(1 for k in self._cache if sid is None or k[0] == sid)

    @staticmethod
    def _compute(snap: Any, method: str, a: dict[str, Any]) -> dict[str, Any]:
        if method == "map.objects":
            return objects_table(snap, map_frame(snap, *a["frame"]) if snap.n_frames else None)
        if method == "map.query":
            return query(snap, a["target"], a["what"], map_frame(snap, *a["frame"]))
        if method == "map.topdown":
            width, height, frame, extent_m = a["frame"]
            png, frame_d = topdown_png(
                snap,
                a["level"],
                width,
                height,
                trajectory=a["trajectory"],
                agent=a["agent"],
                objects=a["objects"],
                frame=frame,
                extent_m=extent_m,
            )
            return {"png": png, "frame": frame_d, "frames": int(snap.n_frames)}
        data = snapshot_npz(snap)
        return {"npz": data, "bytes": len(data), "frames": int(snap.n_frames)}

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
        return srv.encode(reply, json_mode)
