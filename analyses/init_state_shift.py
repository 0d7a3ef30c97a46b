"""Where a LIBERO task's objects start: the official init states against sampled ones (env.init_states).

A policy trained on demonstrations from sampled init states is tested on the official ones; this
shows whether the two place the objects alike. For each state it resets the task (no rendering,
the protocol's settling steps included) and reads every object's position and the hand's:

    .venv/bin/python analyses/init_state_shift.py --suite libero_object --task 0 \
        --official 50 --sampled 56 --out runs/init_shift/libero_object_0

``--arm-init-noise 0.02`` samples the arm's start as the official states' recording did (robosuite's
default; LIBERO's env sets none). It writes ``positions.json`` (per state), prints per object the mean
and spread of each set and the gap between the means in units of the sampled spread, and draws
``positions.png`` (xy scatter).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def positions(suite: str, task: int, init_states: str, trials: range, arm_init_noise: float = 0.0) -> list[dict]:
    """Per trial: ``{object id: [x, y, z]}`` after reset and settling, plus ``"hand"`` from the state."""
    from envs.registry import make_env

    cfg = {"name": "libero", "suite": suite, "render": False, "init_states": init_states}
    if arm_init_noise:
        cfg["arm_init_noise"] = arm_init_noise
    env = make_env(cfg, task)
    out = []
    try:
        for k in trials:
            obs, _ = env.reset(options={"trial": k})
            truth = env.scene_truth()
            row = {o.id: [float(v) for v in np.asarray(o.position)[:3]] for o in truth.objects}
            row["hand"] = [float(v) for v in np.asarray(obs.state)[:3]]
            out.append(row)
            print(f"{init_states} {k}", file=sys.stderr, flush=True)
    finally:
        env.close()
    return out


def summarise(official: list[dict], sampled: list[dict]) -> list[dict]:
    rows = []
    for name in sorted(set(official[0]) & set(sampled[0])):
        a = np.array([r[name] for r in official])[:, :2]
        b = np.array([r[name] for r in sampled])[:, :2]
        gap = np.abs(a.mean(0) - b.mean(0)) / np.maximum(b.std(0), 1e-4)  # per axis, in sampled spreads
        rows.append(
            {
                "object": name,
                "official_mean_xy": a.mean(0).round(4).tolist(),
                "official_std_xy": a.std(0).round(4).tolist(),
                "sampled_mean_xy": b.mean(0).round(4).tolist(),
                "sampled_std_xy": b.std(0).round(4).tolist(),
                "gap_in_sampled_std": float(gap.max()),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--official", type=int, default=50, help="official init states 0..N-1")
    ap.add_argument("--sampled", type=int, default=56, help="sampled init states first..first+N-1")
    ap.add_argument("--sampled-first", type=int, default=0)
    ap.add_argument("--arm-init-noise", type=float, default=0.0, help="env.arm_init_noise of the sampled states")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    cache = a.out / "positions.json"
    data = json.loads(cache.read_text()) if cache.exists() else {}
    if len(data.get("official", [])) != a.official:
        data["official"] = positions(a.suite, a.task, "official", range(a.official))
        cache.write_text(json.dumps(data))
    if len(data.get("sampled", [])) != a.sampled or data.get("arm_init_noise", 0.0) != a.arm_init_noise:
        trials = range(a.sampled_first, a.sampled_first + a.sampled)
        data["sampled"] = positions(a.suite, a.task, "sampled", trials, a.arm_init_noise)
        data["arm_init_noise"] = a.arm_init_noise
        cache.write_text(json.dumps(data))
    rows = summarise(data["official"], data["sampled"])
    (a.out / "summary.json").write_text(json.dumps(rows, indent=2))
    print("| object | official mean xy (std) | sampled mean xy (std) | gap / sampled std |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['object']} | {r['official_mean_xy']} ({r['official_std_xy']}) | {r['sampled_mean_xy']} "
            f"({r['sampled_std_xy']}) | {r['gap_in_sampled_std']:.1f} |"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 7))
    names = sorted(set(data["official"][0]) & set(data["sampled"][0]))
    for i, name in enumerate(names):
        c = plt.cm.tab20(i % 20)
        a_xy = np.array([r[name] for r in data["official"]])[:, :2]
        b_xy = np.array([r[name] for r in data["sampled"]])[:, :2]
        ax.scatter(b_xy[:, 0], b_xy[:, 1], s=12, color=c, marker="o", alpha=0.5)
        ax.scatter(a_xy[:, 0], a_xy[:, 1], s=18, color=c, marker="x", label=name)
    ax.set_title(f"{a.suite} task {a.task}: official (x) vs sampled (o) start positions")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.axis("equal")
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(a.out / "positions.png", dpi=90)
    print(a.out / "positions.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
