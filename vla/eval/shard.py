"""``eval.shard=k/n``: one of n deterministic parts of a run's plan, for schedulers without Ray.

The plan is the ordered list of ``(task_id, trial)`` episodes (task by task, trials in order).
Shard ``k`` of ``n`` (``0 <= k < n``) is the k-th of n **contiguous** blocks of it, their sizes
differing by at most one: every SLURM array task (``eval.shard=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT``)
writes its own out dir, resumes like any run, and ``vla-merge`` joins the dirs (:mod:`vla.eval.merge`).
Blocks rather than every n-th episode: a LIBERO env replays the resets of the trials it skips
(its fixtures' placement comes from a random stream every reset advances; about a second each),
so a shard of consecutive trials replays at most once, while every n-th trial would replay n - 1
resets per episode.

Every run writes ``plan.json`` beside ``episodes.jsonl``: the whole plan, the shard and its block,
the task names, the summary header and the side logs -- what ``vla-merge`` needs to check that the
union of the shards is exactly the plan and to write the combined files, without building an env.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def parse_shard(shard: str | None) -> tuple[int, int] | None:
    """``"k/n"`` -> ``(k, n)``; None -> None. A clear error for anything else."""
    if shard is None:
        return None
    text = str(shard).strip()
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError:
        raise ValueError(f"eval.shard must look like k/n (e.g. 0/4), got {shard!r}") from None
    if n < 1 or not 0 <= k < n:
        raise ValueError(f"eval.shard={shard}: need 0 <= k < n and n >= 1")
    return k, n


def shard_bounds(total: int, k: int, n: int) -> tuple[int, int]:
    """``[start, stop)`` of block ``k`` of ``n`` over ``total`` items (sizes differ by at most one)."""
    base, extra = divmod(total, n)
    start = k * base + min(k, extra)
    return start, start + base + (1 if k < extra else 0)


def select_shard(planned: list[tuple], shard: str | None) -> list[tuple]:
    parsed = parse_shard(shard)
    if parsed is None:
        return list(planned)
    start, stop = shard_bounds(len(planned), *parsed)
    return list(planned[start:stop])


def write_plan(out: Path, spec, planned: list[tuple], episodes: list[tuple], header: dict, logs: list) -> None:
    """``out/plan.json`` for this run; a dir belongs to one shard of one plan (else a clear error)."""
    path = Path(out) / "plan.json"
    record = {
        "plan": [[int(t), int(k)] for t, k, _ in planned],
        "tasks": {str(t): name for t, _, name in planned},
        "shard": spec.shard,
        "episodes": [[int(t), int(k)] for t, k, _ in episodes],
        "header": header,
        "side_logs": [
            {"file": log.path.name, "class": f"{type(log).__module__}:{type(log).__qualname__}"} for log in logs
        ],
        "record": spec.record,
    }
    if path.exists():
        try:
            before = json.loads(path.read_text())
        except ValueError:
            before = {}
        if before.get("shard") != spec.shard:
            held = before.get("shard") or "none (the whole plan)"
            raise ValueError(
                f"{out} holds shard {held} of a run, not eval.shard={spec.shard}; each shard needs its own out="
            )
        if spec.shard is not None and before.get("plan") != record["plan"]:
            raise ValueError(
                f"{out} holds a shard of another plan (eval.tasks / trials_per_task differ); choose another out="
            )
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)


def read_plan(out: Path) -> dict[str, Any]:
    path = Path(out) / "plan.json"
    if not path.exists():
        raise ValueError(f"{out} has no plan.json: not the out dir of a vla-rollout run (or one older than shards)")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc})") from exc
