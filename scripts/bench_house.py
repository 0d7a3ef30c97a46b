#!/usr/bin/env python
"""Benchmark of the embedded apartments (envs/house): generation, rendering, expert success.

    MUJOCO_GL=egl .venv/bin/python scripts/bench_house.py                     # everything, JSON on stdout
    MUJOCO_GL=egl .venv/bin/python scripts/bench_house.py --only render --frames 200
    MUJOCO_GL=egl .venv/bin/python scripts/bench_house.py --only expert --scenes 10 --trials 5

* generation: seconds per scene to generate (layout, furniture, objects) and to build + compile
  the MuJoCo model, over ``--gen-scenes`` test scenes;
* render: full observation sets (RGB + metric depth + instance ids) per second at 256² and 512²,
  one process pinned to one core (llvmpipe with one thread), raw (``HouseScene.render_ego``) and
  through ``env.step`` (kinematics, rendering, CameraFrame, success test); then 2 worker processes
  pinned to 2 cores, aggregate sets per second;
* expert: the scripted expert's success rate, steps and path length over scenes x trials of the test split
  (``geodesic`` = distance on the 8-connected grid, an upper bound of the shortest path).

Numbers on shared machines are noisy; compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def _pin(core: int | None) -> None:
    """One core, and llvmpipe with one rendering thread (set before the GL context exists)."""
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    os.environ["LP_NUM_THREADS"] = "1"


def bench_generation(n: int) -> dict:
    import numpy as np

    from envs.house.config import HouseConfig, split_seeds
    from envs.house.generator import GenParams, generate_house
    from envs.house.mjcf import CameraSpec, compile_house
    from envs.house.topdown import scene_frame

    cfg = HouseConfig()
    params = GenParams.from_config(cfg)
    gen, comp, rooms, items, faces = [], [], [], [], []
    for seed in split_seeds("test", n):
        t = time.perf_counter()
        spec = generate_house(seed, params)
        t1 = time.perf_counter()
        ch = compile_house(spec, CameraSpec(), scene_frame(spec), cfg.use_meshes)
        t2 = time.perf_counter()
        gen.append(t1 - t)
        comp.append(t2 - t1)
        rooms.append(len(spec.rooms))
        items.append(len(spec.items))
        faces.append(int(ch.model.nmeshface))
    return {
        "scenes": n,
        "generate_s_median": float(np.median(gen)),
        "generate_s_max": float(np.max(gen)),
        "compile_s_median": float(np.median(comp)),
        "compile_s_max": float(np.max(comp)),
        "rooms_mean": float(np.mean(rooms)),
        "items_mean": float(np.mean(items)),
        "mesh_faces_mean": float(np.mean(faces)),
    }


def _render_worker(args: tuple) -> dict:
    core, size, frames, seed, use_meshes, through_env = args
    _pin(core)
    import numpy as np

    from envs.house.config import HouseConfig
    from envs.house.env import HouseEnv

    env = HouseEnv(HouseConfig(seed=seed, width=size, height=size, use_meshes=use_meshes))
    try:
        env.reset(options={"trial": 0})
        pose = env.agent_pose()
        rng = np.random.default_rng(0)
        free = np.argwhere(env.scene.main_component)
        poses = []
        for rc in free[rng.integers(len(free), size=frames)]:
            xy = env.scene.grid.cell_to_world(rc)
            poses.append(np.array([xy[0], xy[1], rng.uniform(-np.pi, np.pi)]))
        for p in poses[:5]:  # warm-up
            env.scene.render_ego(p)
        t = time.perf_counter()
        if through_env:
            a = np.array([0.0, 0.0, 0.2])
            for _ in range(frames):
                env.step(a)
        else:
            for p in poses:
                env.scene.render_ego(p)
        dt = time.perf_counter() - t
        del pose
        return {"sets": frames, "seconds": dt}
    finally:
        env.close()


def bench_render(frames: int, seed: int, use_meshes: bool) -> dict:
    ctx = mp.get_context("spawn")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0, 1]
    out = {"frames_per_run": frames, "scene_seed": seed, "use_meshes": use_meshes, "cores_available": len(cores)}
    for size in (256, 512):
        with ctx.Pool(1) as pool:
            raw = pool.map(_render_worker, [(cores[0], size, frames, seed, use_meshes, False)])[0]
        with ctx.Pool(1) as pool:
            env = pool.map(_render_worker, [(cores[0], size, frames, seed, use_meshes, True)])[0]
        out[f"{size}"] = {
            "one_core_sets_per_s": raw["sets"] / raw["seconds"],
            "one_core_env_steps_per_s": env["sets"] / env["seconds"],
        }
        if len(cores) >= 2:
            with ctx.Pool(2) as pool:
                t = time.perf_counter()
                res = pool.map(
                    _render_worker, [(cores[k], size, frames, seed + k, use_meshes, False) for k in range(2)]
                )
                wall = time.perf_counter() - t
            out[f"{size}"]["two_workers_sets_per_s"] = sum(r["sets"] / r["seconds"] for r in res)
            out[f"{size}"]["two_workers_wall_s"] = wall
    return out


def bench_expert(scenes: int, trials: int, max_steps: int | None) -> dict:
    import numpy as np

    from envs.house.config import HouseConfig, split_seeds
    from envs.house.env import HouseEnv

    rows = []
    t0 = time.perf_counter()
    for seed in split_seeds("test", scenes):
        cfg = HouseConfig(seed=seed) if max_steps is None else HouseConfig(seed=seed, max_steps=max_steps)
        env = HouseEnv(cfg)
        try:
            for trial in range(trials):
                obs, info = env.reset(options={"trial": trial})
                expert = env.expert()
                expert.reset()
                steps, bumps = 0, 0
                for steps in range(1, env.max_episode_steps + 1):
                    obs, _, term, trunc, info = env.step(expert.act(obs))
                    bumps += info["blocked"]
                    if term or trunc:
                        break
                path = float(np.sum(np.hypot(*np.diff(env.trajectory[:, :2], axis=0).T)))
                geo = env.episode.geodesic_m
                rows.append(
                    {
                        "scene": seed,
                        "trial": trial,
                        "target": env.episode.target_id,
                        "success": bool(info["success"]),
                        "steps": steps,
                        "bumps": bumps,
                        "geodesic_m": geo,
                        "path_m": path,
                    }
                )
        finally:
            env.close()
    wall = time.perf_counter() - t0
    succ = [r["success"] for r in rows]
    return {
        "episodes": len(rows),
        "success_rate": float(np.mean(succ)),
        "mean_steps": float(np.mean([r["steps"] for r in rows])),
        "mean_path_m": float(np.mean([r["path_m"] for r in rows])),
        "mean_grid_geodesic_m": float(np.mean([r["geodesic_m"] for r in rows])),
        "bumps": int(sum(r["bumps"] for r in rows)),
        "failures": [r for r in rows if not r["success"]],
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--only", choices=["generation", "render", "expert"], action="append", help="run only these parts (repeatable)"
    )
    ap.add_argument("--gen-scenes", type=int, default=20)
    ap.add_argument("--frames", type=int, default=300, help="observation sets per render measurement")
    ap.add_argument("--render-seed", type=int, default=900000)
    ap.add_argument("--no-meshes", action="store_true", help="render primitives only")
    ap.add_argument("--scenes", type=int, default=10, help="test-split scenes for the expert")
    ap.add_argument("--trials", type=int, default=5, help="trials per scene for the expert")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    parts = args.only or ["generation", "render", "expert"]
    result: dict = {"cpu_count": os.cpu_count()}
    if "generation" in parts:
        result["generation"] = bench_generation(args.gen_scenes)
    if "render" in parts:
        result["render"] = bench_render(args.frames, args.render_seed, not args.no_meshes)
    if "expert" in parts:
        result["expert"] = bench_expert(args.scenes, args.trials, args.max_steps)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
