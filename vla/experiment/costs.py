"""What each stage of an experiment cost, read from what its commands already write: every training's
``train_log.jsonl`` and every rollout's ``episodes.jsonl`` under the experiment's root.

* a training: the steps its log holds and the hours they took, the sum over its log rows of the samples
  since the row before divided by the row's ``samples_per_s`` (the loop's own clock, validation and
  checkpoints included; the steps a killed run redid after its resume point are counted once, as
  :class:`vla.train.log.TrainLog` keeps them);
* a rollout: its episodes and the sum of their ``seconds`` -- one worker's wall time each, so with two
  workers the hours are worker-hours, about twice the wall time.

Each stage also says how much of it there is (``of``: the training's ``train.steps`` from its latest checkpoint,
the rollout's planned episodes from its ``plan.json``) and, while unfinished, ``hours_left`` at its rate so
far: ``stage=table`` is the progress of a long run too. A rollout's rate mixes short successes and long
failures in the order its plan runs them, so its estimate is rough.

The hours are wall time on whatever else the machine ran at the time: compare them between stages of one
run, not as benchmarks (those are ``scripts/``' with docs/BENCHMARKS.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from vla.eval.store import read_episodes
from vla.train.checkpoint import RESUME_DIR, checkpoints

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
    return _progress(
        {"kind": "train", "steps": last, "hours": round(seconds / 3600, 3)},
        "steps",
        seconds,
        _planned_steps(log.parent / "checkpoints"),
    )


def rollout_cost(episodes: Path) -> dict:
    """Episodes and worker-hours of one rollout, from its ``episodes.jsonl``."""
    rows = read_episodes(episodes)  # its finished episodes, as every reader of a rollout counts them
    seconds = sum(float(r.get("seconds") or 0.0) for r in rows)
    return _progress(
        {"kind": "rollout", "episodes": len(rows), "hours": round(seconds / 3600, 3)},
        "episodes",
        seconds,
        _planned_episodes(episodes.parent / "plan.json"),
    )


def _progress(cost: dict, unit: str, seconds: float, planned: int | None) -> dict:
    """``cost`` with ``of`` (the stage's planned size, where its files say) and, while unfinished and
    begun, ``hours_left`` at the rate so far."""
    if planned is None:
        return cost
    cost["of"] = planned
    done = cost[unit]
    if 0 < done < planned:
        cost["hours_left"] = round(seconds / done * (planned - done) / 3600, 3)
    return cost


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or being rewritten: the stage's size is not known
        return {}


def _planned_steps(root: Path) -> int | None:
    """``train.steps`` of the latest checkpoint's ``train_config.json`` (the highest step, kept or resume
    point: the budget the run now aims at, which a resumed run may extend), None before the first."""
    found = sorted(checkpoints(root) + checkpoints(root / RESUME_DIR))
    steps = (_read(found[-1][1] / "train_config.json").get("train") or {}).get("steps") if found else None
    return int(steps) if steps else None


def _planned_episodes(plan_json: Path) -> int | None:
    block = _read(plan_json).get("episodes")  # this run's (or shard's) episodes, in the order they run
    return len(block) if isinstance(block, list) else None


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


def unfinished(costs: dict) -> list[str]:
    """One line per begun, unfinished stage of :func:`stage_costs`' answer: how far it is and the hours
    left at its rate so far."""
    lines = []
    for name, c in costs["stages"].items():
        if "hours_left" in c:
            unit = "steps" if c["kind"] == "train" else "episodes"
            lines.append(f"{name}: {c[unit]} of {c['of']} {unit}, {c['hours']} h so far, ~{c['hours_left']} h left")
    return lines
