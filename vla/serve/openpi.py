"""openpi's websocket protocol, served by vla-serve (``protocol=openpi``, or any server on ``/openpi``).

The protocol, as openpi's ``openpi-client`` package speaks it: on connect the server sends its
metadata (a plain map); then every binary message from the client is one bare observation map in
openpi's msgpack-numpy encoding (:func:`~vla.wire.codec.unpack_openpi`), answered by a map with
``actions`` (an array ``[K, D]``: a chunk of K actions; one action is a chunk of one) and
``server_timing``. An error is answered as openpi's server answers one: a text frame saying what
was wrong, then the connection closes with code 1011 (openpi's client raises with that text).

Observation keys are openpi's (its LIBERO example sends ``observation/image``,
``observation/wrist_image``, ``observation/state``, ``prompt``); a per-env **key map**
(:class:`~vla.openpi_keys.KeyMap`: ``configs/openpi/<env>.yaml``, or ``openpi_keys=`` on the server)
names the key of our observation dict (``EnvSpec.features``) each one becomes. The server needs to know the env
(``vla-serve env=<name>``): its action space, state layout and cameras. A connection's session
spec is that env's, with the cameras the client sends (at the size it sends them) and nothing
else; what a camera of ours has and openpi's clients do not send is filled in: depth 0 (invalid:
nothing is fused from it), the intrinsics of a nominal 90-degree camera, the identity pose. A key
map may name depth, intrinsics or pose keys too, for clients that send them.

openpi's protocol has no reset: a connection is one session; its first observation starts an
episode, and so does every change of the prompt. Sessions, batching, limits, the origin and token
checks (openpi's client sends ``Authorization: Api-Key <token>``) are the server's own, and the
map stays queryable over our protocol on ``ws://HOST:PORT/vla`` (docs/SERVING.md).
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

import numpy as np
import websockets

from envs.spec import ArraySpec, CameraSpec, EnvSpec
from vla.openpi_keys import KeyMap

from . import protocol as P
from .host import OpenpiHost
from vla.wire.codec import WireError, pack_openpi

log = logging.getLogger("vla.serve")


def nominal_K(height: int, width: int) -> np.ndarray:
    """Intrinsics of a pinhole camera with a 90-degree horizontal field of view, centred."""
    f = width / 2.0
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def session_spec(km: KeyMap, env: EnvSpec, obs: dict[str, Any]) -> EnvSpec:
    """The spec of a session of openpi observations like ``obs`` (see the module doc)."""
    cams: dict[str, dict[str, Any]] = {}
    sensors: dict[str, ArraySpec] = {}
    for theirs, ours in km.keys.items():
        if theirs not in obs:
            continue
        parts = ours.split("/")
        if parts[0] == "cameras" and (not env.cameras or parts[1] in env.camera_names):
            cams.setdefault(parts[1], {})[parts[2]] = obs[theirs]
        elif parts[0] == "sensors":
            v = np.asarray(obs[theirs])
            sensors[parts[1]] = ArraySpec(v.shape, v.dtype.str if v.dtype.kind in "biufU" else "float64")
    cameras = []
    for name, fields in cams.items():
        rgb = fields.get("rgb")
        if not isinstance(rgb, np.ndarray) or rgb.ndim != 3:
            shown = getattr(rgb, "shape", type(rgb).__name__)
            raise P.bad(f"openpi observation: camera {name!r}'s image must be an (H, W, 3) array, got {shown}")
        h, w = rgb.shape[:2]
        cameras.append(CameraSpec(name, h, w, depth="depth" in fields, instance="instance" in fields))
    return EnvSpec(env.family, env.action, env.state, tuple(cameras), sensors, dict(env.task), dict(env.info))


def observation(km: KeyMap, obs: dict[str, Any], spec: EnvSpec, step: int) -> dict[str, Any]:
    """Our observation dict of an openpi observation (keys renamed, missing camera fields filled)."""
    unknown = sorted(k for k in obs if k not in km.keys)
    if unknown:
        raise P.bad(f"openpi observation has key(s) {unknown[:8]} that the key map does not name: {km.keys}")
    d: dict[str, Any] = {"step": int(step)}
    for theirs, ours in km.keys.items():
        if theirs not in obs:
            continue
        parts = ours.split("/")
        if parts[0] == "cameras" and parts[1] not in spec.camera_names:
            continue  # a camera this env does not have
        d[ours] = obs[theirs]
    d.setdefault("prompt", str(spec.task.get("instruction", "")))
    for cam in spec.cameras:
        p = f"cameras/{cam.name}/"
        d.setdefault(p + "depth", np.zeros((cam.height, cam.width), np.float32))
        d.setdefault(p + "K", nominal_K(cam.height, cam.width))
        d.setdefault(p + "T_world_cam", np.eye(4))
    return d


def _prompt(km: KeyMap, obs: dict[str, Any], env: EnvSpec) -> str:
    if km.prompt_key is None or km.prompt_key not in obs:
        return str(env.task.get("instruction", ""))
    prompt = obs[km.prompt_key]
    if isinstance(prompt, np.ndarray) and prompt.dtype.kind == "U" and prompt.size == 1:
        prompt = str(prompt.reshape(()))
    if not isinstance(prompt, str) or len(prompt) > 4000:
        raise P.bad(f"openpi observation: {km.prompt_key!r} must be a string of at most 4000 characters")
    obs[km.prompt_key] = prompt
    return prompt


async def serve_connection(server: OpenpiHost, conn: Any) -> None:
    """One openpi client's connection: metadata, then observation -> actions until it closes."""
    env = server.expected_spec
    keymap: KeyMap | None = None
    unusable: str | None = None  # why this server cannot map openpi observations (said at the first one)
    meta = {**server.metadata(), "protocol": "openpi", "vla_protocol_path": "/vla"}
    try:
        if env is None:
            raise ValueError("this server serves openpi's protocol only with an env (vla-serve env=<name> ...)")
        keymap = KeyMap.for_env(env.family, server.cfg.openpi_keys)
        meta["openpi_keys"] = keymap.keys
    except ValueError as exc:
        unusable = str(exc)
    await conn.ws.send(pack_openpi(meta))
    try:
        await _serve(server, conn, env, keymap, unusable)
    finally:
        # an openpi client cannot come back to a session (the protocol has no attach): end it now
        s = conn.session
        if s is not None and s.state == "active" and s.controller == conn.number:
            try:
                await server.end_session(s)
            except Exception:  # noqa: BLE001 - closing must not hide what ended the connection
                log.error("closing openpi session %s failed: %s", s.id, traceback.format_exc())


