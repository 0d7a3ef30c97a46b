#!/usr/bin/env python
"""Benchmark of SpatialMemory.localize and SpatialMemory.register_topdown on the embedded apartments.

    MUJOCO_GL=egl .venv/bin/python scripts/bench_localize.py                      # 10 test scenes, JSON on stdout
    MUJOCO_GL=egl .venv/bin/python scripts/bench_localize.py --scenes 3 --views 20
    MUJOCO_GL=egl .venv/bin/python scripts/bench_localize.py --association proximity   # detector mode

Per scene (test split seeds 900000...): the env's exploration route from trial 0's start is rendered
(every ``--stride``-th pose) and fused into a memory whose poses are in the episode's **odometry**
frame, as an agent records them. Then:

* **localize**: current views sampled as GST's generator does (``vla/gst/generate.py``): a random
  navigable cell ``--offset`` metres from every route pose, a random heading, kept when at least
  ``--min-overlap`` of its depth points (pixel stride 4) fall into 0.1 m voxels the video saw. The
  view goes to ``localize`` without its pose. Success = position error <= 0.2 m and heading error <=
  5 degrees (odometry frame). Reported: success over all views, how many come back ``ok`` and how
  many of those are right (precision), success on views showing at least one object (>= 0.5 % of the
  pixels), errors, seconds per view.
* **register** (per level): the env's ground-truth map (drawn on the world frame, scale and offset
  unknown to the memory) registered to the memory; error = mean distance between where the
  registration and the truth put the memory's occupied voxels (0.1 < z < 2.2 m), in metres of the
  true map. Success = error <= 0.15 m. Also with a memory of the first third of the video
  (``partial``: mid-episode), and a TDS-style 4-way choice: the scene's map among the maps of the
  next three scenes, chosen by registration score.

Single process; ``--core`` pins it (and BLAS) to one core. Numbers on shared machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

LEVELS = ("easy", "medium", "hard")


def voxel_keys(p, voxel: float = 0.1):
    import numpy as np

    q = np.floor(p / voxel).astype(np.int64) + (1 << 20)
    return (q[:, 0] << 42) | (q[:, 1] << 21) | q[:, 2]


def world_points(frame, T_world_cam, stride: int = 4):
    """Back-projected depth (every ``stride``-th pixel) in the world, as GST's overlap check does."""
    import numpy as np

    from spatial_memory.geometry import backproject, transform_points

    K = frame.K.copy()
    K[:2] /= stride
    p = backproject(frame.depth[::stride, ::stride], K).reshape(-1, 3)
    p = p[np.isfinite(p).all(axis=1) & (p[:, 2] > 0)]
    return transform_points(T_world_cam, p)


def scene_material(seed: int, stride: int, association: str):
    """(env, route poses, odometry frames, memory, partial memory, T_world_odom, maps, frame)."""
    from envs.house.config import HouseConfig
    from envs.house.env import HouseEnv
    from spatial_memory import SpatialMemory

    env = HouseEnv(HouseConfig(seed=seed))
    env.reset(options={"trial": 0})
    route = env.exploration_route()
    frames = env.route_frames(route, stride=stride)
    t = time.perf_counter()
    mem = SpatialMemory(0.05, association=association)
    partial = SpatialMemory(0.05, association=association)
    for k, f in enumerate(frames):
        mem.integrate(f)
        if k < len(frames) // 3:
            partial.integrate(f)
    build_s = time.perf_counter() - t
    truth = env.scene_truth()
    maps = {level: env.topdown_map(level) for level in LEVELS}
    return env, route.poses, frames, mem, partial, truth.T_world_odom, maps, env.topdown_frame(), build_s


def sample_views(env, route_poses, frames, T_world_odom, n: int, offset: tuple[float, float], min_overlap: float, rng):
    import numpy as np

    seen = np.unique(np.concatenate([voxel_keys(world_points(f, T_world_odom @ f.T_world_cam)) for f in frames]))
    grid = env.scene_truth().navigable
    free = np.argwhere(grid.free)
    views, attempts = [], 0
    while len(views) < n and attempts < 40 * n:
        attempts += 1
        xy = grid.cell_to_world(free[rng.integers(len(free))])
        d = float(np.min(np.hypot(*(route_poses[:, :2] - xy).T)))
        if not offset[0] <= d <= offset[1]:
            continue
        frame = env.render_pose(np.array([xy[0], xy[1], rng.uniform(-np.pi, np.pi)]))
        overlap = float(np.isin(voxel_keys(world_points(frame, T_world_odom @ frame.T_world_cam)), seen).mean())
        if overlap >= min_overlap:
            views.append((frame, d, overlap))
    return views


