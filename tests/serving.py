"""Helpers for the serving tests: a real server on loopback, synthetic observations with known truth.

``tour_observations`` renders :func:`spatial_memory.synthetic.apartment_scene` along its tour with
the numpy ray caster (no simulator): plain-data observations of a toy env whose scene truth is
known exactly. ``LinearModel`` is a stand-in for the learned VLA (weights cannot exist here): a
fixed linear map of the state, batched, so each reply can be checked against its own observation.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from envs.spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera
from tests.conftest import ROOT, cli_env
from vla.serve import PolicyServer, ServeConfig, make_batch_policy

SIZE = 48


def toy_spec(size: int = SIZE) -> EnvSpec:
    return EnvSpec(
        family="synthetic",
        action=ActionSpec((-1.0, -1.0), (1.0, 1.0), ("a", "b")),  # not a mobile base: the memory agent holds still
        state=ArraySpec((3,), "float64", ("x", "y", "yaw")),
        cameras=(CameraSpec("ego", size, size),),
        task={"task_id": 0, "name": "toy", "instruction": "look around", "max_steps": 100, "num_trials": 1},
    )


@functools.lru_cache(maxsize=4)
def _tour(n: int, size: int) -> tuple[tuple[dict[str, Any], ...], tuple[np.ndarray, ...]]:
    scene = apartment_scene()
    K = default_camera(size, size)
    obs, poses = [], []
    for step, T in enumerate(apartment_tour(n)):
        f = scene.render(T, K, size, size, step=step)
        ids = sorted(int(i) for i in f.labels)
        obs.append(
            {
                "prompt": "look around",
                "step": step,
                "state": np.array([T[0, 3], T[1, 3], 0.0]),
                "cameras/ego/rgb": f.rgb,
                "cameras/ego/depth": f.depth,
                "cameras/ego/K": f.K,
                "cameras/ego/T_world_cam": f.T_world_cam,
                "cameras/ego/instance": f.instance,
                "cameras/ego/label_ids": np.asarray(ids, dtype=np.int32),
                "cameras/ego/label_names": np.asarray([f.labels[i] for i in ids], dtype=np.str_),
            }
        )
        poses.append(T)
    return tuple(obs), tuple(poses)


def tour_observations(n: int = 28, size: int = SIZE) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """(observation dicts, true camera poses) along the synthetic apartment tour."""
    obs, poses = _tour(n, size)
    return [dict(o) for o in obs], list(poses)


def truth_bearing(T_world_cam: np.ndarray, center: np.ndarray) -> tuple[float, float]:
    """Egocentric (direction_deg, distance_m), written out from docs/ARCHITECTURE.md §4 independently of the
    project's geometry code: forward = the camera's z axis in the floor plane, left = forward turned
    +90 degrees; direction = atan2(left component, forward component)."""
    fwd = T_world_cam[:3, 2][:2]
    fwd = fwd / np.linalg.norm(fwd)
    left = np.array([-fwd[1], fwd[0]])
    v = np.asarray(center[:2]) - T_world_cam[:2, 3]
    return float(np.degrees(np.arctan2(v @ left, v @ fwd))), float(np.hypot(*v))


def angle_diff(a: float, b: float) -> float:
    d = abs(a - b) % 360
    return min(d, 360 - d)


class LinearModel:
    """Stand-in for a learned batched policy (named as such: no weights exist here). action =
    tanh(W state); ``calls`` records each batch's size; ``delay_s`` is a fixed cost per call (what a
    GPU forward pass costs whatever the batch), so batching has something to save."""

    name = "linear-test-model"
    W = np.array([[0.5, -0.25, 0.1], [0.2, 0.3, -0.4]])

    def __init__(self, seed: int = 0, delay_s: float = 0.0) -> None:
        self.delay_s = float(delay_s)
        self.calls: list[int] = []
        self._lock = threading.Lock()

    @classmethod
    def expected(cls, state: np.ndarray) -> np.ndarray:
        return np.tanh(cls.W @ np.asarray(state, dtype=np.float64))

    def metadata(self) -> dict[str, Any]:
        return {"agent": self.name, "model": "linear-3x2", "action_statistics": {"q01": [-1, -1], "q99": [1, 1]}}

    def infer_batch(self, observations: list[dict[str, Any]]) -> list[np.ndarray]:
        with self._lock:
            self.calls.append(len(observations))
        if self.delay_s:
            time.sleep(self.delay_s)
        return [self.expected(o["state"]) for o in observations]

    # the agent protocol, so make_agent accepts it (the server uses infer_batch)
    def reset(self, instruction, spec) -> None:
        pass

    def act(self, observation) -> np.ndarray:
        return self.infer_batch([observation.to_dict()])[0]

    def answer(self, question) -> str:
        return ""


def _start_listening(cmd: list[str], what: str, timeout: float) -> tuple[subprocess.Popen, str, list[str]]:
    """Start ``cmd`` (a server that prints "listening on ws://..." to stderr) and wait for that line:
    (process, url, the stderr lines so far, which keep growing)."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=cli_env(), cwd=ROOT)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "listening on ws://" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(timeout):
        proc.kill()
        proc.wait(10)
        raise RuntimeError(f"{what} did not start: {''.join(lines)[-3000:]}")
    return proc, re.search(r"listening on (ws://127\.0\.0\.1:\d+)", "".join(lines)).group(1), lines


