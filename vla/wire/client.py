"""``PolicyClient``: the typed, reconnecting client of a ``vla-serve`` server (simulators, scripts, notebooks).

    from vla.serve import PolicyClient

    with PolicyClient("ws://127.0.0.1:8765", token=None) as c:
        c.metadata["agent"]                          # sent by the server on connect
        c.reset("go to the sofa", env.env_spec)       # starts an episode; c.session is its id
        action = c.infer(obs.to_dict()).action        # server_timing, step too
        c.query(question="where is the black bowl?")  # QueryAnswer(id, direction_deg, distance_m, point, ...)
        c.query(target="sofa", what=["direction", "distance"])
        c.topdown("medium").save("map.png")
        c.objects().objects                           # every object, nearest first

Blocking calls, one at a time per client (a lock serialises threads). When the connection drops
the client reconnects (backoff, up to ``reconnect_timeout_s``), takes its session back with
``attach`` (and the session's secret, which only the client that reset it was given) and resends
the request; ``infer`` carries a sequence number, so a request the server
had already answered is answered again from its cache instead of being stepped twice. A session
the server no longer has (restarted, or expired after ``session_timeout_s``) raises
:class:`SessionLost`: that episode cannot continue. Server-side errors raise :class:`ServerError`
with the server's code and message.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import websockets
from websockets.sync.client import connect

from envs.spec import EnvSpec

from .codec import pack, unpack


class ServerError(RuntimeError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class ConnectionRejected(ConnectionError):
    """The server answered the handshake with an HTTP error (401: wrong or missing token; 403: a
    refused origin or host; 503: full)."""


class SessionLost(ConnectionError):
    """The server no longer has this client's session; the episode in progress is lost."""


@dataclass
class InferResult:
    action: np.ndarray  # (dim,) or a chunk (T, dim)
    server_timing: dict[str, float]
    step: int
    session: str


@dataclass
class QueryAnswer:
    id: str
    category: str
    text: str
    direction_deg: float | None = None
    distance_m: float | None = None
    point: list[int] | None = None
    agent: dict[str, Any] | None = None
    others: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ObjectsTable:
    session: str
    frames: int
    step: int
    objects: list[dict[str, Any]]
    agent: dict[str, Any] | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class TopDown:
    png: bytes
    frame: dict[str, Any]
    frames: int

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_bytes(self.png)
        return path

    def image(self) -> np.ndarray:
        """The map as an RGB uint8 array."""
        import cv2

        bgr = cv2.imdecode(np.frombuffer(self.png, dtype=np.uint8), cv2.IMREAD_COLOR)
        return bgr[:, :, ::-1].copy()


