"""Evaluate any openpi-protocol policy server on LIBERO, the way openpi's LIBERO example does.

A client only: it steps LIBERO's own ``OffScreenRenderEnv`` and asks the server for action chunks
through openpi's ``WebsocketClientPolicy`` (the ``openpi-client`` package). It works against
``vla-serve ... env=libero protocol=openpi`` (a checkpoint trained here) and against openpi's own
policy server alike (docs/SERVING.md):

    .venv/bin/python scripts/openpi_libero_eval.py --host 127.0.0.1 --port 8000 \
        --suite libero_spatial --task all --trials 50 --replan-steps 5 --out runs/openpi_eval/spatial

Per episode, as openpi's example: the task's official initial state (trial k: the k-th), ten
settling steps with the dummy action (zeros, gripper open), then every ``--replan-steps`` steps one
request with LIBERO's observation keys -- ``observation/image`` and ``observation/wrist_image``
(agentview and wrist, rotated 180 degrees, resized with padding to ``--resize`` square by
``openpi_client.image_tools``), ``observation/state`` (end-effector position, axis-angle, the two
gripper joints) and ``prompt`` -- playing the first ``--replan-steps`` actions of the returned
chunk (all of it when the chunk is shorter; openpi's example requires it to be at least as long),
until LIBERO reports success or the suite's step limit. One env per task, seeded once with
``--seed`` (openpi: 7). Unlike openpi's example, each episode gets its own connection: openpi's
protocol has no reset, and a server that keeps state per connection (a policy reading a spatial
memory) then starts every episode afresh.

Output in ``--out``: ``episodes.jsonl`` (one line per finished episode), ``summary.json`` (success
rate, per task) and ``config.json`` (the settings; a rerun with other settings is refused). A rerun
skips the episodes already written (the env's random stream is replayed through the skipped resets,
so every episode sees what it would in an uninterrupted run). Progress goes to stderr, the summary
to stdout. A server that cannot be reached, or that answers with an error, stops the run with that
reason (exit 2); what was finished stays.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from envs.libero.suites import MAX_STEPS, NOOP_ACTION  # noqa: E402

WAIT_STEPS = 10  # settling steps with the dummy action before the policy acts (openpi, OpenVLA)
SETTINGS = ("suite", "replan_steps", "resize", "resolution", "seed", "wait_steps")


class ServerError(RuntimeError):
    """The server could not be reached, or answered with an error."""


def quat2axisangle(quat: np.ndarray) -> np.ndarray:
    """An (x, y, z, w) quaternion as an axis-angle vector (robosuite's convention)."""
    w = float(np.clip(quat[3], -1.0, 1.0))
    den = math.sqrt(1.0 - w * w)
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return np.asarray(quat[:3], dtype=np.float64) * 2.0 * math.acos(w) / den


def libero_element(obs: dict[str, Any], prompt: str, resize: int) -> dict[str, Any]:
    """What openpi's LIBERO example sends for one LIBERO observation."""
    from openpi_client import image_tools

    def image(key: str) -> np.ndarray:
        img = np.ascontiguousarray(obs[key][::-1, ::-1])  # LIBERO renders upside down: rotate 180 degrees
        return image_tools.convert_to_uint8(image_tools.resize_with_pad(img, resize, resize))

    state = np.concatenate((obs["robot0_eef_pos"], quat2axisangle(obs["robot0_eef_quat"]), obs["robot0_gripper_qpos"]))
    return {
        "observation/image": image("agentview_image"),
        "observation/wrist_image": image("robot0_eye_in_hand_image"),
        "observation/state": state,
        "prompt": str(prompt),
    }


def make_libero_env(suite: str, task_id: int, resolution: int, seed: int):
    """``(env, task)``: LIBERO's own off-screen env for a task, seeded once (as openpi's example)."""
    from libero.libero import get_libero_path
    from libero.libero.envs import OffScreenRenderEnv

    from envs.libero.suites import benchmark

    task = benchmark(suite).get_task(task_id)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=resolution, camera_widths=resolution)
    env.seed(seed)
    return env, task


