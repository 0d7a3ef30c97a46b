"""``PolicyServer``: one agent or policy behind a websocket, for many simulators and map readers.

Concurrency model (docs/SERVING.md has the long form):

* **The event loop** (one thread, asyncio + ``websockets``) does only I/O and cheap work: it reads
  frames, decodes and validates requests, and sends replies. It never runs the policy or renders.
* **The inference thread** (:class:`~.batcher.Batcher`) owns the policy: every ``reset``,
  ``infer`` and session close runs there, in arrival order; ``infer`` calls of different sessions
  are batched (``max_batch``, ``max_wait_ms``).
* **Query threads** (``query_threads``) answer ``map.*``: each reads a read-only snapshot of the
  session's memory (one copy per new frame, shared by all readers) and encodes its own reply.
  A query waits (at most ``query_defer_ms``) while a batch is running, so readers fill the gaps
  between inference calls instead of competing with them for the interpreter.

Security (docs/SERVING.md): binds 127.0.0.1 unless told otherwise, and refuses any other address
without a token (``insecure=true`` overrides); ``Origin`` and ``Host`` checked on every handshake
(:mod:`.access`); a session is controlled only by the connection that reset it or one that
presents its secret; messages larger than ``max_message_mb`` close the connection (1009); large
messages are decoded off the event loop, each within ``max_objects`` values; only msgpack and
JSON, never pickle; every malformed request gets an error reply and the connection keeps serving;
caps on connections (in all and per peer), idle connections and live sessions.

The parts (plain HTTP :mod:`.http`, map queries :mod:`.queries`, openpi's protocol :mod:`.openpi`) see
the server through the narrow protocols of :mod:`.host`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any
from urllib.parse import parse_qs, urlsplit

import websockets
from websockets.asyncio.server import ServerConnection, serve

from envs.spec import EnvSpec

from . import protocol as P
from .access import Access, peer_of
from .batcher import Batcher
from .config import ServeConfig
from .policy import AgentSessions, BatchPolicy, ObservationError, SessionError
from .queries import QueryRunner
from .sessions import Session, SessionTable, SnapshotCache
from vla.wire.codec import WireError, dumps_json, loads_json, pack, unpack, unpack_openpi

log = logging.getLogger("vla.serve")
INLINE_DECODE = 4096  # bytes: smaller messages (at most ~4,000 values) are decoded on the event loop


class _Conn:
    def __init__(self, number: int, ws: ServerConnection, json_mode: bool, peer: str = "?") -> None:
        self.number, self.ws, self.json, self.peer = number, ws, json_mode, peer
        self.session: Session | None = None
        self.errors = 0
        self.t_in = 0.0  # when the request being handled was received


class PolicyServer:
    def __init__(
        self, policy: BatchPolicy, config: ServeConfig | None = None, expected_spec: EnvSpec | None = None
    ) -> None:
        self.policy, self.cfg, self.expected_spec = policy, config or ServeConfig(), expected_spec
        self.sessions = SessionTable(self.cfg.keep_ended)
        self.snapshots = SnapshotCache()
        # a policy whose batch is a loop over per-session agents gains nothing from waiting for a
        # batch, and loses the overlap of one client's transfer with another's compute: one at a time
        self.batch_size = int(self.cfg.max_batch) if self.cfg.batching and not isinstance(policy, AgentSessions) else 1
        self.batcher = Batcher(policy, self.batch_size, self.cfg.max_wait_ms, self.sessions.controlled)
        self.queries = QueryRunner(self, cache_bytes=int(self.cfg.query_cache_mb * 2**20))
        self.pool = ThreadPoolExecutor(int(self.cfg.query_threads), thread_name_prefix="vla-serve-query")
        # large messages are decoded here, not on the event loop (the scan before decoding holds
        # the interpreter for at most a switch interval at a time, so the loop keeps serving)
        self.decoder = ThreadPoolExecutor(2, thread_name_prefix="vla-serve-decode")
        self.access = Access(self.cfg)
        self.conns: dict[int, _Conn] = {}
        self._numbers = count(1)
        self.started = time.time()
        self.port: int | None = None
        self.stats = {"requests": 0, "errors": 0, "infers": 0, "queries": 0}
        self._meta = policy.metadata()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._next_query = 0.0  # when the next paced query may run (event-loop time)

    # ------------------------------------------------------------------ info
    def metadata(self) -> dict[str, Any]:
        return {
            "protocol": P.PROTOCOL_VERSION,
            "server": "vla-serve",
            **{k: v for k, v in self._meta.items() if k not in ("protocol", "server")},
            "env_spec": self.expected_spec.to_dict() if self.expected_spec is not None else None,
            "batch": {
                "enabled": self.batch_size > 1,
                "max_batch": self.batch_size,
                "max_wait_ms": self.cfg.max_wait_ms,
            },
            "methods": list(P.METHODS),
            "max_message_bytes": self.cfg.max_bytes,
            "max_objects": int(self.cfg.max_objects),
            "token_required": self.cfg.token is not None,
        }

    def health(self) -> dict[str, Any]:
        b = self.batcher.stats
        return {
            "ok": True,
            "uptime_s": round(time.time() - self.started, 3),
            "agent": self._meta.get("agent"),
            "connections": len(self.conns),
            "sessions": {
                "active": self.sessions.controlled(),
                "live": len(self.sessions.live()),
                "total": len(self.sessions.sessions),
            },
            "batches": b["batches"],
            "inferred": b["items"],
            "mean_batch": round(b["items"] / b["batches"], 3) if b["batches"] else None,
            "max_batch_seen": b["max_batch_seen"],
            "snapshot_copies": self.snapshots.copies,
            "query_cache_hits": self.queries.hits,
            **self.stats,
        }

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        return f"ws://{self.cfg.host}:{self.port}"

    async def serve_async(self, on_ready=None) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        # a thread waiting for the interpreter (the inference thread, after a query ran) gets it
        # within this long instead of Python's default 5 ms (process-wide)
        sys.setswitchinterval(float(self.cfg.switch_interval_ms) / 1000.0)
        self.batcher.start()
        try:
            async with serve(
                self._handler,
                self.cfg.host,
                int(self.cfg.port),
                max_size=self.cfg.max_bytes,
                compression=None,
                process_request=self._process_request,
                server_header="vla-serve",
                open_timeout=10,
                close_timeout=5,
                ping_interval=float(self.cfg.ping_interval_s) or None,
                ping_timeout=float(self.cfg.ping_timeout_s) or None,
            ) as server:
                self.port = server.sockets[0].getsockname()[1]
                reaper = asyncio.create_task(self._reap_sessions())
                self._ready.set()
                if on_ready is not None:
                    on_ready(self)
                await self._stop.wait()
                reaper.cancel()
        finally:
            self.batcher.stop()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.decoder.shutdown(wait=False, cancel_futures=True)

    def run(self, on_ready=None) -> None:
        """Serve until SIGINT / SIGTERM (the CLI); ``on_ready(server)`` once listening."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            task = asyncio.create_task(self.serve_async(on_ready))
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._request_stop)
            await task

        asyncio.run(main())

    def start(self, timeout: float = 30.0) -> "PolicyServer":
        """Serve from a background thread; returns once listening (tests, benchmarks, notebooks)."""

        def target() -> None:
            try:
                asyncio.run(self.serve_async())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                self._failed = exc
                self._ready.set()

        self._thread = threading.Thread(target=target, name="vla-serve-loop", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the server did not start listening in time")
        if self._failed is not None:
            raise RuntimeError(f"the server failed to start: {self._failed}") from self._failed
        return self

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ handshake and HTTP
    def authorized(self, headers: Any, query: dict[str, list[str]]) -> bool:
        return self.access.authorized(headers, query)

    async def _process_request(self, connection: ServerConnection, request: Any) -> Any:
        from .http import handle_http

        url = urlsplit(request.path)
        query = parse_qs(url.query)
        refusal = self.access.host_refusal(request.headers, self.port) or self.access.origin_refusal(
            request.headers, self.port
        )
        if refusal is not None:
            log.warning("refused a request from %s: %s", peer_of(connection), refusal)
            return connection.respond(403, f"forbidden: {refusal}\n")
        if not self.authorized(request.headers, query):
            return connection.respond(
                401, "unauthorized: pass the server's token (Authorization: Bearer / Api-Key, or ?token=)\n"
            )
        if (request.headers.get("Upgrade") or "").lower() == "websocket":
            if len(self.conns) >= self.cfg.max_connections:
                return connection.respond(503, f"too many connections (max {self.cfg.max_connections})\n")
            if self.access.peer_full(peer_of(connection)):
                n = self.cfg.max_connections_per_peer
                return connection.respond(503, f"too many connections from this address (max {n})\n")
            return None
        return await handle_http(self, connection, url.path, query)

    # ------------------------------------------------------------------ connections
    def protocol_of(self, path: str) -> str:
        """Which protocol a websocket on ``path`` speaks: ``/vla`` ours, ``/openpi`` openpi's,
        any other path the configured ``protocol``."""
        first = urlsplit(path).path.strip("/").split("/")[0]
        return first if first in ("vla", "openpi") else str(self.cfg.protocol)

    async def _handler(self, ws: ServerConnection) -> None:
        url = ws.request.path if ws.request is not None else "/"
        query = parse_qs(urlsplit(url).query)
        conn = _Conn(next(self._numbers), ws, (query.get("format") or [""])[0] == "json", peer_of(ws))
        self.conns[conn.number] = conn
        self.access.opened(conn.peer)
        try:
            if self.protocol_of(url) == "openpi":
                from .openpi import serve_connection

                await serve_connection(self, conn)
                return
            await self._send(conn, {"event": "metadata", "result": self.metadata()}, conn.json)
            while True:
                message = await self.receive(conn)
                if message is None:
                    break
                reply = await self._handle(conn, message, isinstance(message, str))
                if reply is not None:
                    await ws.send(reply)
                await asyncio.sleep(0)  # one busy connection does not keep the others waiting
        except websockets.ConnectionClosed:
            pass
        finally:
            self.conns.pop(conn.number, None)
            self.access.closed(conn.peer)
            self._detach(conn)

    async def receive(self, conn: _Conn) -> str | bytes | None:
        """The next message, or ``None`` once a connection that controls no session was idle
        ``idle_timeout_s`` (closed then). A connection controlling a session may pause as long as
        it likes (a simulator between episodes, a robot at rest): sessions are capped by
        ``max_sessions``, and openpi's clients cannot reconnect."""
        while True:
            try:
                return await asyncio.wait_for(conn.ws.recv(), float(self.cfg.idle_timeout_s))
            except asyncio.TimeoutError:
                s = conn.session
                if s is not None and s.state == "active" and s.controller == conn.number:
                    continue
                idle = self.cfg.idle_timeout_s
                await conn.ws.close(1001, f"idle for {idle:g} s: closed by the server (reconnect to go on)")
                return None

    def _detach(self, conn: _Conn) -> None:
        s = conn.session
        if s is not None and s.controller == conn.number and s.state == "active":
            s.state, s.controller, s.detached_at = "detached", None, time.time()
            log.info(
                "session %s detached: its client disconnected; kept %.0f s for it to come back",
                s.id,
                self.cfg.session_timeout_s,
            )

    async def _send(self, conn: _Conn, message: Any, json_mode: bool) -> None:
        await conn.ws.send(dumps_json(message) if json_mode else pack(message))

    def encode(self, message: Any, json_mode: bool) -> str | bytes:
        try:
            return dumps_json(message) if json_mode else pack(message)
        except WireError as exc:
            return self.encode(P.error_reply(message.get("id"), P.INTERNAL, f"reply not encodable: {exc}"), json_mode)

    async def _handle(self, conn: _Conn, message: str | bytes, json_mode: bool) -> str | bytes | None:
        self.stats["requests"] += 1
        conn.t_in = time.perf_counter()
        rid = None
        try:
            msg = await self.decode(message, json_mode)
            rid = msg.get("id") if isinstance(msg, dict) and isinstance(msg.get("id"), (int, str)) else None
            rid, method, params = P.parse_request(msg)
            if method in P.QUERY_METHODS:
                self.stats["queries"] += 1
                s = self.query_session(params.get("session"))
                await self._pace_query()
                return await self._loop.run_in_executor(
                    self.pool, self.queries.answer, s, method, params, rid, json_mode
                )
            return self.encode(P.ok_reply(rid, await self._dispatch(conn, method, params, json_mode)), json_mode)
        except (WireError, P.RequestError, SessionError) as exc:
            code = (
                exc.code
                if isinstance(exc, P.RequestError)
                else (P.NO_SESSION if isinstance(exc, SessionError) else P.BAD_REQUEST)
            )
            return self._error(conn, rid, code, str(exc), json_mode)
        except websockets.ConnectionClosed:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug answers this request, the server goes on
            log.error("internal error on a request: %s", traceback.format_exc())
            return self._error(conn, rid, P.INTERNAL, f"{type(exc).__name__}: {exc}", json_mode)

    async def decode(self, message: str | bytes, json_mode: bool, openpi: bool = False) -> Any:
        """One message decoded and checked (:mod:`vla.wire.codec`; ``openpi``: openpi's msgpack-numpy); one
        over ``INLINE_DECODE`` bytes on a decoding thread, so a heavy message never holds the event loop."""

        def decode() -> Any:
            if json_mode:
                return loads_json(message, self.cfg.max_bytes, int(self.cfg.max_objects))
            if openpi:
                return unpack_openpi(message, self.cfg.max_bytes, int(self.cfg.max_objects))
            return unpack(message, self.cfg.max_bytes, int(self.cfg.max_objects))

        if len(message) <= INLINE_DECODE:
            return decode()
        return await self._loop.run_in_executor(self.decoder, decode)

    async def _pace_query(self) -> None:
        """With ``query_rate`` set and a simulator connected, space queries 1/query_rate apart (in
        arrival order); a waiting query costs nothing, so readers cannot take the CPU inference needs."""
        rate = float(self.cfg.query_rate)
        if rate <= 0 or self.sessions.controlled() == 0:
            return
        now = self._loop.time()
        at = max(now, self._next_query)
        self._next_query = at + 1.0 / rate
        if at > now:
            await asyncio.sleep(at - now)

    def _error(self, conn: _Conn, rid: Any, code: str, message: str, json_mode: bool) -> str | bytes:
        conn.errors += 1
        self.stats["errors"] += 1
        return self.encode(P.error_reply(rid, code, message), json_mode)

    # ------------------------------------------------------------------ control methods
    async def _dispatch(self, conn: _Conn, method: str, params: dict[str, Any], json_mode: bool) -> Any:
        if method == "health":
            P.Params(method, params, ())
            return self.health()
        if method == "metadata":
            P.Params(method, params, ())
            return self.metadata()
        if method == "sessions":
            P.Params(method, params, ())
            return {"sessions": self.sessions.list()}
        if method == "reset":
            return await self._reset(conn, P.Params(method, params, ("instruction", "spec", "seed")))
        if method == "attach":
            return await self._attach(conn, P.Params(method, params, ("session", "secret")))
        if method == "infer":
            if json_mode:
                raise P.bad("infer needs msgpack (binary frames with numpy arrays); JSON carries queries only")
            return await self._infer(conn, P.Params(method, params, ("observation", "seq")))
        if method == "close":
            P.Params(method, params, ())
            s = self._controlled(conn)
            await self.end_session(s)
            conn.session = None
            return {"session": s.id, "state": s.state}
        raise P.RequestError(P.UNKNOWN_METHOD, f"unknown method {method!r}")  # pragma: no cover - parse_request

    async def _on_policy(self, fn) -> Any:
        """Run ``fn`` on the inference thread and await its result."""
        fut = self._loop.create_future()

        def done(result: Any, timing: dict) -> None:
            self._loop.call_soon_threadsafe(_settle, fut, (result, timing))

        self.batcher.control(fn, done)
        result, _ = await fut
        if isinstance(result, Exception):
            raise result
        return result

    def _check_spec(self, spec: EnvSpec) -> None:
        exp = self.expected_spec
        if exp is None:
            return
        if spec.family != exp.family or spec.action.names != exp.action.names:
            raise P.bad(
                f"reset: this server expects the {exp.family} env with actions {list(exp.action.names)}, "
                f"got {spec.family} with {list(spec.action.names)}"
            )

    async def _reset(self, conn: _Conn, p: P.Params) -> dict[str, Any]:
        instruction = p.str("instruction", required=True, max_len=4000)
        try:
            spec = EnvSpec.from_dict(p.map("spec"))
        except ValueError as exc:
            raise P.bad(f"reset: {exc}") from None
        self._check_spec(spec)
        s = await self.start_episode(conn, instruction, spec, p.seed())
        # the secret goes to this connection only: with it (and only with it) a client takes the
        # session back after a reconnect
        return {"session": s.id, "episode": s.episode, "secret": s.secret}

    async def start_episode(self, conn: _Conn, instruction: str, spec: EnvSpec, seed: Any) -> Session:
        """The next episode of this connection's session (a new session on its first)."""
        s = conn.session if conn.session is not None and conn.session.state == "active" else None
        if s is None:
            if len(self.sessions.live()) >= int(self.cfg.max_sessions):
                raise P.RequestError(
                    P.LIMIT,
                    f"reset: the server holds its maximum of {self.cfg.max_sessions} live sessions; "
                    "try again when one has ended",
                )
            s = self.sessions.new()
        s.controller, s.state = conn.number, "active"
        conn.session = s
        try:
            await self._on_policy(lambda: self.policy.reset(s.id, instruction, spec, seed))
        except Exception as exc:  # noqa: BLE001 - the policy refused the episode: an error reply
            raise P.RequestError(P.POLICY_ERROR, f"reset failed: {type(exc).__name__}: {exc}") from None
        s.instruction, s.spec, s.episode, s.steps = instruction, spec, s.episode + 1, 0
        s.last_seq, s.last_reply, s.last_active = None, None, time.time()
        self.snapshots.drop(s.id)
        self.queries.drop(s.id)
        return s

    async def _attach(self, conn: _Conn, p: P.Params) -> dict[str, Any]:
        sid = p.str("session", required=True, max_len=64)
        secret = p.str("secret", required=True, max_len=128)
        s = self.sessions.get(sid)
        if s is None or s.state == "ended":
            raise P.RequestError(P.NO_SESSION, f"attach: session {sid!r} is not live (ended, expired or unknown)")
        if not hmac.compare_digest(secret.encode("utf-8"), s.secret.encode("utf-8")):
            raise P.RequestError(
                P.FORBIDDEN, f"attach: wrong secret for session {sid!r} (only the client that reset it can attach)"
            )
        old = self.conns.get(s.controller) if s.controller is not None else None
        if old is not None and old is not conn:
            old.session = None
            asyncio.ensure_future(old.ws.close(4000, "session taken back by its reconnecting client"))
        if conn.session is not None and conn.session is not s:
            self._detach(conn)
        s.controller, s.state, s.detached_at = conn.number, "active", None
        conn.session = s
        return {"session": s.id, "episode": s.episode, "steps": s.steps, "last_seq": s.last_seq}

    def query_session(self, sid: Any) -> Session:
        """The session a query names (``session``), or the default one (event-loop thread only)."""
        if sid is not None and sid != "":
            if not isinstance(sid, str):
                raise P.bad(f"parameter 'session' must be a string, got {type(sid).__name__}")
            s = self.sessions.get(sid)
            if s is None:
                known = [x.id for x in self.sessions.sessions.values()]
                raise P.RequestError(P.NO_SESSION, f"no session {sid[:64]!r}; sessions: {known}")
            return s
        s = self.sessions.default()
        if s is None:
            raise P.RequestError(P.NO_SESSION, "no session yet: no simulator has reset an episode on this server")
        return s

    async def run_query(self, s: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of one ``map.*`` call on session ``s``, computed on a query thread."""
        return await self._loop.run_in_executor(self.pool, self.queries.run, s, method, params)

    def _controlled(self, conn: _Conn) -> Session:
        s = conn.session
        if s is None or s.state != "active" or s.controller != conn.number:
            raise P.RequestError(P.NO_SESSION, "this connection controls no session: call reset (or attach) first")
        return s

    async def _infer(self, conn: _Conn, p: P.Params) -> dict[str, Any]:
        s = self._controlled(conn)
        obs = p.map("observation")
        seq = p.int("seq", None, lo=0)
        if seq is not None and s.last_seq is not None:
            if seq == s.last_seq and s.last_reply is not None:
                return s.last_reply  # a retried request: the same answer, the step not taken twice
            if seq < s.last_seq:
                raise P.bad(f"infer: seq {seq} is older than the last one answered ({s.last_seq})")
        action, timing = await self.step(conn, s, obs)
        reply = {"action": action, "session": s.id, "step": s.steps, "server_timing": timing}
        if seq is not None:
            s.last_seq, s.last_reply = seq, reply
        return reply

    async def step(self, conn: _Conn, s: Session, obs: dict[str, Any]) -> tuple[Any, dict[str, float]]:
        """One observation of session ``s`` through the batcher: ``(action, server_timing)``, or a
        ``RequestError`` (a bad observation is the request's fault, whatever the agent raised or
        returned is the policy's)."""
        t0 = time.perf_counter()
        fut = self._loop.create_future()
        self.batcher.infer(s.id, obs, lambda r, t: self._loop.call_soon_threadsafe(_settle, fut, (r, t)))
        result, timing = await fut
        if isinstance(result, Exception):
            if isinstance(result, SessionError):
                code = P.NO_SESSION
            elif isinstance(result, ObservationError):
                code = P.BAD_REQUEST
            else:
                code = P.POLICY_ERROR
                result = f"{type(result).__name__}: {result}"
            raise P.RequestError(code, f"infer: {result}")
        self.stats["infers"] += 1
        step = obs.get("step")
        s.steps = int(step) if isinstance(step, int) else s.steps + 1
        s.infers += 1
        s.last_active = time.time()
        timing = {k: round(v, 3) for k, v in timing.items()}
        now = time.perf_counter()
        timing["server_ms"] = round((now - t0) * 1e3, 3)
        timing["handle_ms"] = round((now - conn.t_in) * 1e3, 3)  # and decoding the request
        return result, timing

    async def end_session(self, s: Session) -> None:
        def close() -> Any:
            final, _ = self.snapshots.get(s.id, self.policy.live_memory(s.id))
            self.policy.close(s.id)
            return final

        final = await self._on_policy(close)
        self.snapshots.drop(s.id)
        self.queries.drop(s.id)
        for gone in self.sessions.end(s, final):
            self.queries.drop(gone)

    async def _reap_sessions(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, max(0.05, self.cfg.session_timeout_s / 4)))
            now, timeout = time.time(), self.cfg.session_timeout_s
            for s in list(self.sessions.sessions.values()):
                if s.state == "detached" and s.detached_at is not None and now - s.detached_at > timeout:
                    log.info("session %s ended: no client came back in %.0f s", s.id, self.cfg.session_timeout_s)
                    try:
                        await self.end_session(s)
                    except Exception:  # noqa: BLE001 - a failing close must not stop the reaper
                        log.error("closing session %s failed: %s", s.id, traceback.format_exc())
                        self.queries.drop(s.id)
                        for gone in self.sessions.end(s, None):
                            self.queries.drop(gone)


def _settle(fut: asyncio.Future, value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
