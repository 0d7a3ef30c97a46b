#!/usr/bin/env python
"""Benchmark of SpatialMemory.register_topdown on PARTIAL memories: how much of the apartment must the
memory have seen before its map registers to the apartment's top-down image (issue 28)?

    MUJOCO_GL=egl .venv/bin/python scripts/bench_partial_registration.py --out runs/partial.json --plot runs/partial.png
    MUJOCO_GL=egl .venv/bin/python scripts/bench_partial_registration.py --quick    # 1 apartment, gt, 2 fractions

Per apartment (VAL split only, seeds 800000...; the test split is not used here): the env's
exploration route from trial 0's start is rendered (every ``--stride``-th pose, as GST's material),
then for each perception profile (``--perception gt,realistic,harsh``) the frames go through the
profile's sensor model as GST's evaluator applies it (``vla/gst/sensors.py``: noisy depth,
detector-mode instance masks with frame-local ids, odometry drift accumulating over the video; one
stream keyed by the scene) and are fused, in order, into a memory with the profile's settings
(``memory_config_for``: proximity association and drift correction for realistic/harsh). When the
memory holds the first ``round(f * frames)`` frames, for each route fraction ``f`` of ``--fractions``,
it is registered to the apartment's ground-truth map at each level (easy, medium, hard). Recorded:

* ``error_m``: as ``bench_localize.registration_error_m``: mean distance between where the
  registration and the truth put the memory's occupied voxels (0.1 < z < 2.2 m), in metres of the
  true map; the truth maps memory xy through the episode's ``T_world_odom`` (the memory's frame is the
  odometry frame: the drifting odometry starts exact at the first frame). Success = ``error_m <= 0.15``.
* ``trajectory_error_m``: the same for the memory's recorded camera positions against the true ones
  (where the registration puts the robot on the map); ``success_trajectory`` = ``<= 0.15``. Under
  realistic/harsh the memory's frame itself drifts away from the odometry frame (the drift correction
  bounds the drift, it does not undo it), and ``error_m`` counts that drift (``memory_drift_m``: mean
  distance between the memory's camera positions and the true ones in the odometry frame) as
  registration error; the trajectory error compares each memory pose with the true pose of its frame.
* ``seen_fraction``: of the apartment's floor (the 0.1 m world cells whose centres lie inside a room
  polygon of the scene truth), the share whose centre, taken into the memory's frame by
  ``T_world_odom``, falls in a 0.1 m cell of the memory's ``occupancy2d`` (default bands) marked floor
  or obstacle: the floor area the memory's top-down free/occupied map covers.
* ``ok``, ``confidence``, ``score``, ``seconds`` of the registration.

Summaries: success rates and median errors (both metrics) per profile x level x route fraction, and per
profile x level x seen-fraction bin (``SEEN_BINS``). ``--plot``: success vs seen fraction, one line per
level (dashed: the trajectory metric), one panel per profile. ``--resummarise JSON`` recomputes the
summaries, tables and plot from a run's rows. Single process; numbers on shared machines are noisy.
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
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

from bench_localize import LEVELS, registration_error_m  # noqa: E402

FRACTIONS = (0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
PROFILE_NAMES = ("gt", "realistic", "harsh")
SEEN_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # seen-fraction bins [lo, hi); the last one includes 1.0
SUCCESS_M = 0.15
CELL_M = 0.1  # resolution of the seen-area grids
VAL_SEEDS = (800000, 801000)


# ------------------------------------------------------------------------------------- seen area
class _Lattice:
    """A cell lattice (x0, y0, resolution) as :meth:`SpatialMemory.occupancy2d` takes it."""

    def __init__(self, x0: float, y0: float, resolution: float) -> None:
        self.x0, self.y0, self.resolution = float(x0), float(y0), float(resolution)


def floor_cells(truth, cell: float = CELL_M):
    """World xy (Nx2) of the centres of the ``cell``-metre cells inside a room polygon: the apartment's floor."""
    import numpy as np
    from matplotlib.path import Path as MplPath

    x0, y0, x1, y1 = truth.bounds
    xs = np.arange(x0 + cell / 2, x1, cell)
    ys = np.arange(y0 + cell / 2, y1, cell)
    xy = np.stack(np.meshgrid(xs, ys), -1).reshape(-1, 2)
    inside = np.zeros(len(xy), dtype=bool)
    for room in truth.rooms:
        inside |= MplPath(np.asarray(room.polygon)[:, :2]).contains_points(xy)
    return xy[inside]


