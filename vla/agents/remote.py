"""``agent=remote``: the agent is served by ``vla-serve`` elsewhere; this one forwards over a websocket.

    vla-serve agent=memory port=8765                                   # terminal 1
    vla-rollout env=house agent=remote agent.url=ws://127.0.0.1:8765 eval.workers=4 out=runs/r

Every rollout worker opens its own connection (lazily, at the first ``reset`` -- after the
evaluator forked it) and so is its own session on the server, with its own episode and memory;
the server batches the workers' ``infer`` calls. ``reset(instruction, spec)`` sends the EnvSpec,
``act(obs)`` sends ``obs.to_dict()`` and returns the action; an action chunk ``(T, dim)`` is played
out one step at a time before the next call. The connection survives a server-side hiccup (the
client reconnects and resumes the session); a server that lost the session fails that episode
with the reason (:class:`~vla.agents.base.AgentSessionLost`), and the next episode starts afresh. A
server that cannot be reached (refused, gone for longer than ``reconnect_timeout_s``, no reply in
``timeout_s``) raises :class:`~vla.agents.base.AgentUnavailable`: the evaluator stops the run with the
reason and does not count the episode (the same command runs it again once the server is back). The
evaluator's per-episode seeds travel with
``reset``. GST questions are not sent over the socket: ask the served agent's map with
``map.query`` (``vla-query``, the live page) instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec
from vla_common.strict import from_dict

from .base import AgentSessionLost, AgentUnavailable
from .chunks import ChunkBroker


@dataclass(frozen=True)
class RemoteAgentOptions:
    """``agent=remote``'s options and defaults (configs/agent/remote.yaml only names the agent)."""

    url: str = "ws://127.0.0.1:8765"  # the server's address
    token: str | None = None  # the server's shared token, if it has one
    timeout_s: float = 120.0  # per request
    reconnect_timeout_s: float = 30.0  # keep trying this long when the connection drops (the session resumes)

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("ws://", "wss://")):
            raise ValueError(f"agent.url must be a ws:// or wss:// address of a vla-serve server, got {self.url!r}")


class RemoteAgent:
    name = "remote"

    def __init__(self, seed: int = 0, **options: Any) -> None:
        o = from_dict(RemoteAgentOptions, options, "remote agent")
        self.url, self.token = o.url, o.token
        self.timeout_s, self.reconnect_timeout_s = float(o.timeout_s), float(o.reconnect_timeout_s)
        self._seed: Any = seed
        self._client = None
        self._chunks = ChunkBroker()  # a served chunk (T, dim) is played out before the next call
        self.last_timing: dict[str, float] | None = None

    @property
    def client(self):
        """The connection to the server, opened on first use (in the process that uses it)."""
        if self._client is None:
            from vla.wire.client import PolicyClient

            self._client = self._reach(
                "connect",
                lambda: PolicyClient(
                    self.url, self.token, timeout_s=self.timeout_s, reconnect_timeout_s=self.reconnect_timeout_s
                ).connect(),
            )
        return self._client

    def _reach(self, what: str, call):
        """``call()``, with the server's absence told apart from the policy's own errors: a lost session
        or an unreachable server is not a result of the policy (server-side errors pass unchanged)."""
        import websockets

        from vla.wire.client import SessionLost

        try:
            return call()
        except SessionLost as exc:
            raise AgentSessionLost(f"the policy server {self.url} lost this episode's session: {exc}") from exc
        except (OSError, websockets.WebSocketException) as exc:  # refused, reset, timed out, gone
            self.close()
            raise AgentUnavailable(f"the policy server {self.url} cannot be reached ({what}): {exc}") from exc

    @property
    def session(self) -> str | None:
        return self._client.session if self._client is not None else None

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self._seed = seed

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        self._chunks.reset()
        seed = self._seed
        seed = [int(s) for s in seed] if isinstance(seed, (tuple, list)) else (None if seed is None else int(seed))
        client = self.client
        self._reach("reset", lambda: client.reset(instruction, spec, seed=seed))

    def reads_next(self) -> bool:
        return self._chunks.asks_next()  # the observation is sent only when a new chunk is asked for

    def act(self, observation: Observation) -> np.ndarray:
        return self._chunks(lambda: self._predict(observation))

    def _predict(self, observation: Observation) -> np.ndarray:
        client, obs = self.client, observation.to_dict()
        r = self._reach("infer", lambda: client.infer(obs))
        self.last_timing = r.server_timing
        return np.asarray(r.action, dtype=np.float64)

    def answer(self, question: Any) -> str:
        raise NotImplementedError(
            "a remote agent's map is asked through the server (map.query: vla-query or the live page); "
            "GST questions are not sent over the socket"
        )

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a connection the server already dropped
                pass
            self._client = None
