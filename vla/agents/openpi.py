"""``agent=openpi``: a client of any server that speaks openpi's websocket protocol (openpi's own
policy server, or ``vla-serve ... protocol=openpi``), so our evaluator can score a policy served
that way.

    vla-rollout env=libero agent=openpi agent.url=ws://127.0.0.1:8000 agent.replan_steps=5 out=runs/pi

Every rollout worker opens its own connection, lazily (after the evaluator forked it), and a fresh
one for every episode: openpi's protocol has no reset, and a server keeps per-connection state.
``act(obs)`` sends the observation under openpi's keys -- the env's key map,
``configs/openpi/<env>.yaml`` (``agent.keys`` to give another) -- in openpi's msgpack-numpy
encoding, and plays the returned chunk ``actions [K, D]`` out one step at a time, asking again
after ``replan_steps`` of them (0: the whole chunk). ``image_size > 0`` resizes every image to a
square of that side first, keeping its aspect ratio and padding with black, as openpi's example
clients do before sending (224 there). A server error (openpi's servers answer one with a text
frame) fails the episode with the server's text. GST questions are not sent over the socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec
from vla_common.strict import from_dict

from .chunks import ChunkBroker


def resize_with_pad(img: np.ndarray, size: int) -> np.ndarray:
    """``img`` (H, W, C) scaled to fit a ``size`` x ``size`` square, aspect kept, centred on black."""
    import cv2

    h, w = img.shape[:2]
    if (h, w) == (size, size):
        return img
    scale = size / max(h, w)
    nh, nw = max(1, int(h * scale)), max(1, int(w * scale))
    small = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR if scale > 1 else cv2.INTER_AREA)
    out = np.zeros((size, size) + img.shape[2:], dtype=img.dtype)
    top, left = (size - nh) // 2, (size - nw) // 2
    out[top : top + nh, left : left + nw] = small.reshape(nh, nw, *img.shape[2:])
    return out


@dataclass(frozen=True)
class OpenpiAgentOptions:
    """``agent=openpi``'s options and defaults (configs/agent/openpi.yaml only names the agent)."""

    url: str = "ws://127.0.0.1:8000"  # the server's address (a path too: ws://host:port/openpi)
    token: str | None = None  # sent as "Authorization: Api-Key <token>", as openpi's client does
    keys: dict[str, str] | None = None  # openpi key -> observation key (None: configs/openpi/<env>.yaml)
    replan_steps: int = 0  # ask again after this many actions of a chunk (0: the whole chunk; openpi's LIBERO: 5)
    image_size: int = 0  # resize images to a padded square of this side before sending (0: as they are; openpi: 224)
    timeout_s: float = 120.0  # per request

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("ws://", "wss://")):
            raise ValueError(
                f"agent.url must be the ws:// or wss:// address of an openpi-protocol server, got {self.url!r}"
            )
        if int(self.replan_steps) < 0 or int(self.image_size) < 0:
            raise ValueError("agent.replan_steps and agent.image_size must be >= 0")


class OpenpiAgent:
    name = "openpi"
    privileged = False

    def __init__(self, seed: int = 0, **options: Any) -> None:
        o = from_dict(OpenpiAgentOptions, options, "openpi agent")
        self.url, self.token, self.keys = o.url, o.token, dict(o.keys) if o.keys else None
        self.replan_steps, self.image_size, self.timeout_s = int(o.replan_steps), int(o.image_size), float(o.timeout_s)
        self._ws = None
        self._keymap = None
        self._chunks = ChunkBroker(replan=self.replan_steps)
        self.metadata: dict[str, Any] = {}
        self.last_timing: dict[str, float] | None = None

    def _connect(self) -> None:
        from websockets.sync.client import connect

        from vla.wire.codec import unpack_openpi

        headers = {"Authorization": f"Api-Key {self.token}"} if self.token else None
        self._ws = connect(self.url, additional_headers=headers, compression=None, max_size=None, legacy=True)
        meta = unpack_openpi(self._ws.recv(timeout=self.timeout_s))
        self.metadata = meta if isinstance(meta, dict) else {}

    def _close_ws(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            finally:
                self._ws = None

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        from vla.openpi_keys import KeyMap

        self._chunks.reset()
        self._keymap = KeyMap.for_env(spec.family, self.keys)
        self._close_ws()  # a fresh connection per episode: the server's per-connection state starts anew
        self._connect()

    def _request(self, obs: dict[str, Any]) -> np.ndarray:
        from vla.wire.codec import pack_openpi, unpack_openpi

        self._ws.send(pack_openpi(obs))
        reply = self._ws.recv(timeout=self.timeout_s)
        if isinstance(reply, str):
            self._close_ws()
            raise RuntimeError(f"the openpi server at {self.url} answered with an error: {reply[:2000]}")
        out = unpack_openpi(reply)
        if not isinstance(out, dict) or not isinstance(out.get("actions"), np.ndarray):
            raise RuntimeError(f"the openpi server at {self.url} sent no 'actions' array: {str(out)[:300]}")
        self.last_timing = out.get("server_timing")
        actions = np.asarray(out["actions"], dtype=np.float64)
        return actions.reshape(1, -1) if actions.ndim == 1 else actions

    def reads_next(self) -> bool:
        return self._chunks.asks_next()  # the observation is sent only when a new chunk is asked for

    def act(self, observation: Observation) -> np.ndarray:
        return self._chunks(lambda: self._predict(observation))

    def _predict(self, observation: Observation) -> np.ndarray:
        if self._keymap is None or self._ws is None:
            raise RuntimeError("agent=openpi: call reset() before act()")
        obs = self._keymap.openpi_observation(observation.to_dict())
        if self.image_size:
            for k, v in obs.items():
                if isinstance(v, np.ndarray) and v.ndim == 3 and v.shape[2] == 3 and v.dtype == np.uint8:
                    obs[k] = resize_with_pad(v, self.image_size)
        return self._request(obs)

    def answer(self, question: Any) -> str:
        raise NotImplementedError("agent=openpi forwards actions only: openpi's protocol carries no questions")

    def close(self) -> None:
        self._close_ws()