def run_episode(
    infer: Callable[[dict], dict],
    env,
    init_state: np.ndarray,
    prompt: str,
    max_steps: int,
    replan_steps: int = 5,
    resize: int = 224,
    wait_steps: int = WAIT_STEPS,
) -> dict[str, Any]:
    """One episode of openpi's LIBERO loop; ``infer`` is a client's ``infer`` (observation -> ``{"actions"}``).
    Returns ``success``, ``steps`` (policy steps taken) and ``infers`` (requests sent)."""
    env.reset()
    obs = env.set_init_state(init_state)
    plan: collections.deque = collections.deque()
    t, infers, success = 0, 0, False
    while t < max_steps + wait_steps:
        if t < wait_steps:
            obs, _, _, _ = env.step(list(NOOP_ACTION))
            t += 1
            continue
        if not plan:
            chunk = np.asarray(infer(libero_element(obs, prompt, resize))["actions"])
            infers += 1
            chunk = chunk.reshape(1, -1) if chunk.ndim == 1 else chunk
            if chunk.ndim != 2 or chunk.shape[1] != 7 or not len(chunk):
                raise ServerError(f"the server's 'actions' have shape {chunk.shape}; LIBERO needs a chunk [K, 7]")
            plan.extend(chunk[:replan_steps])
        obs, _, done, _ = env.step(plan.popleft().tolist())
        if done:
            success = True
            break
        t += 1
    return {"success": success, "steps": t + 1 - wait_steps if success else t - wait_steps, "infers": infers}


def connect(host: str, port: int | None, api_key: str | None = None):
    """openpi's ``WebsocketClientPolicy`` on a server, or :class:`ServerError` saying why not."""
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    where = host if host.startswith("ws") else f"ws://{host}" + (f":{port}" if port is not None else "")
    try:
        return WebsocketClientPolicy(host, port, api_key=api_key)
    except (OSError, TimeoutError) as e:
        raise ServerError(
            f"cannot reach an openpi-protocol server at {where} ({type(e).__name__}: {e}); start one first, e.g. "
            "`vla-serve policy_path=PATH env=libero protocol=openpi port=8000` (docs/SERVING.md)"
        ) from e
    except Exception as e:  # the handshake or the metadata failed: something else listens there
        raise ServerError(f"{where} did not answer as an openpi-protocol server does ({type(e).__name__}: {e})") from e


class Connection:
    """One episode's connection, opened at its first request: the env's reset and settling (long, on a
    loaded CPU, and holding the interpreter) come first, so the connection is never silent long
    enough for a server's keepalive to give up on it."""

    def __init__(self, host: str, port: int | None, api_key: str | None = None) -> None:
        self.host, self.port, self.api_key, self.client = host, port, api_key, None
        self.where = host if host.startswith("ws") else f"ws://{host}:{port}"

    def __call__(self, element: dict) -> dict:
        if self.client is None:
            self.client = connect(self.host, self.port, self.api_key)
        try:
            return self.client.infer(element)
        except Exception as e:  # openpi's client raises RuntimeError with the server's error text
            raise ServerError(f"the server at {self.where} failed a request ({type(e).__name__}: {e})") from e

    def close(self) -> None:
        if self.client is not None:
            self.client._ws.close()  # openpi's client has no close(); its connection is _ws
            self.client = None