def seen_fraction(mem, floor_xy, T_world_odom, cell: float = CELL_M) -> float:
    """Share of the floor cells (world xy) whose centre lies in a memory cell marked floor or obstacle."""
    import numpy as np

    if len(floor_xy) == 0 or len(mem.voxels) == 0:
        return 0.0
    R, t = T_world_odom[:2, :2], T_world_odom[:2, 3]
    p = (floor_xy - t) @ R  # world -> odometry (memory) frame
    lo = p.min(axis=0) - cell
    shape = (int(np.ceil((p[:, 1].max() - lo[1]) / cell)) + 2, int(np.ceil((p[:, 0].max() - lo[0]) / cell)) + 2)
    lat = _Lattice(lo[0], lo[1], cell)
    occ = mem.occupancy2d(lat, shape)
    rows = np.floor((p[:, 1] - lo[1]) / cell).astype(np.int64)
    cols = np.floor((p[:, 0] - lo[0]) / cell).astype(np.int64)
    return float((occ.floor | occ.obstacle)[rows, cols].mean())


def memory_drift_m(mem, true_world_xy, T_world_odom) -> float:
    """Mean distance between the memory's camera positions and the true ones in the odometry frame: how far
    the memory's frame has drifted from the odometry frame that ``error_m`` takes as the truth."""
    import numpy as np

    T, _ = mem.trajectory()
    p = (true_world_xy[: len(T)] - T_world_odom[:2, 3]) @ T_world_odom[:2, :2]
    return float(np.mean(np.hypot(*(T[:, :2, 3] - p).T)))


def trajectory_error_m(reg, mem, true_world_xy, frame) -> float:
    """Mean distance (true map metres) between where the registration and the truth put the memory's cameras."""
    import numpy as np

    T, _ = mem.trajectory()
    xy = T[:, :2, 3]
    truth = frame.world_to_pixel(true_world_xy[: len(xy)])
    return float(np.mean(np.hypot(*(reg.odom_to_pixel(xy) - truth).T)) * frame.metres_per_pixel)


# ------------------------------------------------------------------------------------- summaries
def seen_bin(x: float, edges=SEEN_BINS) -> str:
    """The label ``"lo-hi"`` of the bin holding ``x`` ([lo, hi), the last bin closed)."""
    for lo, hi in zip(edges[:-1], edges[1:]):
        if lo <= x < hi or (hi == edges[-1] and x == hi):
            return f"{lo:.1f}-{hi:.1f}"
    raise ValueError(f"seen fraction {x} outside the bins {edges}")


def _cell(rows: list[dict]) -> dict:
    import numpy as np

    def med(k: str) -> float:
        return float(np.median([r[k] for r in rows]))

    good = np.array([r["success"] for r in rows])
    good_t = np.array([r["success_trajectory"] for r in rows])
    ok = np.array([r["ok"] for r in rows])
    return {
        "n": len(rows),
        "successes": int(good.sum()),
        "success_rate": float(good.mean()),
        "error_m_median": med("error_m"),
        "successes_trajectory": int(good_t.sum()),
        "success_rate_trajectory": float(good_t.mean()),
        "trajectory_error_m_median": med("trajectory_error_m"),
        "memory_drift_m_median": med("memory_drift_m"),
        "ok_rate": float(ok.mean()),
        "precision_when_ok": float(good_t[ok].mean()) if ok.any() else None,
        "seen_fraction_median": med("seen_fraction"),
        "seconds_median": med("seconds"),
    }


def summarise(rows: list[dict], by: str = "fraction") -> dict:
    """{profile: {level: {bucket: cell}}}: buckets are the route fractions (``by="fraction"``, keys as
    ``"0.35"``) or the seen-fraction bins (``by="seen"``), in increasing order."""
    if by not in ("fraction", "seen"):
        raise ValueError(f"summarise by 'fraction' or 'seen', got {by!r}")

    def key(r: dict) -> str:
        return f"{r['fraction']:g}" if by == "fraction" else seen_bin(r["seen_fraction"])

    out: dict = {}
    for prof in dict.fromkeys(r["profile"] for r in rows):
        out[prof] = {}
        for level in [lv for lv in LEVELS if any(r["level"] == lv for r in rows)]:
            cell_rows: dict[str, list] = {}
            for r in sorted(rows, key=lambda r: (r["fraction"], r["seen_fraction"])):
                if r["profile"] == prof and r["level"] == level:
                    cell_rows.setdefault(key(r), []).append(r)
            out[prof][level] = {k: _cell(v) for k, v in sorted(cell_rows.items(), key=lambda kv: float(kv[0][:3]))}
    return out


