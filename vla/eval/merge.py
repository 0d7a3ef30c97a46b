"""``vla-merge``: join the out dirs of a sharded run (``eval.shard=k/n``) into one, exactly.

Checks, before writing anything: every dir is a run of the same configuration (``run.json``) and
the same plan (``plan.json``), and every planned ``(task_id, trial)`` episode is recorded exactly
once over all dirs -- not missing, not in two dirs, not twice in one file. Any violation is one
error that lists the missing and the duplicated pairs (and which shards were not given). Then it
writes ``out/episodes.jsonl`` in plan order, the side logs (``gst.jsonl``, ...) with the rows of
each episode's own dir, ``summary.json`` (computed as a single run computes it), ``run.json``,
``plan.json``, the videos (hard links where possible) and, with ``record=DIR`` or a record dir the
shards share, the per-task demonstration files.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from vla_common.atomic import write_json_atomic
from .shard import parse_shard, read_plan
from .store import REQUIRED, infra_summary, summarize

SHOWN = 20  # pairs listed in an error


class MergeError(ValueError):
    def __init__(self, message: str, missing: list[tuple[int, int]], duplicated: dict[tuple[int, int], list[str]]):
        super().__init__(message)
        self.missing, self.duplicated = missing, duplicated


def expand(patterns: list[str] | str) -> list[Path]:
    """Shard dirs from paths and glob patterns, in order, each once."""
    if isinstance(patterns, str):
        patterns = [patterns]
    dirs: list[Path] = []
    for p in patterns:
        p = str(p)
        hits = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
        if not hits:
            raise ValueError(f"shards: {p!r} matches no directory")
        for h in hits:
            path = Path(h)
            if path.resolve() not in {d.resolve() for d in dirs}:
                dirs.append(path)
    return dirs


def _episode_lines(path: Path) -> list[dict[str, Any]]:
    """Complete episode records of a file, duplicates kept (a torn last line of a killed run is not one)."""
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if line.endswith("\n") and all(k in rec for k in REQUIRED):
                rows.append(rec)
    return rows


def _side_rows(path: Path) -> dict[tuple[int, int], list[str]]:
    by: dict[tuple[int, int], list[str]] = {}
    if not path.exists():
        return by
    for line in path.read_text().splitlines(keepends=True):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if line.endswith("\n"):
            by.setdefault((int(row["task_id"]), int(row["trial"])), []).append(line)
    return by


def _pairs(keys) -> str:
    keys = list(keys)
    shown = ", ".join(f"({t}, {k})" for t, k in keys[:SHOWN])
    return shown + (f", ... {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


def _check_same_run(dirs: list[Path], plans: list[dict]) -> dict[str, Any]:
    idents = []
    for d in dirs:
        f = d / "run.json"
        if not f.exists():
            raise ValueError(f"{d} has no run.json: not the out dir of a vla-rollout run")
        idents.append(json.loads(f.read_text()))
    for d, ident, p in zip(dirs[1:], idents[1:], plans[1:]):
        if ident != idents[0]:
            keys = sorted(k for k in set(ident) | set(idents[0]) if ident.get(k) != idents[0].get(k))
            raise ValueError(
                f"{d} is a run of another configuration than {dirs[0]} (run.json: {', '.join(keys)} differ)"
            )
        if p["plan"] != plans[0]["plan"]:
            raise ValueError(f"{d} has another plan than {dirs[0]} (eval.tasks or eval.trials_per_task differ)")
    return idents[0]


def _shard_notes(dirs: list[Path], plans: list[dict]) -> list[str]:
    notes, seen = [], {}
    parsed = [parse_shard(p.get("shard")) for p in plans]
    for d, s in zip(dirs, parsed):
        if s is not None:
            seen.setdefault(s, []).append(str(d))
    ns = {n for _, n in seen}
    if len(ns) == 1:
        (n,) = ns
        absent = [f"{k}/{n}" for k in range(n) if (k, n) not in seen]
        if absent:
            notes.append(f"shards not given: {', '.join(absent)}")
    for (k, n), ds in sorted(seen.items()):
        if len(ds) > 1:
            notes.append(f"shard {k}/{n} given {len(ds)} times ({', '.join(ds)})")
    return notes


def merge(shards: list[str] | str, out: str | Path, record: str | None = None) -> dict[str, Any]:
    dirs = expand(shards)
    if not dirs:
        raise ValueError("vla-merge needs shards=[DIR, ...] (the out dirs of the shards)")
    out = Path(out)
    if out.resolve() in {d.resolve() for d in dirs}:
        raise ValueError(f"out={out} is one of the shards; merge into a new directory")
    plans = [read_plan(d) for d in dirs]
    identity = _check_same_run(dirs, plans)
    planned = [(int(t), int(k)) for t, k in plans[0]["plan"]]
    wanted = set(planned)

    where: dict[tuple[int, int], list[tuple[Path, dict[str, Any]]]] = {}
    ignored = 0
    for d in dirs:
        for rec in _episode_lines(d / "episodes.jsonl"):
            key = (int(rec["task_id"]), int(rec["trial"]))
            if key in wanted:
                where.setdefault(key, []).append((d, rec))
            else:
                ignored += 1  # an episode of an earlier, larger plan in the same dir: not part of this one
    missing = [k for k in planned if not where.get(k)]
    duplicated = {k: [str(d) for d, _ in v] for k, v in where.items() if len(v) > 1}
    if missing or duplicated:
        parts = []
        if missing:
            parts.append(f"{len(missing)} planned episode(s) missing (task, trial): {_pairs(missing)}")
        if duplicated:
            dup = sorted(duplicated)
            first = dup[0]
            parts.append(
                f"{len(dup)} episode(s) recorded more than once: {_pairs(dup)} "
                f"(e.g. {first} in {', '.join(duplicated[first])})"
            )
        parts += _shard_notes(dirs, plans)
        raise MergeError("; ".join(parts), missing, duplicated)

    out.mkdir(parents=True, exist_ok=True)
    records = [where[k][0][1] for k in planned]
    owner = {k: where[k][0][0] for k in planned}
    _write_lines(out / "episodes.jsonl", [json.dumps(r) + "\n" for r in records])
    write_json_atomic(out / "run.json", identity)
    tasks = {int(t): name for t, name in plans[0]["tasks"].items()}
    header = dict(plans[0]["header"])
    # every planned episode has a result (else MergeError above): no infrastructure error is pending
    summary = {**summarize(records, tasks, header), **infra_summary([]), "complete": True, "planned": len(planned)}
    for decl in plans[0].get("side_logs", []):
        summary.update(_merge_side_log(decl, dirs, owner, planned, out))
    summary["merged_from"] = [str(d) for d in dirs]
    _link_videos(dirs, out)
    demos = _merge_demos(plans, dirs, records, owner, tasks, record)
    if demos is not None:
        summary["demos"] = demos
    merged_plan = {**plans[0], "shard": None, "episodes": plans[0]["plan"], "merged_from": [str(d) for d in dirs]}
    _write_lines(out / "plan.json", [json.dumps(merged_plan) + "\n"])
    write_json_atomic(out / "summary.json", summary)
    if ignored:
        summary["ignored"] = ignored
    return summary


def _write_lines(path: Path, lines: list[str]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _merge_side_log(decl: dict, dirs: list[Path], owner: dict, planned: list, out: Path) -> dict[str, Any]:
    rows = {d: _side_rows(d / decl["file"]) for d in dirs}
    lines = [line for k in planned for line in rows[owner[k]].get(k, [])]
    _write_lines(out / decl["file"], lines)
    module, name = decl["class"].split(":")
    log = getattr(importlib.import_module(module), name)(out / decl["file"])
    log.open(planned)
    part = log.summary(set(planned))
    log.close()
    return {log.summary_key: part} if part is not None else {}


def _link_videos(dirs: list[Path], out: Path) -> None:
    for d in dirs:
        for video in sorted((d / "videos").glob("*.mp4")):
            dst = out / "videos" / video.name
            if dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(video, dst)
            except OSError:
                shutil.copy2(video, dst)


def _merge_demos(plans, dirs, records, owner, tasks, record: str | None) -> dict[str, Any] | None:
    from ..rollout.record import merge_demos

    roots = {d: p.get("record") for d, p in zip(dirs, plans)}
    if not any(roots.values()) and record is None:
        return None
    if record is None:
        distinct = {str(Path(r).resolve()) for r in roots.values() if r}
        if len(distinct) != 1:
            return {"note": f"the shards recorded into {len(distinct)} dirs; pass record=DIR to gather them"}
        (root,) = distinct
        return {"root": root, "files": [str(p) for p in merge_demos(root, tasks)]}
    dest = Path(record) / ".episodes"
    dest.mkdir(parents=True, exist_ok=True)
    for rec in records:
        root = roots.get(owner[(int(rec["task_id"]), int(rec["trial"]))])
        if rec.get("demo") and root:
            src = Path(root) / rec["demo"]
            dst = dest / src.name
            if src.exists() and not dst.exists():
                shutil.copy2(src, dst)
    return {"root": str(record), "files": [str(p) for p in merge_demos(record, tasks)]}
