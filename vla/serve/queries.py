"""The ``map.*`` methods, answered on a query thread from a read-only snapshot of a session's memory.

Each call waits (at most ``query_defer_ms``) until no inference batch is running, takes the
session's snapshot from the shared cache (one copy per new frame), computes the answer with
:mod:`.mapquery` and encodes its own reply, so the event loop only sends bytes.
"""

from __future__ import annotations

import logging
import traceback
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
    def __init__(self, server: "PolicyServer") -> None:
        self.server = server

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
        if method == "map.objects":
            p = P.Params(method, params, _FRAME_PARAMS)
            snap = self.memory(s)
            table = objects_table(snap, self._frame(p, snap) if snap.n_frames else None)
            return {**self._session_info(s), **table}
        if method == "map.query":
            p = P.Params(method, params, _FRAME_PARAMS + ("target", "question", "what"))
            target, question = p.str("target", max_len=200), p.str("question", max_len=1000)
            if (target is None) == (question is None):
                raise P.bad("map.query: give exactly one of 'target' (an id or category) and 'question' (words)")
            what = p.str_list("what", list(QUERY_FIELDS), choices=QUERY_FIELDS)
            snap = self.memory(s)
            frame = self._frame(p, snap)
            return {**self._session_info(s), **query(snap, target or question, what, frame)}
        if method == "map.topdown":
            p = P.Params(method, params, _FRAME_PARAMS + ("level", "trajectory", "agent", "objects"))
            snap = self.memory(s)
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
            return {**self._session_info(s), "png": png, "frame": frame, "frames": int(snap.n_frames)}
        if method == "map.snapshot":
            P.Params(method, params, ("session",))
            snap = self.memory(s)
            data = snapshot_npz(snap)
            return {**self._session_info(s), "npz": data, "bytes": len(data), "frames": int(snap.n_frames)}
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