@contextlib.contextmanager
def served_process(agent: dict, port: int = 0, timeout: float = 120.0):
    """A real server in its own process (``python -m tests.serving``) on 127.0.0.1:``port`` (0: any
    free one); yields ``(url, process)``. Kill the process to take the server away as a crash would;
    it is killed on exit in any case."""
    proc, url, _ = _start_listening(
        [sys.executable, "-m", "tests.serving", json.dumps(agent), str(port)], "the test server", timeout
    )
    try:
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _serve_forever(agent: dict, port: int) -> None:
    server = PolicyServer(make_batch_policy(agent), ServeConfig(port=port))
    server.run(lambda srv: print(f"listening on {srv.url}", file=sys.stderr, flush=True))


@contextlib.contextmanager
def served(agent: Any = "memory", expected_spec: EnvSpec | None = None, memory: dict | None = None, **cfg: Any):
    """A real server on 127.0.0.1 (any free port) in a background thread: ``agent`` is a config
    name, a config dict or a ready BatchPolicy."""
    if isinstance(agent, str):
        policy = make_batch_policy({"name": agent}, memory=memory)
    elif isinstance(agent, dict):
        policy = make_batch_policy(agent, memory=memory)
    else:
        policy = agent
    server = PolicyServer(policy, ServeConfig(**{"port": 0, **cfg}), expected_spec=expected_spec).start()
    try:
        yield server
    finally:
        server.stop()


class PickyAgent:
    """Refuses episodes whose instruction is "refuse" and returns a NaN action at step 2 (a policy
    bug): the server must answer each with an error and keep the session and everyone else going."""

    name = "picky"

    def __init__(self, seed: int = 0) -> None:
        self.dim = 2

    def reset(self, instruction, spec) -> None:
        if instruction == "refuse":
            raise RuntimeError("no such task")
        self.dim = spec.action.dim

    def act(self, observation) -> np.ndarray:
        if observation.step == 2:
            return np.full(self.dim, np.nan)
        return np.zeros(self.dim)

    def answer(self, question) -> str:
        return ""


class CliServer(str):
    """The ws:// url of a ``vla-serve`` process, with its ``pid``."""

    pid: int


@contextlib.contextmanager
def serve_cli(*args: str, timeout: float = 120.0):
    """``vla-serve`` (as ``python -m vla.serve.cli``) on a free port; yields its ws:// url (a
    :class:`CliServer`, ``.pid`` the process)."""
    cmd = [sys.executable, "-m", "vla.serve.cli", *args, "port=0", "log_level=warning"]
    proc, address, lines = _start_listening(cmd, "vla-serve", timeout)
    try:
        url = CliServer(address)
        url.pid = proc.pid
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, "".join(lines)[-3000:]


if __name__ == "__main__":  # python -m tests.serving '<agent config as JSON>' <port>
    _serve_forever(json.loads(sys.argv[1]), int(sys.argv[2]))
