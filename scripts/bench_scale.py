#!/usr/bin/env python
"""Scale-out benchmark: episodes/s with 1 and 2 workers on the local backend and on a local Ray
instance, the per-episode overhead Ray adds, and the driver's per-episode costs that bound a
100-node run (docs/SCALE.md).

(a) **Throughput.** The same episodes (house apartments, the random agent, ``--steps`` steps,
    ``--size`` px renders) run by the local backend (forked workers) and by the Ray backend (actors
    on a Ray instance started here with ``--cpus`` CPUs), each with 1 and 2 workers; the four
    configurations alternate ``--reps`` times so background load hits them alike. Per run: wall
    time (worker start and env construction included), steady-state episodes/s (after the first
    result of every worker), the mean episode time measured inside the worker, and, with one
    worker, the **per-episode overhead**: the gap between consecutive results minus the episode's
    own time (dispatch, transfer, bookkeeping). Ray's overhead is its gap minus the local gap.
(b) **Ray call latency.** Round trip of an empty actor method (``ray.get(a.where.remote())``).
(c) **Driver costs at scale.** The driver appends one fsync'd line per episode; it used to
    recompute the whole summary for every episode (O(tasks x episodes), now every 5 s); and the Ray
    backend calls ``ray.wait`` over every in-flight episode once per result. Measured here for
    libero_90's 4,500 episodes over 90 tasks and for 1,000 pending calls.
(d) **GST generation per scene** (``--gst-scenes``, 0 to skip): a worker's job (questions and their
    media encoded) against the driver's share (writing the files it is sent).

    nice -n 10 .venv/bin/python scripts/bench_scale.py --out runs/bench_scale.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_once(backend: str, workers: int, args, out: Path) -> dict[str, Any]:
    from vla.eval.backends import run_episodes
    from vla.eval.evaluate import EvalSpec, plan

    env = {
        "name": "house",
        "num_scenes": 2,
        "num_trials": args.episodes,
        "width": args.size,
        "height": args.size,
        "max_steps": args.steps,
    }
    spec = EvalSpec(
        env=env,
        agent={"name": "random"},
        out=str(out),
        trials_per_task=args.episodes // 2,
        workers=workers,
        backend=backend,
        ray={} if backend == "ray" else None,
    )
    _, todo = plan(spec)
    stamps: list[float] = []
    seconds: list[float] = []
    tasks: list[int] = []

    def on_result(rec: dict[str, Any]) -> None:
        if rec["error"] is not None:
            raise RuntimeError(rec["error"])
        stamps.append(time.perf_counter())
        seconds.append(float(rec["seconds"]))
        tasks.append(int(rec["task_id"]))

    t0 = time.perf_counter()
    run_episodes(spec, todo, on_result)
    wall = time.perf_counter() - t0
    n = len(stamps)
    w = min(workers, n)
    steady = (n - w) / (stamps[-1] - stamps[w - 1]) if n > w else None
    row = {
        "backend": backend,
        "workers": workers,
        "episodes": n,
        "wall_s": wall,
        "eps_per_s_steady": steady,
        "eps_per_s_wall": n / wall,
        "episode_s": statistics.mean(seconds[w:]) if n > w else statistics.mean(seconds),
        "first_result_s": stamps[0] - t0,
    }
    if workers == 1 and n > 1:  # consecutive episodes of one scene (a new scene also builds its env)
        same = [i for i in range(1, n) if tasks[i] == tasks[i - 1]]
        gaps = [stamps[i] - stamps[i - 1] for i in same]
        row["gap_s"] = statistics.mean(gaps)
        row["overhead_s"] = statistics.mean(stamps[i] - stamps[i - 1] - seconds[i] for i in same)
    return row


def part_a(args, tmp: Path) -> dict[str, Any]:
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level=logging.WARNING)
    init_s = time.perf_counter() - t0
    rows = []
    try:
        for rep in range(args.reps):
            for backend, workers in (("local", 1), ("ray", 1), ("local", 2), ("ray", 2)):
                row = run_once(backend, workers, args, tmp / f"{backend}{workers}_{rep}")
                row["rep"] = rep
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        b = part_b(ray)
    finally:
        ray.shutdown()

    def mean(backend, workers, key):
        vals = [r[key] for r in rows if r["backend"] == backend and r["workers"] == workers and r.get(key) is not None]
        return statistics.mean(vals) if vals else None

    table = {
        f"{b_}_{w}": {k: mean(b_, w, k) for k in ("eps_per_s_steady", "eps_per_s_wall", "episode_s", "wall_s")}
        for b_ in ("local", "ray")
        for w in (1, 2)
    }
    ep = mean("local", 1, "episode_s")
    over_local, over_ray = mean("local", 1, "overhead_s"), mean("ray", 1, "overhead_s")
    return {
        "ray_init_s": init_s,
        "runs": rows,
        "mean": table,
        "scaling_local_2v1": table["local_2"]["eps_per_s_steady"] / table["local_1"]["eps_per_s_steady"],
        "scaling_ray_2v1": table["ray_2"]["eps_per_s_steady"] / table["ray_1"]["eps_per_s_steady"],
        "ray_vs_local_1": table["ray_1"]["eps_per_s_steady"] / table["local_1"]["eps_per_s_steady"],
        "ray_vs_local_2": table["ray_2"]["eps_per_s_steady"] / table["local_2"]["eps_per_s_steady"],
        "overhead_local_s": over_local,
        "overhead_ray_s": over_ray,
        "ray_added_per_episode_s": over_ray - over_local,
        "ray_added_fraction_of_episode": (over_ray - over_local) / ep,
        "actor_call_ms": b,
    }


class _Echo:
    def where(self):
        return os.getpid()

    async def sleep(self, s: float):
        import asyncio

        await asyncio.sleep(s)


def part_b(ray) -> dict[str, float]:
    actor = ray.remote(_Echo).options(num_cpus=0).remote()
    ray.get(actor.where.remote())
    times = []
    for _ in range(300):
        t = time.perf_counter()
        ray.get(actor.where.remote())
        times.append(time.perf_counter() - t)
    times.sort()
    out = {"p50": 1e3 * times[len(times) // 2], "p90": 1e3 * times[int(0.9 * len(times))]}
    # ray.wait over 1,000 pending calls, as the driver's loop does once per finished episode
    sleeper = ray.remote(_Echo).options(num_cpus=0, max_concurrency=1000).remote()
    refs = [sleeper.sleep.remote(60.0) for _ in range(1000)]
    time.sleep(2.0)
    t = time.perf_counter()
    for _ in range(50):
        ray.wait(refs, num_returns=1, timeout=0)
    out["wait_1000_pending_ms"] = 1e3 * (time.perf_counter() - t) / 50
    ray.kill(sleeper)
    return out


def part_c(tmp: Path) -> dict[str, float]:
    from vla.eval.store import EpisodeStore, summarize

    tasks = {t: f"task{t}" for t in range(90)}
    recs = [
        {
            "suite": "libero_90",
            "task_id": t,
            "task": tasks[t],
            "trial": k,
            "success": (t + k) % 3 == 0,
            "steps": 400,
            "seconds": 40.0,
            "error": None,
        }
        for t in range(90)
        for k in range(50)
    ]
    t = time.perf_counter()
    for _ in range(5):
        summarize(recs, tasks, {"env": "libero"})
    summary_ms = 1e3 * (time.perf_counter() - t) / 5
    store = EpisodeStore(tmp / "episodes.jsonl")
    t = time.perf_counter()
    for r in recs[:500]:
        store.append(r)
    append_ms = 1e3 * (time.perf_counter() - t) / 500
    store.close()
    return {"summary_4500_episodes_ms": summary_ms, "append_fsync_ms": append_ms}


def part_d(scenes: int, tmp: Path) -> dict[str, float]:
    from envs.registry import list_tasks
    from vla.config import compose
    from vla.gst import cli

    cfg = compose("gst", ["split=test", f"scenes={scenes}"])
    env_cfg = {**cfg["env"], "split": "test", "seed": None, "num_scenes": scenes}
    gen_cfg = dict(cfg["gen"])
    stride = int(gen_cfg.pop("stride"))
    tasks = list_tasks(env_cfg)[:scenes]
    names = {t.task_id: f"house/test/{t.name.split('_')[-1]}" for t in tasks}
    maps = {names[t.task_id]: cli._scene_maps(env_cfg, t.task_id) for t in tasks}
    job, driver, nbytes = 0.0, 0.0, 0
    for t in tasks:
        t0 = time.perf_counter()
        rows, files, _ = cli._scene_questions(env_cfg, gen_cfg, "test", names[t.task_id], t.task_id, stride, maps)
        job += time.perf_counter() - t0
        t0 = time.perf_counter()
        for rel, data in files.items():
            (tmp / "gst" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / "gst" / rel).write_bytes(data)
            nbytes += len(data)
        driver += time.perf_counter() - t0
    return {"worker_job_s": job / scenes, "driver_write_ms": 1e3 * driver / scenes, "media_mb": nbytes / scenes / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=8, help="per run (half per scene)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--size", type=int, default=128, help="render size in px")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance")
    ap.add_argument("--gst-scenes", type=int, default=2, help="apartments for part (d); 0 skips it")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_before": load()},
        "args": vars(args),
    }
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result["throughput"] = part_a(args, tmp)
        result["driver"] = part_c(tmp)
        if args.gst_scenes:
            result["gst_per_scene"] = part_d(args.gst_scenes, tmp)
    result["machine"]["load_after"] = load()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