def read_done(path: Path) -> list[dict]:
    """The episodes already written (a line cut short by a kill is dropped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def summarize(episodes: list[dict]) -> dict[str, Any]:
    tasks: dict[int, dict[str, Any]] = {}
    for e in episodes:
        t = tasks.setdefault(int(e["task_id"]), {"instruction": e["instruction"], "episodes": 0, "successes": 0})
        t["episodes"] += 1
        t["successes"] += int(bool(e["success"]))
    for t in tasks.values():
        t["success_rate"] = t["successes"] / t["episodes"]
    n, s = len(episodes), sum(int(bool(e["success"])) for e in episodes)
    return {
        "episodes": n,
        "successes": s,
        "success_rate": s / n if n else 0.0,
        "tasks": {str(k): tasks[k] for k in sorted(tasks)},
    }


def evaluate(
    host: str,
    port: int | None,
    suite: str,
    tasks: list[int],
    trials: int,
    out: str | Path,
    replan_steps: int = 5,
    resize: int = 224,
    resolution: int = 256,
    seed: int = 7,
    wait_steps: int = WAIT_STEPS,
    api_key: str | None = None,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """Run (or resume) the episodes ``tasks`` x ``range(trials)``; returns the summary over everything in ``out``."""
    from envs.libero.suites import benchmark, check_suite

    check_suite(suite)
    if replan_steps < 1 or resize < 1 or resolution < 1 or trials < 0:
        raise ValueError("--replan-steps, --resize and --resolution must be >= 1 and --trials >= 0")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"suite": suite, "replan_steps": replan_steps, "resize": resize, "resolution": resolution}
    settings.update({"seed": seed, "wait_steps": wait_steps})
    cfg_file = out / "config.json"
    if cfg_file.exists():
        old = json.loads(cfg_file.read_text())
        diff = {k: (old.get(k), settings[k]) for k in SETTINGS if old.get(k) != settings[k]}
        if diff:
            raise ValueError(f"{out} holds a run with other settings (was, now): {diff}; use another --out")
    where = host if host.startswith("ws") else f"ws://{host}:{port}"
    connect(host, port, api_key)._ws.close()  # fail early, before any env is built, when nobody serves there
    bench = benchmark(suite)
    for task_id in tasks:
        if not 0 <= task_id < bench.n_tasks:
            raise ValueError(f"--task {task_id}: {suite} has tasks 0..{bench.n_tasks - 1}")
        n_init = len(bench.get_task_init_states(task_id))
        if trials > n_init:
            raise ValueError(f"--trials {trials}: task {task_id} of {suite} has {n_init} official initial states")
    cfg_file.write_text(json.dumps(settings, indent=2) + "\n")
    log_file = out / "episodes.jsonl"
    done = {(e["task_id"], e["trial"]) for e in read_done(log_file) if e.get("suite") == suite}
    np.random.seed(seed)
    for task_id in tasks:
        todo = [k for k in range(trials) if (task_id, k) not in done]
        if not todo:
            continue
        env, task = make_libero_env(suite, task_id, resolution, seed)
        init_states = bench.get_task_init_states(task_id)
        try:
            for k in range(trials):
                if (task_id, k) in done:
                    env.reset()  # keep the env's random stream where an uninterrupted run would have it
                    continue
                t0 = time.time()
                conn = Connection(host, port, api_key)  # a fresh connection: a fresh server-side episode
                try:
                    r = run_episode(
                        conn, env, init_states[k], task.language, MAX_STEPS[suite], replan_steps, resize, wait_steps
                    )
                finally:
                    conn.close()
                line = {"suite": suite, "task_id": task_id, "trial": k, "instruction": str(task.language), **r}
                line["seconds"] = round(time.time() - t0, 1)
                with open(log_file, "a") as f:
                    f.write(json.dumps(line) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                log(
                    f"{suite} task {task_id} trial {k}: {'success' if r['success'] else 'failure'} "
                    f"after {r['steps']} steps, {r['infers']} requests, {line['seconds']} s"
                )
        finally:
            env.close()
    summary = {"suite": suite, "server": where, **summarize([e for e in read_done(log_file) if e["suite"] == suite])}
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, out / "summary.json")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="openpi_libero_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1", help="the server's host, or a full ws:// address")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--api-key", default=None, help="the server's token (sent as Authorization: Api-Key ...)")
    ap.add_argument("--suite", default="libero_spatial", help=f"one of {', '.join(MAX_STEPS)}")
    ap.add_argument("--task", default="all", help="task ids, comma-separated, or all (default)")
    ap.add_argument("--trials", type=int, default=50, help="episodes per task: its first N official initial states")
    ap.add_argument("--replan-steps", type=int, default=5, help="actions played of each chunk (openpi: 5)")
    ap.add_argument("--resize", type=int, default=224, help="side of the square images sent (openpi: 224)")
    ap.add_argument("--resolution", type=int, default=256, help="LIBERO's camera resolution (openpi: 256)")
    ap.add_argument("--seed", type=int, default=7, help="LIBERO env seed, once per task (openpi: 7)")
    ap.add_argument("--out", required=True, help="output directory (episodes.jsonl, summary.json); rerun to resume")
    args = ap.parse_args(argv)
    try:
        if args.task == "all":
            from envs.libero.suites import benchmark, check_suite

            tasks = list(range(benchmark(check_suite(args.suite)).n_tasks))
        else:
            try:
                tasks = [int(x) for x in args.task.split(",")]
            except ValueError:
                raise ValueError(f"--task must be task ids (e.g. 0 or 0,3) or all, got {args.task!r}") from None
        port = None if args.host.startswith("ws") else args.port
        summary = evaluate(
            args.host,
            port,
            args.suite,
            tasks,
            args.trials,
            args.out,
            replan_steps=args.replan_steps,
            resize=args.resize,
            resolution=args.resolution,
            seed=args.seed,
            api_key=args.api_key,
        )
    except (ServerError, ValueError) as e:
        print(f"openpi_libero_eval: {e}", file=sys.stderr)
        done = read_done(Path(args.out) / "episodes.jsonl")
        if isinstance(e, ServerError) and done:
            print(f"{len(done)} finished episodes are in {args.out}/episodes.jsonl; rerun to resume", file=sys.stderr)
        return 2
    print(json.dumps({k: summary[k] for k in ("suite", "episodes", "successes", "success_rate")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