def strip_pose(frame, association: str, rng):
    """The view as a localisation query: identity pose; in detector mode, frame-local instance ids."""
    import numpy as np

    from spatial_memory import CameraFrame

    instance, labels = frame.instance, frame.labels
    if association == "proximity" and instance is not None:
        ids = sorted(labels)
        new = rng.permutation(len(ids)) + 1000
        lut = np.zeros(int(instance.max()) + 1, dtype=np.int32)
        for i, j in zip(ids, new):
            if i <= instance.max():
                lut[i] = j
        instance = lut[instance]
        labels = {int(j): labels[i] for i, j in zip(ids, new)}
    return CameraFrame(frame.rgb, frame.depth, frame.K, np.eye(4), instance, labels, frame.step)


def registration_error_m(reg, mem, T_world_odom, frame) -> float:
    import numpy as np

    occ = mem.voxels.centres()[mem.voxels.occupied()]
    xy = occ[(occ[:, 2] > 0.1) & (occ[:, 2] < 2.2)][::10, :2]
    truth = frame.world_to_pixel(xy @ T_world_odom[:2, :2].T + T_world_odom[:2, 3])
    return float(np.mean(np.hypot(*(reg.odom_to_pixel(xy) - truth).T)) * frame.metres_per_pixel)


def summarise(rows: list[dict]) -> dict:
    import numpy as np

    if not rows:
        return {}
    good = np.array([r["success"] for r in rows])
    ok = np.array([r["ok"] for r in rows])
    obj = np.array([r["objects_visible"] > 0 for r in rows])
    pos = np.array([r["position_error_m"] for r in rows])
    yaw = np.array([r["heading_error_deg"] for r in rows])
    sec = np.array([r["seconds"] for r in rows])
    return {
        "views": len(rows),
        "success_rate": float(good.mean()),
        "ok_rate": float(ok.mean()),
        "precision_when_ok": float(good[ok].mean()) if ok.any() else None,
        "success_when_ok_or_not": {
            "ok": float(good[ok].mean()) if ok.any() else None,
            "not_ok": float(good[~ok].mean()) if (~ok).any() else None,
        },
        "views_with_objects": float(obj.mean()),
        "success_rate_with_objects": float(good[obj].mean()) if obj.any() else None,
        "success_rate_without_objects": float(good[~obj].mean()) if (~obj).any() else None,
        "position_error_m_median": float(np.median(pos)),
        "position_error_m_p90_of_successes": float(np.percentile(pos[good], 90)) if good.any() else None,
        "heading_error_deg_median": float(np.median(yaw)),
        "seconds_median": float(np.median(sec)),
        "seconds_p90": float(np.percentile(sec, 90)),
        "seconds_max": float(sec.max()),
        "methods": {m: int(sum(r["method"] == m for r in rows)) for m in sorted({r["method"] for r in rows})},
    }


