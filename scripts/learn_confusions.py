#!/usr/bin/env python
"""Learn what a perception profile's detector confuses (:mod:`vla.navigation.confusion`) from
apartments' exploration routes, for the memory navigator's search (``agent.navigator.confusions=``).

    MUJOCO_GL=egl .venv/bin/python scripts/learn_confusions.py --profile harsh --split train --scenes 40 \
        --out runs/confusions/harsh.json

Per apartment of ``--split`` (train by default: the navigator is tuned on val and reported on test, so
neither teaches it): the env's exploration route from trial 0's start, every ``--stride``-th pose, goes
through the profile's sensors as an episode's would (one stream per perception seed, keyed by the
apartment, so instances the detector confuses persistently stay confused along the route); each
detected segment is matched to the true instance under it and every instance's majority label counted.
Rows per apartment and seed go to ``OUT.rows.jsonl`` as they finish (a killed run resumes where it
stopped); the model to ``--out``, with the categories most often found under another label printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def apartment_rows(seed: int, split: str, task_id: int, profile: str, pseeds: list[int], stride: int) -> list[dict]:
    """One row per perception seed: the apartment's instances and the label each ended up with."""
    from envs.house.env import exploration_frames
    from envs.perception import categories
    from spatial_memory.profiles import profile as make_profile
    from vla.navigation.confusion import stream_labels

    frames = exploration_frames(seed, stride)
    scene = (f"house/{split}", task_id)
    rows = []
    for s in pseeds:
        stream = make_profile(profile).with_seed(s).stream((*scene, "route"), categories("house"), scene=scene)
        labels = stream_labels((f, stream.perceive(f, odometry=False)) for f in frames)
        rows.append({"apartment": seed, "perception_seed": s, "frames": len(frames), "labels": labels})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="harsh", help="perception profile (realistic, harsh)")
    ap.add_argument("--split", default="train", choices=["train", "val", "test"])
    ap.add_argument("--scenes", type=int, default=40, help="the split's first N apartments")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="perception seeds per apartment")
    ap.add_argument("--stride", type=int, default=2, help="every Nth pose of the route")
    ap.add_argument("--out", type=Path, required=True, help="the model (JSON)")
    args = ap.parse_args(argv)
    if args.scenes < 1 or args.stride < 1:
        print("error: --scenes and --stride must be >= 1", file=sys.stderr)
        return 2
    from spatial_memory.profiles import profile as make_profile

    try:
        p = make_profile(args.profile)
    except (KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if p.detector is None:
        print(f"error: profile {args.profile!r} has no simulated detector: nothing is confused", file=sys.stderr)
        return 2
    from tqdm import tqdm

    from envs.house.config import split_seeds
    from vla.navigation.confusion import ConfusionModel

    rows_path = args.out.with_suffix(".rows.jsonl")
    done: dict[tuple[int, int], dict] = {}
    if rows_path.exists():
        for line in rows_path.read_text().splitlines():
            r = json.loads(line)
            done[(r["apartment"], r["perception_seed"])] = r
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    seeds = split_seeds(args.split, args.scenes)
    with open(rows_path, "a") as fh:
        for task_id, seed in enumerate(tqdm(seeds, desc=f"{args.profile} on {args.split}", unit="apartment")):
            todo = [s for s in args.seeds if (seed, s) not in done]
            if not todo:
                continue
            for r in apartment_rows(seed, args.split, task_id, args.profile, todo, args.stride):
                fh.write(json.dumps(r) + "\n")
                fh.flush()
                done[(seed, r["perception_seed"])] = r
    rows = [done[(seed, s)] for seed in seeds for s in args.seeds]
    source = {"profile": args.profile, "split": args.split, "apartments": seeds, "perception_seeds": args.seeds,
              "stride": args.stride}  # fmt: skip
    model = ConfusionModel.learn((r["labels"] for r in rows), source)
    model.save(args.out)
    print(f"{sum(len(r['labels']) for r in rows)} instances on {len(rows)} streams -> {args.out}")
    for cat in sorted(model.counts, key=lambda c: model.recall(c)):
        row = model.counts[cat]
        if model.recall(cat) < 1.0:
            others = ", ".join(f"{k or 'never detected'} {n}" for k, n in sorted(row.items(), key=lambda x: -x[1]))
            print(f"  {cat:24s} labelled itself {model.recall(cat):.0%}: {others}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
