"""What each stage of an experiment cost, read from what its commands already write: every training's
``train_log.jsonl`` and every rollout's ``episodes.jsonl`` under the experiment's root.

* a training: the steps its log holds and the hours they took, the sum over its log rows of the samples
  since the row before divided by the row's ``samples_per_s`` (the loop's own clock, validation and
  checkpoints included; the steps a killed run redid after its resume point are counted once, as
  :class:`vla.train.log.TrainLog` keeps them);
* a rollout: its episodes and the sum of their ``seconds`` -- one worker's wall time each, so with two
  workers the hours are worker-hours, about twice the wall time.

The hours are wall time on whatever else the machine ran at the time: compare them between stages of one
run, not as benchmarks (those are ``scripts/``' with docs/BENCHMARKS.md).
"""

from __future__ import annotations

from pathlib import Path

from vla.eval.store import read_episodes

from .tables import finished_lines


def train_cost(log: Path) -> dict:
    """Steps and hours of one training, from its ``train_log.jsonl``."""
    seconds, last = 0.0, 0
    steps = sorted((r for r in finished_lines(log) if r.get("samples_per_s")), key=lambda r: int(r["step"]))
    for r in steps:
        step = int(r["step"])
        samples = (step - last) * sum(r.get("rank_samples") or [0])
        seconds += samples / float(r["samples_per_s"])
        last = step
    return {"kind": "train", "steps": last, "hours": round(seconds / 3600, 3)}


def rollout_cost(episodes: Path) -> dict:
    """Episodes and worker-hours of one rollout, from its ``episodes.jsonl``."""
    rows = read_episodes(episodes)  # its finished episodes, as every reader of a rollout counts them
    seconds = sum(float(r.get("seconds") or 0.0) for r in rows)
    return {"kind": "rollout", "episodes": len(rows), "hours": round(seconds / 3600, 3)}


def stage_costs(root: Path) -> dict[str, dict]:
    """Every training and rollout under ``root`` by its path there (``train/current``,
    ``val/current/step_2000``, ``test/map_realistic``), with the total hours."""
    root = Path(root)
    found: dict[str, dict] = {}
    for log in root.rglob("train_log.jsonl"):
        found[log.parent.relative_to(root).as_posix()] = train_cost(log)
    for eps in root.rglob("episodes.jsonl"):
        found[eps.parent.relative_to(root).as_posix()] = rollout_cost(eps)
    stages = dict(sorted(found.items()))
    return {"stages": stages, "hours": round(sum(c["hours"] for c in stages.values()), 3)}
