"""The LIBERO kinds' result tables, from a rollout's ``episodes.jsonl``: success overall and per task
with Wilson intervals, and per task the stage where failures stopped (the first goal stage never
reached: :mod:`envs.libero.progress`)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials (95 % by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def finished_lines(path: Path) -> list[dict]:
    """The JSON rows of a JSONL file one process appends to (an episode log, a training log), read while
    it may still be written: a line not yet ended, or cut by a kill, is not a row yet."""
    rows = []
    for line in Path(path).read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def read_rows(out: Path) -> list[dict]:
    """A rollout's episode rows (none when it has not run; see :func:`finished_lines`)."""
    path = Path(out) / "episodes.jsonl"
    return finished_lines(path) if path.exists() else []


def success_table(rows: list[dict]) -> dict:
    """Success overall and per task (successes, Wilson interval, failures per stage), and the videos of the
    first success and the first failure when the run kept videos (``videos/<name>``, for the docs)."""
    per_task = {}
    for t in sorted({int(r["task_id"]) for r in rows}):
        got = [r for r in rows if int(r["task_id"]) == t]
        k = sum(bool(r["success"]) for r in got)
        failed: dict[str, int] = {}
        for r in got:
            if not r["success"]:
                stage = r.get("failed_stage") or ("error" if r.get("error") else "unknown")
                failed[stage] = failed.get(stage, 0) + 1
        per_task[str(t)] = {"episodes": len(got), "success": k, "wilson95": wilson(k, len(got)), "failed_at": failed}
    n, k = len(rows), sum(bool(r["success"]) for r in rows)
    out = {"episodes": n, "success": k / n if n else None, "wilson95": wilson(k, n), "tasks": per_task}
    videos = {}
    for kind, ok in (("success", True), ("failure", False)):
        first = next((r for r in rows if bool(r["success"]) == ok and r.get("video")), None)
        if first is not None:
            videos[kind] = f"videos/{first['video']}"
    return {**out, **({"videos": videos} if videos else {})}
