"""``episodes.jsonl``: the append-only record of finished episodes, and the basis of resume.

One JSON line per finished episode, written by a single process with one ``write`` + ``fsync``.
A run killed at any moment leaves at most a torn last line, which :class:`EpisodeStore` drops
(and rewrites the file without) when it opens; every complete line is an episode that will never
run again. Keys are ``(task_id, trial)``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

REQUIRED = ("suite", "task_id", "task", "trial", "success", "steps", "seconds", "error")


def read_episodes(path: str | Path) -> list[dict[str, Any]]:
    """The finished episodes of an ``episodes.jsonl``, read only (for tools that look at a run,
    perhaps one still going): a torn or incomplete line is skipped, the file left as it is."""
    return _parse(Path(path))[0]


def _parse(path: Path, keep_repeats: bool = False) -> tuple[list[dict[str, Any]], list[str], int]:
    """(records, their lines, number of torn lines) of a file; a repeated key keeps its first (all of
    them with ``keep_repeats``)."""
    records, lines, torn, keys = [], [], 0, set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
                if not line.endswith("\n") or not all(k in rec for k in REQUIRED):
                    raise ValueError
            except ValueError:
                torn += 1
                continue
            key = (int(rec["task_id"]), int(rec["trial"]))
            if key in keys and not keep_repeats:
                continue  # cannot happen with one writer; tolerate a hand-edited file
            keys.add(key)
            records.append(rec)
            lines.append(line)
    return records, lines, torn


class EpisodeStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []
        self._keys: set[tuple[int, int]] = set()
        self._load()
        self._fh = open(self.path, "a", encoding="utf-8")

    def _load(self) -> None:
        if not self.path.exists():
            return
        self.records, good_lines, torn = _parse(self.path)
        self._keys = {(int(r["task_id"]), int(r["trial"])) for r in self.records}
        if torn:
            tmp = self.path.with_suffix(".jsonl.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(good_lines)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)

    def __contains__(self, key: tuple[int, int]) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def append(self, record: dict[str, Any]) -> None:
        key = (int(record["task_id"]), int(record["trial"]))
        if key in self._keys:
            raise ValueError(f"episode {key} is already recorded in {self.path}")
        self._fh.write(json.dumps(record, sort_keys=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._keys.add(key)
        self.records.append(record)

    def close(self) -> None:
        self._fh.close()


class InfraLog:
    """``infra_errors.jsonl``: one line per episode attempt that an infrastructure error ended (the
    policy server gone, an env that cannot be built, a worker lost twice). Such an episode is not in
    ``episodes.jsonl``: it counts for nothing and runs again on the next run of the same command;
    this file keeps the history, and :meth:`pending` says which of them still have no result."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []
        if self.path.exists():
            self.records = _parse(self.path, keep_repeats=True)[0]
        self._fh = None

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.records.append(record)

    def pending(self, selected: set[tuple[int, int]], store: "EpisodeStore") -> list[dict[str, Any]]:
        """The latest infrastructure error of every selected episode that has no result yet."""
        last: dict[tuple[int, int], dict[str, Any]] = {}
        for rec in self.records:
            key = (int(rec["task_id"]), int(rec["trial"]))
            if key in selected and key not in store:
                last[key] = rec
        return [last[k] for k in sorted(last)]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def infra_summary(pending: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's account of episodes that infrastructure errors left without a result."""
    shown = [{k: r.get(k) for k in ("task_id", "trial", "infra", "error")} for r in pending[:20]]  # all: the file
    return {"infra_errors": len(pending), **({"not_counted": shown} if pending else {})}


def summarize(records: list[dict[str, Any]], tasks: dict[int, str], header: dict[str, Any]) -> dict[str, Any]:
    """``summary.json``: overall and per-task success over the episodes with a result (errors of the env
    or the agent count as failures and are counted; infrastructure errors are not results: they are
    not in ``records``). Per task, ``failed_at`` counts the failures by the stage where they stopped,
    for an env that reports one (``failed_stage``)."""
    per_task: dict[str, dict[str, Any]] = {}
    for tid, name in sorted(tasks.items()):
        recs = [r for r in records if int(r["task_id"]) == tid]
        succ = sum(bool(r["success"]) for r in recs)
        per_task[str(tid)] = {
            "task": name,
            "episodes": len(recs),
            "successes": succ,
            "errors": sum(r["error"] is not None for r in recs),
            "success_rate": succ / len(recs) if recs else None,
        }
        failed = [r["failed_stage"] for r in recs if not r["success"] and r.get("failed_stage") is not None]
        if failed:  # LIBERO: the first goal stage the failures never reached (envs.libero.progress)
            per_task[str(tid)]["failed_at"] = {k: failed.count(k) for k in sorted(set(failed))}
    n = sum(v["episodes"] for v in per_task.values())
    succ = sum(v["successes"] for v in per_task.values())
    out = {
        **header,
        "episodes": n,
        "successes": succ,
        "errors": sum(v["errors"] for v in per_task.values()),
        "success_rate": succ / n if n else None,
        "per_task": per_task,
    }
    selected = [r for r in records if int(r["task_id"]) in tasks]
    for key in METRICS:  # means of the env's per-episode metrics, over the episodes that report them
        vals = [float(r[key]) for r in selected if isinstance(r.get(key), (bool, int, float))]
        if vals:
            out[key] = sum(vals) / len(vals)
    return out


METRICS = ("spl", "reached", "path_m", "geodesic_m")  # house: SPL, "passing by counts" success, path lengths
