"""Sessions: one per controlling client (its episodes, its agent state, its memory), and map snapshots.

A session is created by the first ``reset`` of a connection and controlled by that connection. A
connection that vanishes leaves its session *detached*: a reconnecting client takes it back with
``attach`` and the session's secret (sent only to the client that reset it; its next ``infer``
continues the episode) until ``session_timeout_s`` passes; then the session ends. The id is a
public handle (listed, used to name a session's map in queries); the secret is never listed.
An ended session keeps a final snapshot of its memory, so its map can still be queried; the last
``keep_ended`` ended sessions are kept.

The table is touched by the event-loop thread only. :class:`SnapshotCache` is shared with the
query threads: one read-only ``snapshot()`` per session and memory state, so many query clients
cost one copy of the map per new frame, not one per query.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from envs.spec import EnvSpec


@dataclass
class Session:
    id: str
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    instruction: str = ""
    spec: EnvSpec | None = None
    episode: int = 0
    steps: int = 0
    infers: int = 0
    controller: int | None = None  # connection number
    state: str = "active"  # active | detached | ended
    created: float = field(default_factory=time.time)
    last_active: float = field(default_factory=time.time)
    detached_at: float | None = None
    last_seq: int | None = None
    last_reply: Any = None
    final: Any = None  # the memory snapshot of an ended session

    def summary(self) -> dict[str, Any]:
        return {
            "session": self.id,
            "state": self.state,
            "instruction": self.instruction,
            "env": self.spec.family if self.spec is not None else None,
            "episode": self.episode,
            "steps": self.steps,
            "infers": self.infers,
            "idle_s": round(time.time() - self.last_active, 3),
        }


class SessionTable:
    def __init__(self, keep_ended: int = 4) -> None:
        self.keep_ended = int(keep_ended)
        self.sessions: dict[str, Session] = {}

    def new(self) -> Session:
        sid = secrets.token_hex(8)
        s = self.sessions[sid] = Session(sid)
        return s

    def get(self, sid: str) -> Session | None:
        return self.sessions.get(sid)

    def live(self) -> list[Session]:
        return [s for s in self.sessions.values() if s.state != "ended"]

    def controlled(self) -> int:
        """Sessions with a connected client (read by the inference thread: iterates a copy)."""
        return sum(1 for s in list(self.sessions.values()) if s.state == "active")

    def default(self) -> Session | None:
        """The session queries go to when none is named: the most recently active live one, else
        the most recently ended one."""
        live = sorted(self.live(), key=lambda s: s.last_active)
        if live:
            return live[-1]
        ended = sorted((s for s in self.sessions.values() if s.state == "ended"), key=lambda s: s.last_active)
        return ended[-1] if ended else None

    def end(self, s: Session, final: Any) -> list[str]:
        """Ends ``s`` (keeping ``final``, its memory's last snapshot); the ids of the oldest ended
        sessions dropped to keep ``keep_ended``."""
        s.state, s.controller, s.final = "ended", None, final
        s.last_reply = None
        ended = sorted((x for x in self.sessions.values() if x.state == "ended"), key=lambda x: x.last_active)
        dropped = [old.id for old in ended[: max(0, len(ended) - self.keep_ended)]]
        for sid in dropped:
            del self.sessions[sid]
        return dropped

    def list(self) -> list[dict[str, Any]]:
        return [s.summary() for s in sorted(self.sessions.values(), key=lambda s: -s.last_active)]


class SnapshotCache:
    """Read-only snapshots of live memories, one per (memory, frames fused) (thread-safe). Each
    snapshot has a generation number, so answers computed from it can be cached without keeping
    the snapshot alive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[Any, int, Any, int]] = {}  # sid -> (memory, frames, snapshot, generation)
        self._generations = count(1)
        self.copies = 0

    def get(self, sid: str, memory: Any) -> tuple[Any, Any]:
        """``(snapshot, generation)`` of ``memory``; ``(None, None)`` without one. An ended
        session's final snapshot never changes: its generation is ``"final"``."""
        if memory is None:
            return None, None
        if getattr(memory, "read_only", False):
            return memory, "final"  # already a snapshot (an ended session's)
        with self._lock:
            hit = self._cache.get(sid)
            if hit is not None and hit[0] is memory and hit[1] == memory.n_frames:
                return hit[2], hit[3]
            snap = memory.snapshot()
            self.copies += 1
            generation = next(self._generations)
            self._cache[sid] = (memory, snap.n_frames, snap, generation)
            return snap, generation

    def drop(self, sid: str) -> None:
        with self._lock:
            self._cache.pop(sid, None)
