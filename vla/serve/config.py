"""``ServeConfig``: the server's options; ``ServeOptions``: all of ``vla-serve``'s (configs/serve.yaml
names only its groups; docs/SERVING.md explains the options)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vla_common.strict import from_dict

from .access import is_loopback
from vla.wire.codec import MAX_OBJECTS


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"  # 0.0.0.0 to accept other machines: refused without a token (or insecure=true)
    port: int = 8765  # 0: any free port (tests)
    token: str | None = None  # shared secret: clients send "Authorization: Bearer <token>" (openpi: "Api-Key ...")
    max_message_mb: float = 16.0  # larger messages close the connection (1009)
    batching: bool = True  # batch infer calls across sessions (False: one at a time)
    max_batch: int = 8
    max_wait_ms: float = 2.0  # how long a batch waits for more sessions after its first call
    session_timeout_s: float = 60.0  # a session whose client vanished is kept this long for it to reconnect
    keep_ended: int = 4  # ended sessions whose final map stays queryable
    query_threads: int = 2
    query_defer_ms: float = 50.0  # a map query waits at most this long for a running batch to finish
    max_connections: int = 64
    switch_interval_ms: float = 1.0  # the interpreter's thread switch interval (Python's default: 5 ms)
    query_rate: float = 0.0  # map queries per second over all clients while a simulator is connected (0: no cap)
    insecure: bool = False  # listen beyond loopback without a token (anyone who reaches the port drives the policy)
    origins: tuple[str, ...] = ()  # browser origins allowed besides the server's own page, e.g. [http://dash:3000]
    max_connections_per_peer: int = 32
    idle_timeout_s: float = 300.0  # a connection controlling no session that sends nothing this long is closed
    ping_interval_s: float = 20.0  # keepalive: a websocket ping this often (0: none; a slow client is never dropped)
    ping_timeout_s: float = 20.0  # a connection whose pong has not come back this long after a ping is closed (1011)
    max_sessions: int = 128  # live (active or detached) sessions; a reset beyond it is refused
    max_objects: int = MAX_OBJECTS  # values in one message (an observation holds ~100); more: refused, never built
    query_cache_mb: float = 64.0  # map query results kept for repeated questions (never the memories)
    protocol: str = "vla"  # what websockets on paths other than /vla and /openpi speak: vla | openpi
    openpi_keys: dict[str, str] | None = None  # openpi key -> our observation key (default: configs/openpi/<env>.yaml)

    def __post_init__(self) -> None:
        if not 0 <= int(self.port) < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if not float(self.max_message_mb) > 0 or int(self.max_batch) < 1 or float(self.max_wait_ms) < 0:
            raise ValueError("max_message_mb must be > 0, max_batch >= 1 and max_wait_ms >= 0")
        if int(self.query_threads) < 1 or int(self.max_connections) < 1:
            raise ValueError("query_threads and max_connections must be >= 1")
        if not float(self.ping_interval_s) >= 0 or not float(self.ping_timeout_s) >= 0:
            raise ValueError(
                f"ping_interval_s and ping_timeout_s must be >= 0 (0: off), got {self.ping_interval_s}, "
                f"{self.ping_timeout_s}"
            )
        if float(self.query_rate) < 0:
            raise ValueError(f"query_rate must be >= 0 (0: no cap), got {self.query_rate}")
        if not 0.05 <= float(self.switch_interval_ms) <= 100:
            raise ValueError(f"switch_interval_ms must be in [0.05, 100], got {self.switch_interval_ms}")
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise ValueError("token must be a non-empty string (or null for none)")
        if not is_loopback(str(self.host)) and self.token is None and not self.insecure:
            raise ValueError(
                f"refusing to listen on {self.host} without a token: anyone who can reach it could drive the "
                "policy and read its maps. Set token=... (clients send it), or insecure=true to accept that"
            )
        if isinstance(self.origins, str):
            self.origins = (self.origins,)
        self.origins = tuple(self.origins or ())
        if int(self.max_connections_per_peer) < 1 or int(self.max_sessions) < 1 or int(self.max_objects) < 16:
            raise ValueError("max_connections_per_peer and max_sessions must be >= 1, max_objects >= 16")
        if self.protocol not in ("vla", "openpi"):
            raise ValueError(f"protocol must be vla or openpi, got {self.protocol!r}")
        if self.openpi_keys is not None and not isinstance(self.openpi_keys, dict):
            raise ValueError(f"openpi_keys must be a map of openpi key -> observation key, got {self.openpi_keys!r}")
        if not float(self.idle_timeout_s) > 0 or float(self.query_cache_mb) < 0:
            raise ValueError("idle_timeout_s must be > 0 and query_cache_mb >= 0")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ServeConfig":
        return from_dict(cls, d, "serve")

    @property
    def max_bytes(self) -> int:
        return int(self.max_message_mb * 2**20)


@dataclass
class ServeOptions(ServeConfig):
    """Everything ``vla-serve`` takes (configs/serve.yaml holds only its defaults list): the server's
    options (:class:`ServeConfig`) and what it serves."""

    policy_path: str | None = None  # the learned VLA: an exported policy or checkpoint directory (instead of agent=)
    device: str = "cpu"  # where policy_path runs (cpu, cuda, cuda:1)
    memory: dict[str, Any] | None = None  # for a batched model (BatchModel): MemoryInputs options, one memory per
    #                                       session (a policy_path that reads the memory brings its own)
    log_level: str = "info"
