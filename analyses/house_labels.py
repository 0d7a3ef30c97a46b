#!/usr/bin/env python
"""What the apartment demonstrations' labels owe to what the memory arm reads: for a finished
``vla-train`` run on house demonstrations with memory inputs (``policy=house_memory``), every training
and val sample of its data, sorted by whether the memory's object table holds the instruction's
category (the table's lead row, ``memory/objects/*``) and, when it does, by that row's direction and
distance. Per group: the share of samples, how often the label drives forward, turns, turns towards
the row's side, and signals stop. A label that is a function of the row (turn towards it, stop when
it is near) can be learnt by reading the table; one that is not needs more than the table.

``--rows routes`` sorts by the route a route follower takes instead (the ``routes`` memory input,
docs/NAVIGATION.md): its labels should turn towards that route's side. In the tables, "in the table"
then means "a route". Example (the apartments experiment's memory arm, docs/experiments/house.md)::

    .venv/bin/python analyses/house_labels.py runs/proof/house3/train/memory/round0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BEARING_BINS = (0.0, 5.0, 15.0, 30.0, 90.0, 180.01)  # |direction| of the lead row, degrees
DISTANCE_BINS = (0.0, 1.0, 1.5, 3.0, float("inf"))  # its distance, metres
MOVE_EPS = 1e-3  # |forward_m| or |yaw_rad| below this is no motion


def lead_row(prompt: str, memory: dict) -> tuple[float, float] | None:
    """(direction_deg, distance_m) of the table's lead row when its category is named in ``prompt``
    (the transform puts the named categories first), else None."""
    from spatial_memory.queries import normalise_category

    cats = memory.get("objects/category")
    if cats is None or len(cats) == 0:
        return None
    if f" {normalise_category(cats[0])} " not in f" {normalise_category(prompt)} ":
        return None
    return float(memory["objects/direction_deg"][0]), float(memory["objects/distance_m"][0])


def lead_route(memory: dict) -> tuple[float, float] | None:
    """(direction_deg, length_m) of the route a route follower takes (``memory/routes/*``: the target's
    when there is one, it comes first; else the best frontier's), else None."""
    kinds = memory.get("routes/kind")
    if kinds is None or len(kinds) == 0:
        return None
    return float(memory["routes/direction_deg"][0]), float(memory["routes/length_m"][0])


def label_stats(rows: list[tuple[tuple[float, float] | None, np.ndarray]]) -> dict:
    """``rows``: (lead row or None, action ``[forward_m, left_m, yaw_rad, stop]``) per sample."""
    n = len(rows)
    if n == 0:
        raise ValueError("no samples")

    def motion(actions: np.ndarray) -> dict:
        if len(actions) == 0:
            return {"samples": 0}
        return {
            "samples": int(len(actions)),
            "forward": float(np.mean(actions[:, 0] > MOVE_EPS)),
            "turn_left": float(np.mean(actions[:, 2] > MOVE_EPS)),
            "turn_right": float(np.mean(actions[:, 2] < -MOVE_EPS)),
            "stop": float(np.mean(actions[:, 3] > 0.5)),
        }

    seen = [(r, a) for r, a in rows if r is not None]
    unseen = np.array([a for r, a in rows if r is None], dtype=np.float64).reshape(-1, 4)
    out = {
        "samples": n,
        "target_in_table": len(seen) / n,
        "not_in_table": motion(unseen),
        "by_bearing": [],
        "by_distance": [],
    }
    if seen:
        d = np.array([r[0] for r, _ in seen])
        m = np.array([r[1] for r, _ in seen])
        A = np.array([a for _, a in seen], dtype=np.float64)
        for lo, hi in zip(BEARING_BINS[:-1], BEARING_BINS[1:]):
            s = (np.abs(d) >= lo) & (np.abs(d) < hi)
            row = {"deg": [lo, min(hi, 180.0)], **motion(A[s])}
            if s.any():
                turning = s & (np.abs(A[:, 2]) > MOVE_EPS)
                # of the labels that turn, the share that turn to the row's side
                row["turn_towards"] = (
                    float(np.mean(np.sign(A[turning, 2]) == np.sign(d[turning]))) if turning.any() else None
                )
            out["by_bearing"].append(row)
        for lo, hi in zip(DISTANCE_BINS[:-1], DISTANCE_BINS[1:]):
            s = (m >= lo) & (m < hi)
            out["by_distance"].append({"m": [lo, hi if np.isfinite(hi) else None], **motion(A[s])})
    return out


def table(stats: dict, rows_of: str = "table") -> str:
    def pct(x) -> str:
        return "-" if x is None else f"{100 * x:.0f} %"

    row = "the instruction's category in the table" if rows_of == "table" else "a route (target or frontier)"
    lines = [
        f"{stats['samples']} samples; {row}: {pct(stats['target_in_table'])}",
        "",
        "| states | samples | forward | turn left | turn right | turns towards the row | stop |",
        "|---|---|---|---|---|---|---|",
    ]
    u = stats["not_in_table"]
    if u["samples"]:
        lines.append(
            f"| not in the table | {u['samples']} | {pct(u['forward'])} | {pct(u['turn_left'])} | "
            f"{pct(u['turn_right'])} | - | {pct(u['stop'])} |"
        )
    for r in stats["by_bearing"]:
        if r["samples"]:
            lines.append(
                f"| in the table, {r['deg'][0]:.0f}-{r['deg'][1]:.0f} deg | {r['samples']} | {pct(r['forward'])} | "
                f"{pct(r['turn_left'])} | {pct(r['turn_right'])} | {pct(r.get('turn_towards'))} | {pct(r['stop'])} |"
            )
    for r in stats["by_distance"]:
        if r["samples"]:
            where = f">= {r['m'][0]:g} m" if r["m"][1] is None else f"{r['m'][0]:g}-{r['m'][1]:g} m"
            lines.append(
                f"| in the table, {where} | {r['samples']} | {pct(r['forward'])} | {pct(r['turn_left'])} | "
                f"{pct(r['turn_right'])} | - | {pct(r['stop'])} |"
            )
    return "\n".join(lines)


def run_rows(run: Path, rows_of: str = "table") -> list[tuple[tuple[float, float] | None, np.ndarray]]:
    """Every sample (train and val split) of a training run's data with the row it is sorted by:
    ``table``, the object table's lead row when it is the target's; ``routes``, the route a route
    follower takes (the run's memory inputs must hold ``routes``)."""
    from vla.policy import ModelConfig, PolicyConfig
    from vla.train.config import DataConfig, TrainConfig
    from vla.train.data import build_sources

    cfg = json.loads((run / "run.json").read_text())
    mcfg, pcfg = ModelConfig.from_dict(cfg["model"]), PolicyConfig.from_dict(cfg["policy"])
    dcfg, tcfg = DataConfig.from_dict(cfg["data"]), TrainConfig.from_dict(cfg["train"])
    pcfg = pcfg.with_memory(dcfg.memory, mcfg.image_size)
    if not pcfg.inputs.uses_memory:
        raise SystemExit(f"{run}: the run's policy reads no memory inputs (train with policy=house_memory)")
    if rows_of == "routes" and "routes" not in pcfg.memory.inputs:
        raise SystemExit(f"{run}: the run's memory inputs hold no routes (e.g. vla-experiment house_routes)")
    train, val, _, _ = build_sources(
        dcfg, 1, pcfg.memory.to_dict(), run / "memory_cache", tcfg.seed, tuple(pcfg.inputs.cameras)
    )
    rows = []
    for src in [*train, *val]:
        for i in range(len(src)):
            s = src.sample(i)
            memory = {k[len("memory/") :]: v for k, v in s.obs.items() if k.startswith("memory/")}
            action = np.asarray(s.actions[0], dtype=np.float64)
            if action.shape != (4,):
                raise SystemExit(
                    f"{run}: expected house actions [forward_m, left_m, yaw_rad, stop], got {action.shape}"
                )
            row = lead_route(memory) if rows_of == "routes" else lead_row(str(s.obs.get("prompt", "")), memory)
            rows.append((row, action))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished vla-train run directory (its run.json) with memory inputs")
    ap.add_argument("--json", type=Path, help="also write the statistics here")
    ap.add_argument(
        "--rows",
        choices=("table", "routes"),
        default="table",
        help="sort by the object table's target row (default) or by the route a route follower takes",
    )
    a = ap.parse_args(argv)
    if not (a.run / "run.json").is_file():
        raise SystemExit(f"{a.run}: no run.json (a vla-train output directory)")
    stats = label_stats(run_rows(a.run, a.rows))
    if a.json:
        a.json.write_text(json.dumps(stats, indent=2))
    print(table(stats, a.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
