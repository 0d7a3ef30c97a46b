"""The narrow interface between the policy server and its parts.

:class:`~.server.PolicyServer` owns the connections, the sessions, the batcher and the thread pools.
Its parts -- the plain-HTTP pages (:mod:`.http`), the map queries (:mod:`.queries`) and openpi's
protocol (:mod:`.openpi`) -- see it only through the protocols here, each listing what that part uses.
So the parts import nothing of the server, and the server imports them: no import circle
(docs/ARCHITECTURE.md §2). ``conn`` is the server's connection (its ``ws``, ``session``, ``t_in``).
"""

from __future__ import annotations

from typing import Any, Protocol

from envs.spec import EnvSpec

from .batcher import Batcher
from .config import ServeConfig
from .policy import BatchPolicy
from .sessions import Session, SnapshotCache


class QueryHost(Protocol):
    """What the map queries (:class:`~.queries.QueryRunner`, on query threads) read of the server."""

    cfg: ServeConfig
    stats: dict[str, int]
    policy: BatchPolicy  # live_memory(session) only
    batcher: Batcher  # its ``idle`` event only: a query waits for a lull in inference
    snapshots: SnapshotCache

    def metadata(self) -> dict[str, Any]: ...

    def encode(self, message: Any, json_mode: bool) -> str | bytes: ...


class HttpHost(Protocol):
    """What the plain-HTTP pages (:func:`~.http.handle_http`) ask of the server."""

    def health(self) -> dict[str, Any]: ...

    def query_session(self, sid: Any) -> Session: ...

    async def run_query(self, s: Session, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


class OpenpiHost(Protocol):
    """What openpi's protocol (:func:`~.openpi.serve_connection`) drives of the server: a connection's
    messages, its session's episodes and steps through the batcher, and its end."""

    cfg: ServeConfig
    stats: dict[str, int]
    expected_spec: EnvSpec | None

    def metadata(self) -> dict[str, Any]: ...

    async def receive(self, conn: Any) -> str | bytes | None: ...

    async def decode(self, message: str | bytes, json_mode: bool, openpi: bool = False) -> Any: ...

    async def start_episode(self, conn: Any, instruction: str, spec: EnvSpec, seed: Any) -> Session: ...

    async def step(self, conn: Any, s: Session, obs: dict[str, Any]) -> tuple[Any, dict[str, float]]: ...

    async def end_session(self, s: Session) -> None: ...
