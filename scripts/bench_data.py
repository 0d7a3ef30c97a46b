#!/usr/bin/env python
"""vla/data throughput: DemoSource samples/s and MemoryCache build frames/s, on demos recorded here.

1. Records ``--episodes`` scripted house episodes (the real DemoRecorder; ``--size`` px ego camera)
   into a temporary directory (or reuses ``--demos DIR``).
2. DemoSource reading, one process, random order over all samples: rgb only; full frames (rgb,
   depth, K, T_world_cam, instance); rgb + memory/* from a built cache.
3. MemoryCache.build: frames/s with the default inputs (top-down map at ``--map-size``, object
   table, text), with the object table only (no map rendered), and with ``--workers`` processes.

    MUJOCO_GL=egl .venv/bin/python scripts/bench_data.py --out runs/bench_data.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def record(root: Path, episodes: int, size: int, seed: int) -> None:
    from envs.registry import make_env
    from vla.agents import make_agent
    from vla.rollout.record import DemoRecorder, merge_demos
    from vla.rollout.runtime import run_episode

    cfg = {"name": "house", "seed": seed, "width": size, "height": size}
    env, agent = make_env(cfg, 0), make_agent({"name": "scripted"})
    try:
        for trial in range(episodes):
            key = {"env": "house", "suite": f"house/seed{seed}", "task_id": 0, "task": f"house_{seed}", "trial": trial}
            run_episode(env, agent, key, [DemoRecorder(root)], seed=7)
    finally:
        env.close()
    merge_demos(root, {0: f"house_{seed}"})


def read_rate(source, n: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(source), size=n)
    source.sample(int(idx[0]))  # open the files
    t0 = time.perf_counter()
    for i in idx:
        source.sample(int(i))
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--size", type=int, default=256, help="ego camera height = width (px)")
    ap.add_argument("--map-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=900001, help="house scene seed")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--demos", default=None, help="reuse recorded demos in this directory")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from vla.data import DemoSource, MemoryCache
    from vla.transforms.map_inputs import MemoryInputsConfig

    tmp = Path(tempfile.mkdtemp(prefix="bench_data_"))
    try:
        demos = Path(args.demos) if args.demos else tmp / "demos"
        if not args.demos:
            t0 = time.perf_counter()
            record(demos, args.episodes, args.size, args.seed)
            print(f"recorded {args.episodes} episodes in {time.perf_counter() - t0:.1f} s")
        out: dict = {"machine": platform.node(), "cpus": os.cpu_count(), "args": vars(args)}
        src = DemoSource(demos, "house_nav", cameras=("ego",))
        out["samples"], out["episodes"] = len(src), len(src.episodes())
        full = ("rgb", "depth", "K", "T_world_cam", "instance")
        out["read_rgb_samples_per_s"] = read_rate(src, args.reads)
        out["read_full_samples_per_s"] = read_rate(
            DemoSource(demos, "x", cameras=("ego",), camera_fields=full), args.reads
        )

        size = (args.map_size, args.map_size)
        warm = MemoryCache(tmp / "warm", MemoryInputsConfig(map_size=size))
        warm.build_episode(src.episode_refs()[0])  # numba compilation outside the timings
        builds = {}
        for name, config, workers in (
            ("topdown+objects+text", MemoryInputsConfig(map_size=size), 0),
            ("objects only (no map rendered)", MemoryInputsConfig(map_size=size, inputs=("objects",)), 0),
            (f"topdown+objects+text, {args.workers} workers", MemoryInputsConfig(map_size=size), args.workers),
        ):
            cache = MemoryCache(tmp / f"cache{len(builds)}", config)
            stats = cache.build(src, workers=workers, progress=False)
            builds[name] = {k: stats[k] for k in ("frames", "seconds", "frames_per_s")}
            print(f"memory cache, {name}: {stats['frames_per_s']:.1f} frames/s ({stats['frames']} frames)")
        out["memory_cache_build"] = builds
        mem_src = DemoSource(
            demos, "x", cameras=("ego",), memory=MemoryCache(tmp / "cache0", MemoryInputsConfig(map_size=size))
        )
        out["read_rgb_memory_samples_per_s"] = read_rate(mem_src, args.reads)
        for k in ("read_rgb_samples_per_s", "read_full_samples_per_s", "read_rgb_memory_samples_per_s"):
            print(f"{k}: {out[k]:.0f}")
        text = json.dumps(out, indent=2)
        print(text)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(text + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