def summarise_reg(rows: list[dict]) -> dict:
    import numpy as np

    if not rows:
        return {}
    err = np.array([r["error_m"] for r in rows])
    ok = np.array([r["ok"] for r in rows])
    good = err <= 0.15
    return {
        "maps": len(rows),
        "success_rate_0.15m": float(good.mean()),
        "error_m_median": float(np.median(err)),
        "error_m_max": float(err.max()),
        "error_px_equivalent_median": float(np.median([r["error_px"] for r in rows])),
        "ok_rate": float(ok.mean()),
        "precision_when_ok": float(good[ok].mean()) if ok.any() else None,
        "seconds_median": float(np.median([r["seconds"] for r in rows])),
        "seconds_max": float(max(r["seconds"] for r in rows)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=900000)
    ap.add_argument("--views", type=int, default=30, help="current views per scene")
    ap.add_argument(
        "--stride", type=int, default=2, help="video = every stride-th route pose (as envs/house/material.py)"
    )
    ap.add_argument("--offset", type=float, nargs=2, default=(0.5, 2.5), help="distance of a view from the route (m)")
    ap.add_argument("--min-overlap", type=float, default=0.5)
    ap.add_argument("--association", choices=("instance", "proximity"), default="instance")
    ap.add_argument("--no-partial", action="store_true", help="skip the partial-memory registrations")
    ap.add_argument("--no-tds", action="store_true", help="skip the 4-way map choice")
    ap.add_argument("--core", type=int, default=None, help="pin to this core")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON (with per-view rows) here")
    args = ap.parse_args()
    if args.core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})
    os.environ["LP_NUM_THREADS"] = "1"

    import numpy as np

    from spatial_memory.geometry import camera_yaw, wrap_deg

    t_start = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.scenes))
    loc_rows, reg_rows, part_rows, tds_rows, scenes = (
        [],
        {lv: [] for lv in LEVELS},
        {lv: [] for lv in LEVELS},
        {lv: [] for lv in LEVELS},
        [],
    )
    all_maps: dict[int, dict] = {}
    mems: dict[int, tuple] = {}
    for seed in seeds:
        env, route_poses, frames, mem, partial, T_world_odom, maps, frame, build_s = scene_material(
            seed, args.stride, args.association
        )
        rng = np.random.default_rng(seed)
        try:
            views = sample_views(
                env, route_poses, frames, T_world_odom, args.views, tuple(args.offset), args.min_overlap, rng
            )
        finally:
            env.close()
        t = time.perf_counter()
        mem.localize(strip_pose(views[0][0], args.association, rng))  # builds the map index (once per memory state)
        index_s = time.perf_counter() - t
        for view, dist, overlap in views:
            loc = mem.localize(strip_pose(view, args.association, rng))
            e_pos = float(np.hypot(*(loc.T_world_cam[:2, 3] - view.T_world_cam[:2, 3])))
            e_yaw = abs(float(wrap_deg(np.degrees(camera_yaw(loc.T_world_cam) - camera_yaw(view.T_world_cam)))))
            ids, counts = np.unique(view.instance, return_counts=True)
            n_obj = int(((ids > 0) & (counts >= 0.005 * view.instance.size)).sum())
            loc_rows.append(
                {
                    "scene": seed,
                    "success": bool(e_pos <= 0.2 and e_yaw <= 5.0),
                    "ok": bool(loc.ok),
                    "confidence": loc.confidence,
                    "position_error_m": e_pos,
                    "heading_error_deg": e_yaw,
                    "method": loc.method,
                    "objects_visible": n_obj,
                    "objects_matched": loc.n_objects,
                    "seconds": loc.seconds,
                    "distance_to_route_m": dist,
                    "overlap": overlap,
                }
            )
        for level in LEVELS:
            for which, m, rows in (("full", mem, reg_rows), ("partial", partial, part_rows)):
                if which == "partial" and args.no_partial:
                    continue
                reg = m.register_topdown(maps[level], level)
                err = registration_error_m(reg, m, T_world_odom, frame)
                rows[level].append(
                    {
                        "scene": seed,
                        "error_m": err,
                        "error_px": err / frame.metres_per_pixel,
                        "ok": bool(reg.ok),
                        "confidence": reg.confidence,
                        "score": reg.score,
                        "seconds": reg.seconds,
                    }
                )
        all_maps[seed] = maps
        mems[seed] = (mem, build_s, index_s, len(frames), len(views))
        scenes.append(
            {
                "seed": seed,
                "video_frames": len(frames),
                "voxels": len(mem.voxels),
                "objects": len(mem.registry),
                "memory_build_s": build_s,
                "index_build_s": index_s,
                "views": len(views),
            }
        )
        print(
            f"scene {seed}: {len(views)} views, "
            f"{summarise([r for r in loc_rows if r['scene'] == seed])['success_rate']:.2f} localised; "
            + ", ".join(f"{lv} {reg_rows[lv][-1]['error_m']:.3f} m" for lv in LEVELS),
            file=sys.stderr,
            flush=True,
        )
    if not args.no_tds and len(seeds) >= 4:
        for k, seed in enumerate(seeds):
            mem = mems[seed][0]
            options = [seed] + [seeds[(k + j) % len(seeds)] for j in (1, 2, 3)]
            for level in LEVELS:
                scores = [mem.register_topdown(all_maps[o][level], level).score for o in options]
                tds_rows[level].append(int(np.argmax(scores)) == 0)
    result = {
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "association": args.association,
        "scenes": scenes,
        "localize": summarise(loc_rows),
        "register": {lv: summarise_reg(reg_rows[lv]) for lv in LEVELS},
        "register_partial_memory_first_third": {lv: summarise_reg(part_rows[lv]) for lv in LEVELS}
        if not args.no_partial
        else None,
        "tds_4way_accuracy": {lv: float(np.mean(tds_rows[lv])) for lv in LEVELS} if tds_rows["hard"] else None,
        "wall_s": time.perf_counter() - t_start,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        result["rows"] = {"localize": loc_rows, "register": reg_rows, "register_partial": part_rows}
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
