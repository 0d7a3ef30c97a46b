#!/usr/bin/env python
"""Rollout throughput, measured as ratios within one run (machines here are shared and noisy).

1. Steps/s of libero's raw ``OffScreenRenderEnv`` vs our ``LiberoEnv`` with identical camera
   settings (2 cameras, depth, instance masks), and of the two without rendering. The same action
   sequence is replayed on both, in alternating blocks, so background load hits both alike.
   Our overhead = 1 - ours/raw.
2. Episodes/s of ``vla-rollout``'s evaluator with 1 vs 2 worker processes (random agent, no
   rendering, short episodes).

    .venv/bin/python scripts/bench_rollout.py --out runs/bench_rollout.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np


def _raw_env(suite: str, task_id: int, render: bool, res: int):
    from envs.libero import suites
    from envs.libero.assets import prepare_libero

    prepare_libero()
    from libero.libero.envs.env_wrapper import ControlEnv, OffScreenRenderEnv

    from envs.libero.env import LiberoEnv

    bddl = LiberoEnv(suite, task_id, render=False).bddl_file
    if render:
        from envs import _gl

        _gl.before_first_context()
        return OffScreenRenderEnv(
            bddl_file_name=bddl,
            camera_heights=res,
            camera_widths=res,
            camera_depths=True,
            camera_segmentations="instance",
        ), suites.benchmark(suite).get_task_init_states(task_id)
    return ControlEnv(bddl_file_name=bddl, has_offscreen_renderer=False, use_camera_obs=False), suites.benchmark(
        suite
    ).get_task_init_states(task_id)


def bench_steps(render: bool, steps: int, blocks: int, res: int, suite="libero_spatial", task_id=0) -> dict:
    from envs.libero.env import LiberoEnv

    raw, init = _raw_env(suite, task_id, render, res)
    ours = LiberoEnv(suite, task_id, resolution=res, render=render)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, size=(steps, 7)) * np.array([0.3, 0.3, 0.3, 0.1, 0.1, 0.1, 1.0])
    raw.reset()
    raw.set_init_state(init[0])
    ours.reset(options={"trial": 0})
    # time spent inside libero's step during our step: the rest is our wrapper's own work, a
    # ratio measured within the same calls and so immune to background load
    inner = {"t": 0.0}

    def timed(step):
        def wrapper(a):
            t0 = time.perf_counter()
            try:
                return step(a)
            finally:
                inner["t"] += time.perf_counter() - t0

        return wrapper

    t_raw = t_ours = 0.0
    for b in range(blocks):
        # alternate who goes first, and restart from the same state so both simulate the same motion
        raw.reset()
        raw.set_init_state(init[0])
        ours.reset(options={"trial": 0})
        ours._env.step = timed(type(ours._env).step.__get__(ours._env))
        order = [("raw", raw), ("ours", ours)] if b % 2 == 0 else [("ours", ours), ("raw", raw)]
        for name, env in order:
            t0 = time.perf_counter()
            for a in actions:
                env.step(a)
            dt = time.perf_counter() - t0
            if name == "raw":
                t_raw += dt
            else:
                t_ours += dt
        ours._env.step = type(ours._env).step.__get__(ours._env)
    raw.close()
    ours.close()
    n = steps * blocks
    return {
        "render": render,
        "resolution": res if render else None,
        "steps": n,
        "raw_steps_per_s": n / t_raw,
        "ours_steps_per_s": n / t_ours,
        "overhead_end_to_end": t_ours / t_raw - 1,  # noisy under background load
        "wrapper_ms_per_step": 1000 * (t_ours - inner["t"]) / n,
        "overhead_wrapper": (t_ours - inner["t"]) / inner["t"],  # our own work / libero's step, same calls
    }


def bench_workers(episodes: int, max_steps: int) -> dict:
    from vla.eval.evaluate import EvalSpec, evaluate

    out = {}
    env = {"name": "libero", "suite": "libero_spatial", "render": False, "hard_reset": True, "max_steps": max_steps}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            spec = EvalSpec(
                env=env, agent={"name": "random"}, out=d, tasks=[0], trials_per_task=episodes, workers=workers
            )
            t0 = time.perf_counter()
            evaluate(spec, progress=False)
            out[workers] = episodes / (time.perf_counter() - t0)
    return {
        "episodes": episodes,
        "max_steps": max_steps,
        "episodes_per_s_1_worker": out[1],
        "episodes_per_s_2_workers": out[2],
        "speedup": out[2] / out[1],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40, help="steps per block")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--resolution", type=int, default=256)
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--episode-steps", type=int, default=60)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_start": os.getloadavg()[0]},
        "render": bench_steps(True, args.steps, args.blocks, args.resolution),
        "no_render": bench_steps(False, args.steps * 5, args.blocks, args.resolution),
        "workers": bench_workers(args.episodes, args.episode_steps),
    }
    result["machine"]["load_avg_end"] = os.getloadavg()[0]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
