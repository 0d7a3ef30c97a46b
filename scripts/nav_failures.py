#!/usr/bin/env python
"""Why the memory navigator failed: replay the failed episodes of a finished ``vla-rollout`` run of
``agent=memory`` on the apartments and sort each failure into one of three kinds.

* ``never_found``: the navigator never had a target (no confirmed object of the category in its memory:
  the detector missed the object, or labelled it as something else, or the search never came near);
* ``other_object``: it drove to an object of the category but never came within ``--near`` metres of the
  env's target (a false positive, or another instance);
* ``near_not_reached``: it came within ``--near`` metres of the target but the success predicate (within
  1 m and in view) never held (a narrow approach, an approach cell on the wrong side).

The replay uses the run's own env, agent, seed and perception (``run.json``) through the evaluator's
episode runner, so it reproduces the run; the distance to the target is the env's ``target_distance_m``
(scene truth, read here for the diagnosis only -- the navigator never sees it). Rows go to
``RUN/nav_failures.jsonl`` and a count per kind to stdout. Example::

    .venv/bin/python scripts/nav_failures.py runs/nav_val20/base-harsh-seed0
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

KINDS = ("never_found", "other_object", "near_not_reached")


def classify(row: dict, near_m: float) -> str:
    """The kind of one failed episode's trace (``steps_with_target``, ``min_distance_m``)."""
    if row["steps_with_target"] == 0:
        return "never_found"
    return "near_not_reached" if row["min_distance_m"] <= near_m else "other_object"


def _tracer():
    from vla.rollout.runtime import Subscriber

    class Trace(Subscriber):
        """Per episode: the target's category, the closest the base came to it, and the steps the navigator had
        one (and which objects it drove to)."""

        def on_episode_start(self, episode) -> None:
            self.row = {"min_distance_m": float("inf"), "steps_with_target": 0, "first_target_step": None, "goals": {}}
            if not hasattr(episode.agent, "navigator"):
                raise ValueError("nav_failures replays agent=memory runs only (the agent has no navigator)")

        def on_step(self, episode, action, observation, reward, info) -> None:
            row, nav = self.row, episode.agent.navigator
            row["target"] = nav.target_category  # the category the instruction names
            d = info.get("target_distance_m")
            if d is not None:
                row["min_distance_m"] = min(row["min_distance_m"], float(d))
            if nav.target is not None:
                row["steps_with_target"] += 1
                row["goals"][nav.target.id] = row["goals"].get(nav.target.id, 0) + 1
                if row["first_target_step"] is None:
                    row["first_target_step"] = episode.step

    return Trace()


def main(argv: list[str] | None = None) -> int:
    from failure_videos import failures, mismatch_status, replay_runner

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a vla-rollout output directory of agent=memory on env=house")
    ap.add_argument("--tasks", type=int, nargs="*", help="only these task ids")
    ap.add_argument("--near", type=float, default=2.0, help="metres from the target that count as near it")
    args = ap.parse_args(argv)
    for name in ("run.json", "episodes.jsonl"):
        if not (args.run / name).exists():
            print(f"error: {args.run / name} does not exist (not a vla-rollout output directory?)", file=sys.stderr)
            return 2
    spec = json.loads((args.run / "run.json").read_text())
    agent = (spec.get("agent") or {}).get("name")
    if agent != "memory":
        print(f"error: {args.run} ran agent={agent!r}; this replays agent=memory", file=sys.stderr)
        return 2
    if args.near <= 0:
        print("error: --near must be > 0", file=sys.stderr)
        return 2
    todo = failures(args.run, None, args.tasks)
    if not todo:
        print(f"{args.run}: no failed episodes")
        return 0

    from tqdm import tqdm

    runner = replay_runner(spec, args.run)
    trace = _tracer()
    runner.subscribers = [trace]
    rows = []
    try:
        for r in tqdm(todo, desc=f"replaying failures of {args.run}", unit="ep"):
            res = runner.run(int(r["task_id"]), int(r["trial"]), r["task"])
            if res.get("subscriber_errors"):
                print(f"error: {res['subscriber_errors'][0]}", file=sys.stderr)
                return 2
            row = {"task_id": r["task_id"], "trial": r["trial"], "task": r["task"], "replay_success": res["success"]}
            row.update(trace.row)
            row["min_distance_m"] = round(row["min_distance_m"], 2)
            row["kind"] = classify(row, args.near)
            rows.append(row)
    finally:
        runner.close()
    out = args.run / "nav_failures.jsonl"
    out.write_text("".join(json.dumps(x) + "\n" for x in rows))
    counts = Counter(x["kind"] for x in rows)
    print(f"{len(rows)} failures of {args.run}: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in KINDS) + f" -> {out}")
    return mismatch_status([f"task {x['task_id']} trial {x['trial']}" for x in rows if x["replay_success"]])


if __name__ == "__main__":
    sys.exit(main())