def table(summary: dict, label: str) -> str:
    """A markdown table of a summary: one row per profile x level, one column per bucket, cells
    ``successes/n · trajectory successes/n (median error · median trajectory error, cm)``."""
    buckets = sorted({b for p in summary.values() for lv in p.values() for b in lv}, key=lambda b: float(b[:3]))
    lines = [
        f"| profile | level | {' | '.join(f'{label} {b}' for b in buckets)} |",
        "|---|---|" + "---|" * len(buckets),
    ]
    for prof, levels in summary.items():
        for level, cells in levels.items():
            txt = [
                (
                    f"{c['successes']}/{c['n']} · {c['successes_trajectory']}/{c['n']} "
                    f"({100 * c['error_m_median']:.0f} · {100 * c['trajectory_error_m_median']:.0f} cm)"
                )
                if (c := cells.get(b))
                else "-"
                for b in buckets
            ]
            lines.append(f"| {prof} | {level} | {' | '.join(txt)} |")
    return "\n".join(lines)


def plot(summary_seen: dict, path: Path) -> None:
    """Success vs seen fraction (bin centres), one line per level, one panel per profile."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profs = list(summary_seen)
    fig, axes = plt.subplots(1, len(profs), figsize=(4.2 * len(profs), 3.4), sharey=True, squeeze=False)
    for ax, prof in zip(axes[0], profs):
        for level, cells in summary_seen[prof].items():
            xs = [(float(b.split("-")[0]) + float(b.split("-")[1])) / 2 for b in cells]
            (line,) = ax.plot(xs, [c["success_rate"] for c in cells.values()], marker="o", label=level)
            ax.plot(
                xs,
                [c["success_rate_trajectory"] for c in cells.values()],
                ls="--",
                marker=".",
                color=line.get_color(),
                label=f"{level} (trajectory)",
            )
            for x, c in zip(xs, cells.values()):
                ax.annotate(str(c["n"]), (x, c["success_rate"]), fontsize=6, xytext=(2, 2), textcoords="offset points")
        ax.set_title(f"perception={prof}")
        ax.set_xlabel("fraction of the floor seen")
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"registration success (error <= {SUCCESS_M} m)")
    axes[0][0].legend(title="map level (metric)", loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------- one apartment
def scene_rows(seed: int, profiles, fractions, stride: int = 2, env_overrides: dict | None = None, log=None):
    """The registration rows of one apartment, and its per-profile build times."""
    import numpy as np

    from envs.house.config import HouseConfig
    from envs.house.env import HouseEnv
    from envs.perception import categories
    from spatial_memory import SpatialMemory
    from spatial_memory.profiles import PROFILES, memory_config_for

    env = HouseEnv(HouseConfig(seed=seed, **(env_overrides or {})))
    try:
        env.reset(options={"trial": 0})
        t = time.perf_counter()
        frames = env.route_frames(env.exploration_route(), stride=stride)
        render_s = time.perf_counter() - t
        truth = env.scene_truth()
        maps = {level: env.topdown_map(level) for level in LEVELS}
        mframe = env.topdown_frame()
    finally:
        env.close()
    T_world_odom = truth.T_world_odom
    floor = floor_cells(truth)
    true_xy = np.array([(T_world_odom @ f.T_world_cam)[:2, 3] for f in frames])
    n = len(frames)
    stops = sorted({max(1, min(n, int(round(f * n)))): f for f in sorted(fractions)}.items())
    name = f"house/val/{seed}"
    rows, info = [], {"seed": seed, "frames": n, "floor_m2": len(floor) * CELL_M**2, "render_s": render_s}
    for prof in profiles:
        stream = PROFILES[prof].stream((name, "stream", "route"), categories("house"), scene=name)
        mem = SpatialMemory(config=memory_config_for(prof))
        build_s, done = 0.0, 0
        for k, frac in stops:
            t = time.perf_counter()
            for f in frames[done:k]:
                mem.integrate(stream(f))
            build_s += time.perf_counter() - t
            done = k
            seen = seen_fraction(mem, floor, T_world_odom)
            drift = memory_drift_m(mem, true_xy, T_world_odom)
            for level in LEVELS:
                reg = mem.register_topdown(maps[level], level)
                err = registration_error_m(reg, mem, T_world_odom, mframe)
                rows.append(
                    {
                        "scene": seed,
                        "profile": prof,
                        "level": level,
                        "fraction": frac,
                        "frames": k,
                        "seen_fraction": seen,
                        "error_m": err,
                        "success": bool(err <= SUCCESS_M),
                        "trajectory_error_m": (terr := trajectory_error_m(reg, mem, true_xy, mframe)),
                        "success_trajectory": bool(terr <= SUCCESS_M),
                        "memory_drift_m": drift,
                        "ok": bool(reg.ok),
                        "confidence": float(reg.confidence),
                        "score": float(reg.score),
                        "seconds": float(reg.seconds),
                    }
                )
            if log:
                last = rows[-len(LEVELS) :]
                log(
                    f"  {seed} {prof} f={frac:g} seen={seen:.2f}: "
                    + ", ".join(f"{r['level']} {r['error_m']:.2f} m" for r in last)
                )
        info[f"build_s_{prof}"] = build_s
    return rows, info


def parse_list(text: str, cast=str) -> list:
    return [cast(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str], list[float], list[int]]:
    """The options, profiles, fractions and seeds of a run, checked; argparse's usage error otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=VAL_SEEDS[0])
    ap.add_argument("--perception", default=",".join(PROFILE_NAMES), help="comma-separated profiles")
    ap.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS), help="route fractions")
    ap.add_argument("--stride", type=int, default=2, help="video = every stride-th route pose (GST's material)")
    ap.add_argument("--size", type=int, default=None, help="ego image width = height (default the env's 256)")
    ap.add_argument("--no-meshes", action="store_true", help="boxes/cylinders only (faster rendering)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 apartment, gt, fractions 0.35,1")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON (summary and rows) here")
    ap.add_argument("--plot", type=Path, default=None, help="write the success-vs-seen plot (PNG) here")
    ap.add_argument("--resummarise", type=Path, default=None, help="summaries and plot from this run's JSON rows")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.scenes, args.perception, args.fractions = 1, "gt", "0.35,1"
    profiles = parse_list(args.perception)
    try:
        fractions = sorted(parse_list(args.fractions, float))
    except ValueError:
        ap.error(f"--fractions: comma-separated numbers in (0, 1], got {args.fractions!r}")
    seeds = list(range(args.first_seed, args.first_seed + args.scenes))
    if not all(VAL_SEEDS[0] <= s < VAL_SEEDS[1] for s in seeds):
        ap.error(f"val apartments only: seeds in [{VAL_SEEDS[0]}, {VAL_SEEDS[1]})")
    if not fractions or not all(0 < f <= 1 for f in fractions):
        ap.error("fractions must lie in (0, 1]")
    unknown = set(profiles) - set(PROFILE_NAMES)
    if unknown or not profiles:
        ap.error(f"--perception: choose from {PROFILE_NAMES}")
    return args, profiles, fractions, seeds


