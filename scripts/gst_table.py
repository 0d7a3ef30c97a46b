#!/usr/bin/env python
"""Per-subtask GST table (markdown) from any mix of result files.

Each argument is ``LABEL=PATH`` where PATH is a ``vla-gst eval``/``score`` output (``scores.json``
or its directory) or a ``vla-rollout`` run with mid-episode questions (``summary.json`` or its
directory; its ``gst`` block is read). Rollouts of disjoint episodes of one suite (e.g. two halves
of a split, run with ``eval.tasks=[...]``) are pooled with ``PATH1+PATH2``: their ``gst.jsonl``
rows are scored together, as one run would score them. Example::

    .venv/bin/python scripts/gst_table.py random=runs/gst/random memory=runs/gst/memory \\
        "memory, mid-episode=runs/gst/mid_memory" "pooled=runs/gst/mid_a+runs/gst/mid_b"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vla.gst.metrics import aggregate  # noqa: E402
from vla.questions.subtasks import SUBTASKS  # noqa: E402


def load_scores(path: Path) -> dict:
    """{"overall", "per_subtask", "count"} from a scores.json or a rollout summary.json (or their directory)."""
    if path.is_dir():
        for name in ("scores.json", "summary.json"):
            if (path / name).exists():
                path = path / name
                break
        else:
            raise SystemExit(f"error: {path} holds neither scores.json nor summary.json")
    if not path.exists():
        raise SystemExit(f"error: {path} does not exist")
    data = json.loads(path.read_text())
    if "per_subtask" not in data:
        data = data.get("gst") or {}
    if "per_subtask" not in data:
        raise SystemExit(f"error: {path} has no GST scores (a rollout without gst.every / gst.at?)")
    return data


def pooled_scores(paths: list[Path]) -> dict:
    """Scores of the mid-episode questions of several rollout dirs of disjoint episodes, pooled."""
    rows, owner, suites = [], {}, set()
    for d in paths:
        log = d / "gst.jsonl"
        if not log.exists():
            raise SystemExit(f"error: {log} does not exist (pooling reads rollouts' gst.jsonl)")
        mine = set()
        for line in log.read_text().splitlines():
            r = json.loads(line)
            mine.add((r["task_id"], r["trial"]))
            suites.add(r["suite"])
            rows.append((r["subtask"], float(r["score"])))
        for ep in sorted(mine):
            if ep in owner:
                raise SystemExit(f"error: episode {ep} is in both {owner[ep]} and {d}: pooled runs must be disjoint")
            owner[ep] = d
    if len(suites) > 1:
        raise SystemExit(f"error: pooled runs are of different suites {sorted(suites)}")
    if not rows:
        raise SystemExit(f"error: no questions in {' + '.join(map(str, paths))}")
    return aggregate(rows, bootstrap=200)


def table(rows: list[tuple[str, dict]]) -> str:
    codes = list(SUBTASKS)
    head = "| | " + " | ".join(codes) + " | overall | questions |"
    lines = [head, "|" + "---|" * (len(codes) + 3)]
    for label, s in rows:
        cells = [f"{s['per_subtask'][c]:.1f}" if c in s["per_subtask"] else "–" for c in codes]
        n = sum(s.get("count", {}).values())
        lines.append(f"| {label} | " + " | ".join(cells) + f" | **{s['overall']:.1f}** | {n} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> list[tuple[str, list[Path]]]:
    """The (label, paths) of each ``LABEL=PATH[+PATH...]`` argument; usage errors exit as argparse's do."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="LABEL=PATH (scores.json / summary.json or their directory)")
    args = p.parse_args(argv)
    runs = []
    for item in args.runs:
        label, sep, path = item.rpartition("=")
        if not sep or not label:
            raise SystemExit(f"error: expected LABEL=PATH, got {item!r}")
        runs.append((label, [Path(x) for x in path.split("+")]))
    return runs


def main(argv: list[str] | None = None) -> int:
    rows = []
    for label, parts in parse_args(argv):
        rows.append((label, pooled_scores(parts) if len(parts) > 1 else load_scores(parts[0])))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