class PolicyClient:
    def __init__(
        self,
        url: str = "ws://127.0.0.1:8765",
        token: str | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        reconnect: bool = True,
        reconnect_timeout_s: float = 30.0,
        max_message_mb: float = 512.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise ValueError(f"server url must start with ws:// or wss://, got {url!r}")
        self.url, self.token = url, token
        self.timeout_s, self.connect_timeout_s = float(timeout_s), float(connect_timeout_s)
        self.reconnect, self.reconnect_timeout_s = bool(reconnect), float(reconnect_timeout_s)
        self.max_bytes = int(max_message_mb * 2**20)
        self.metadata: dict[str, Any] = {}
        self.session: str | None = None
        self._secret: str | None = None  # the session's secret: attach needs it
        self._ws = None
        self._ids = count(1)
        self._seq = count(0)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ connection
    def __enter__(self) -> "PolicyClient":
        self.connect()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def connect(self) -> "PolicyClient":
        with self._lock:
            if self._ws is not None:
                return self
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            try:
                ws = connect(
                    self.url,
                    additional_headers=headers,
                    max_size=self.max_bytes,
                    open_timeout=self.connect_timeout_s,
                    compression=None,
                    close_timeout=2,
                    legacy=True,  # a connection this object owns and closes, not a with-block
                )
            except websockets.InvalidStatus as exc:
                status = exc.response.status_code
                body = bytes(exc.response.body or b"").decode("utf-8", "replace").strip()
                raise ConnectionRejected(f"{self.url} refused the connection: HTTP {status} {body}") from None
            hello = unpack(ws.recv(timeout=self.connect_timeout_s))
            if isinstance(hello, dict) and hello.get("protocol") == "openpi" and "vla_protocol_path" in hello:
                ws.close()
                raise ConnectionError(
                    f"{self.url} speaks openpi's protocol; our protocol is on the same port at path "
                    f"{hello['vla_protocol_path']} (e.g. ws://HOST:PORT/vla)"
                )
            if not isinstance(hello, dict) or hello.get("event") != "metadata":
                ws.close()
                raise ConnectionError(f"{self.url} is not a vla-serve server (first message: {str(hello)[:200]})")
            self._ws, self.metadata = ws, hello["result"]
            return self

    def close(self) -> None:
        with self._lock:
            if self._ws is not None:
                try:
                    self._ws.close()
                finally:
                    self._ws = None

    def _reconnect(self, cause: BaseException) -> None:
        self._ws = None
        if not self.reconnect:
            raise ConnectionError(f"lost the connection to {self.url}: {cause}") from cause
        deadline, delay = time.monotonic() + self.reconnect_timeout_s, 0.1
        while True:
            try:
                self.connect()
                break
            except ConnectionRejected:
                raise
            except (OSError, websockets.WebSocketException) as exc:
                if time.monotonic() + delay > deadline:
                    raise ConnectionError(
                        f"lost the connection to {self.url} and could not reconnect in "
                        f"{self.reconnect_timeout_s:.0f} s: {exc}"
                    ) from cause
                time.sleep(delay)
                delay = min(2.0, delay * 2)
        if self.session is not None:
            try:
                self._call_once("attach", {"session": self.session, "secret": self._secret})
            except ServerError as exc:
                lost, self.session, self._secret = self.session, None, None
                raise SessionLost(f"the server no longer has session {lost} ({exc.message})") from cause

    def _call_once(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        self._ws.send(pack({"id": rid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method}: no reply from {self.url} in {self.timeout_s:.0f} s")
            msg = unpack(self._ws.recv(timeout=left))
            # an error with no id answers a request the server could not decode: ours (one at a time)
            if isinstance(msg, dict) and (
                msg.get("id") == rid or ("id" in msg and msg["id"] is None and not msg.get("ok"))
            ):
                if msg.get("ok"):
                    return msg.get("result")
                err = msg.get("error") or {}
                raise ServerError(str(err.get("code", "error")), str(err.get("message", "")))

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request; reconnects (and re-attaches the session) on a dropped connection."""
        params = dict(params or {})
        with self._lock:
            if self._ws is None:
                self.connect()
            while True:
                try:
                    return self._call_once(method, params)
                except (TimeoutError, ConnectionRejected, SessionLost):
                    raise
                except (websockets.ConnectionClosed, OSError) as exc:
                    self._reconnect(exc)

    # ------------------------------------------------------------------ control
    def reset(self, instruction: str, spec: EnvSpec | dict, seed: int | Iterable[int] | None = None) -> str:
        """Start an episode (a new session on the first call; the same session afterwards)."""
        spec_d = spec.to_dict() if isinstance(spec, EnvSpec) else dict(spec)
        params: dict[str, Any] = {"instruction": instruction, "spec": spec_d}
        if seed is not None:
            params["seed"] = [int(s) for s in seed] if not isinstance(seed, (int, np.integer)) else int(seed)
        r = self.call("reset", params)
        self.session, self._secret = r["session"], r.get("secret")
        return self.session

    def infer(self, observation: dict[str, Any]) -> InferResult:
        r = self.call("infer", {"observation": observation, "seq": next(self._seq)})
        return InferResult(np.asarray(r["action"]), r["server_timing"], int(r["step"]), r["session"])

    def end_session(self) -> None:
        if self.session is not None:
            self.call("close")
            self.session, self._secret = None, None

    # ------------------------------------------------------------------ queries
    def health(self) -> dict[str, Any]:
        return self.call("health")

    def sessions(self) -> list[dict[str, Any]]:
        return self.call("sessions")["sessions"]

    @staticmethod
    def _sess(session: str | None, params: dict[str, Any]) -> dict[str, Any]:
        return {**params, "session": session} if session else params

    def objects(self, session: str | None = None, **frame: Any) -> ObjectsTable:
        r = self.call("map.objects", self._sess(session, frame))
        return ObjectsTable(r["session"], int(r["frames"]), int(r["step"]), r["objects"], r["agent"], r)

    def query(
        self,
        target: str | None = None,
        question: str | None = None,
        what: Iterable[str] | None = None,
        session: str | None = None,
        **frame: Any,
    ) -> QueryAnswer:
        """One object, by ``target`` (an id or a category) or by ``question`` ("where is the bowl?")."""
        params: dict[str, Any] = dict(frame)
        if target is not None:
            params["target"] = target
        if question is not None:
            params["question"] = question
        if what is not None:
            params["what"] = list(what)
        r = self.call("map.query", self._sess(session, params))
        return QueryAnswer(
            id=r["id"],
            category=r["category"],
            text=r["text"],
            direction_deg=r.get("direction_deg"),
            distance_m=r.get("distance_m"),
            point=r.get("point"),
            agent=r.get("agent"),
            others=r.get("others", []),
            raw=r,
        )

    def topdown(self, level: str = "medium", session: str | None = None, **options: Any) -> TopDown:
        r = self.call("map.topdown", self._sess(session, {"level": level, **options}))
        return TopDown(r["png"], r["frame"], int(r["frames"]))

    def snapshot(self, path: str | Path | None = None, session: str | None = None) -> bytes:
        """The session's memory as ``.npz`` bytes (written to ``path`` if given; ``SpatialMemory.load`` reads it)."""
        data = self.call("map.snapshot", self._sess(session, {}))["npz"]
        if path is not None:
            Path(path).write_bytes(data)
        return data