def main(argv: list[str] | None = None) -> dict:
    args, profiles, fractions, seeds = parse_args(argv)
    env_overrides: dict = {}
    if args.size:
        env_overrides.update(width=args.size, height=args.size)
    if args.no_meshes:
        env_overrides["use_meshes"] = False

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    if args.resummarise:
        old = json.loads(args.resummarise.read_text())
        head = {k: old[k] for k in ("command", "seeds", "profiles", "fractions")}
        rows, scenes, wall_s = old["rows"], old["scenes"], old["wall_s"]
    else:
        rows, scenes = [], []
        for seed in seeds:
            t = time.perf_counter()
            r, info = scene_rows(seed, profiles, fractions, args.stride, env_overrides, log)
            rows += r
            info["wall_s"] = time.perf_counter() - t
            scenes.append(info)
            log(f"scene {seed}: {info['frames']} frames, {info['wall_s']:.0f} s")
        command = " ".join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv)))
        head = {"command": command, "seeds": seeds, "profiles": profiles, "fractions": fractions}
        wall_s = time.perf_counter() - t0
    result = report(rows, head, scenes, wall_s, args.out, args.plot)
    if not args.quiet:
        print(result["tables"]["by_fraction"] + "\n\n" + result["tables"]["by_seen"])
    return result


def report(rows: list[dict], head: dict, scenes: list, wall_s: float, out: Path | None, png: Path | None) -> dict:
    """The result (summaries, tables, rows) of a run, written to ``out`` (JSON) and ``png`` (the plot)."""
    by_fraction, by_seen = summarise(rows, "fraction"), summarise(rows, "seen")
    result = {
        **head,
        "success_m": SUCCESS_M,
        "seen_bins": list(SEEN_BINS),
        "summary_by_fraction": by_fraction,
        "summary_by_seen": by_seen,
        "tables": {"by_fraction": table(by_fraction, "route"), "by_seen": table(by_seen, "seen")},
        "scenes": scenes,
        "wall_s": wall_s,
        "rows": rows,
    }
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    if png:
        png.parent.mkdir(parents=True, exist_ok=True)
        plot(by_seen, png)
    return result


if __name__ == "__main__":
    main()