async def _serve(server: OpenpiHost, conn: Any, env: Any, keymap: Any, unusable: str | None) -> None:
    spec, prompt, step, prev_total = None, None, 0, None
    while True:
        message = await server.receive(conn)
        if message is None:
            return
        t_in = conn.t_in = time.perf_counter()
        server.stats["requests"] += 1
        try:
            if unusable is not None:
                raise P.bad(unusable)
            if isinstance(message, str):
                raise P.bad("openpi's protocol sends observations as binary msgpack frames, not text")
            obs = await server.decode(message, False, openpi=True)
            if not isinstance(obs, dict):
                raise P.bad(f"an openpi observation is a map of keys to values, got {type(obs).__name__}")
            text = _prompt(keymap, obs, env)
            if spec is None or text != prompt:  # a new episode: the connection's first, or a new task
                spec, prompt, step = session_spec(keymap, env, obs), text, 0
                await server.start_episode(conn, prompt, spec, None)
            action, timing = await server.step(conn, conn.session, observation(keymap, obs, spec, step))
            step += 1
            actions = np.asarray(action, dtype=np.float64)
            timing["infer_ms"] = timing.get("infer_ms", 0.0)
            if prev_total is not None:
                timing["prev_total_ms"] = prev_total
            chunk = actions.reshape(-1, actions.shape[-1])  # one action is a chunk of one
            await conn.ws.send(pack_openpi({"actions": chunk, "server_timing": timing}))
            prev_total = round((time.perf_counter() - t_in) * 1e3, 3)
        except (WireError, P.RequestError) as exc:
            code = exc.code if isinstance(exc, P.RequestError) else P.BAD_REQUEST
            server.stats["errors"] += 1
            await _fail(conn, code, str(exc))
            return
        except websockets.ConnectionClosed:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug answers this client, the server goes on
            log.error("internal error on an openpi request: %s", traceback.format_exc())
            server.stats["errors"] += 1
            await _fail(conn, P.INTERNAL, f"{type(exc).__name__}: {exc}")
            return


async def _fail(conn: Any, code: str, message: str) -> None:
    """openpi's way: the error as a text frame, then close with 1011."""
    await conn.ws.send(f"{code}: {message}"[:4000])
    await conn.ws.close(1011, "error: the previous frame says what was wrong")
