#!/usr/bin/env python
"""How far the memory's camera poses are from the true ones, against the raw odometry's, along each val
apartment's exploration route under a perception profile (issue 51: is there drift left to re-localise?).

    MUJOCO_GL=egl .venv/bin/python analyses/drift_error.py --profile harsh --scenes 20 --out runs/i51/drift_harsh.json

Per apartment (val seeds 800000...): the exploration route from trial 0's start (every 2nd pose, as GST's
material) goes through the profile's sensor model (one stream, odometry drifting from an exact first
frame) into a memory with the profile's settings. Per frame, the horizontal distance and the heading
difference between (a) the odometry pose the memory was given and (b) the pose the memory recorded,
each against the frame's true pose. Printed: per apartment the mean / final errors of both, and over all
apartments the medians; ``--out`` keeps the per-frame curves. ``--set drift.KEY=VALUE`` (repeatable)
overrides the memory's drift settings (val only: nothing here reads test).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")


def pose_errors(T_est, T_true):
    """(metres, degrees) per pose: horizontal distance and absolute heading difference."""
    import numpy as np

    from spatial_memory.geometry import camera_yaw, wrap_deg

    d = np.hypot(*(T_est[:, :2, 3] - T_true[:, :2, 3]).T)
    dyaw = [abs(wrap_deg(np.degrees(camera_yaw(a) - camera_yaw(b)))) for a, b in zip(T_est, T_true)]
    return d, np.array(dyaw)


def memory_config(profile: str, overrides: dict):
    """The profile's memory settings with ``{"drift.KEY": value}`` overrides."""
    from spatial_memory.memory_config import MemoryConfig
    from spatial_memory.profiles import memory_config_for

    d = memory_config_for(profile).to_dict()
    for key, value in overrides.items():
        part, field = key.split(".", 1)
        d[part] = {**d[part], field: value}
    return MemoryConfig.from_dict(d)


def scene(seed: int, profile: str, overrides: dict, stride: int = 2) -> dict:
    import numpy as np

    from envs.house.env import exploration_frames
    from envs.perception import categories
    from spatial_memory import SpatialMemory
    from spatial_memory.profiles import PROFILES

    frames = exploration_frames(seed, stride)
    name = f"house/val/{seed}"
    stream = PROFILES[profile].stream((name, "stream", "route"), categories("house"), scene=name)
    mem = SpatialMemory(config=memory_config(profile, overrides))
    odom = []
    for f in frames:
        g = stream(f)
        odom.append(g.T_world_cam)
        mem.integrate(g)
    T_true = np.array([f.T_world_cam for f in frames])
    T_mem, _ = mem.trajectory()
    d_odom, y_odom = pose_errors(np.array(odom), T_true)
    d_mem, y_mem = pose_errors(T_mem, T_true)
    return {
        "seed": seed,
        "frames": len(frames),
        "odom_m": d_odom.tolist(),
        "odom_deg": y_odom.tolist(),
        "memory_m": d_mem.tolist(),
        "memory_deg": y_mem.tolist(),
    }


def main(argv=None) -> int:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="harsh", choices=("realistic", "harsh"))
    ap.add_argument("--scenes", type=int, default=20)
    ap.add_argument("--first", type=int, default=800000, help="first val seed (800000-800999)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. drift.cell=0.2")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if not (800000 <= a.first and a.first + a.scenes <= 801000):
        ap.error("val seeds only (800000-800999)")
    overrides = {}
    for s in a.set:
        key, _, value = s.partition("=")
        if not key.startswith("drift.") or not value:
            ap.error(f"--set {s!r}: expected drift.KEY=VALUE")
        overrides[key] = json.loads(value)
    rows = []
    print("seed   frames  odom mean/final (m, deg)      memory mean/final (m, deg)")
    for seed in range(a.first, a.first + a.scenes):
        r = scene(seed, a.profile, overrides)
        rows.append(r)
        o, m = np.array(r["odom_m"]), np.array(r["memory_m"])
        oy, my = np.array(r["odom_deg"]), np.array(r["memory_deg"])
        print(
            f"{seed} {r['frames']:6d}  {o.mean():.3f}/{o[-1]:.3f} m {oy.mean():5.2f}/{oy[-1]:5.2f} deg"
            f"   {m.mean():.3f}/{m[-1]:.3f} m {my.mean():5.2f}/{my[-1]:5.2f} deg",
            flush=True,
        )
    summary = {
        k: {
            "median_of_means": float(np.median([np.mean(r[k]) for r in rows])),
            "median_final": float(np.median([r[k][-1] for r in rows])),
            "max_final": float(np.max([r[k][-1] for r in rows])),
        }
        for k in ("odom_m", "odom_deg", "memory_m", "memory_deg")
    }
    print(json.dumps(summary, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"profile": a.profile, "overrides": overrides, "summary": summary, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
