#!/usr/bin/env python
"""Videos of the failed episodes of a finished ``vla-rollout`` run, without rerunning the rest.

A full evaluation runs with rendering off (it is several times faster); this replays only the
episodes that failed, with the run's own env, agent, seed and perception settings (from its
``run.json``) and rendering on, and writes ``<suite>_taskNNN_trialNNN_failure.mp4`` per episode
(the same files as ``eval.videos=failures``). Episodes replay exactly (LIBERO trial k is put back on
the random stream where the run had it), so a replay that succeeds is reported as a mismatch.
Example::

    PYTHONPATH=$PWD .venv/bin/python scripts/failure_videos.py runs/expert/libero_10 --per-task 3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def failures(run: Path, per_task: int | None, tasks: list[int] | None) -> list[dict]:
    """The failed episode rows of ``run`` (first ``per_task`` trials of each task), task by task."""
    from vla.eval.store import read_episodes  # a killed run's torn last line is skipped

    rows = read_episodes(run / "episodes.jsonl")
    picked: dict[int, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (int(r["task_id"]), int(r["trial"]))):
        if r.get("success") or (tasks is not None and int(r["task_id"]) not in tasks):
            continue
        group = picked.setdefault(int(r["task_id"]), [])
        if per_task is None or len(group) < per_task:
            group.append(r)
    return [r for t in sorted(picked) for r in picked[t]]


def replay_runner(spec: dict, out: Path, env: dict | None = None):
    """The evaluator's own episode runner (env per task, seeding, errors) for a finished run's
    ``run.json`` ``spec``: its env (``env`` replacing it when given), agent, seed and perception."""
    from vla.eval.runner import EpisodeRunner, EvalSpec

    return EpisodeRunner(
        EvalSpec(
            env=env if env is not None else spec["env"],
            agent=spec["agent"],
            out=str(out),
            seed=int(spec.get("seed", 7)),
            perception=spec.get("perception"),
        )
    )


def mismatch_status(succeeded: list[str]) -> int:
    """1 with a warning when replayed failures succeeded (the run was not reproduced), else 0."""
    if succeeded:
        print(f"warning: these succeeded on replay (the run is not reproduced): {', '.join(succeeded)}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a vla-rollout output directory (run.json, episodes.jsonl)")
    ap.add_argument("--out", type=Path, help="where the videos go (default: RUN/failure_videos)")
    ap.add_argument("--per-task", type=int, default=None, help="at most this many failures per task")
    ap.add_argument("--tasks", type=int, nargs="*", help="only these task ids")
    ap.add_argument("--fps", type=int, default=20)
    ap.add_argument(
        "--rgb-only",
        action="store_true",
        help="render colour only, no depth or masks (for agents that do not read them: the scripted expert)",
    )
    args = ap.parse_args(argv)
    for name in ("run.json", "episodes.jsonl"):
        if not (args.run / name).exists():
            print(f"error: {args.run / name} does not exist (not a vla-rollout output directory?)", file=sys.stderr)
            return 2
    if args.per_task is not None and args.per_task < 1:
        print("error: --per-task must be >= 1", file=sys.stderr)
        return 2
    todo = failures(args.run, args.per_task, args.tasks)
    if not todo:
        print(f"{args.run}: no failed episodes to replay")
        return 0

    from tqdm import tqdm

    from vla.rollout.video import VideoWriter

    spec = json.loads((args.run / "run.json").read_text())
    env_cfg = {**spec["env"], "render": True}
    if args.rgb_only:
        env_cfg.update(depth=False, segmentation=False)
    out = args.out or args.run / "failure_videos"
    runner = replay_runner(spec, out, env_cfg)
    runner.subscribers = [VideoWriter(out, mode="failures", fps=args.fps)]  # only a video writer
    mismatches = []
    try:
        for row in tqdm(todo, desc=f"failure videos -> {out}", unit="ep"):
            if runner.run(int(row["task_id"]), int(row["trial"]), row["task"])["success"]:
                mismatches.append(f"task {row['task_id']} trial {row['trial']}")
    finally:
        runner.close()
    print(f"{len(todo) - len(mismatches)} failure videos in {out}")
    return mismatch_status(mismatches)


if __name__ == "__main__":
    sys.exit(main())
