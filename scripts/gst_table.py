#!/usr/bin/env python
"""Per-subtask GST table (markdown) from any mix of result files.

Each argument is ``LABEL=PATH`` where PATH is a ``vla-gst eval``/``score`` output (``scores.json``
or its directory) or a ``vla-rollout`` run with mid-episode questions (``summary.json`` or its
directory; its ``gst`` block is read). Example::

    .venv/bin/python scripts/gst_table.py random=runs/gst/random memory=runs/gst/memory \\
        "memory, mid-episode=runs/gst/mid_memory"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vla.gst.subtasks import SUBTASKS  # noqa: E402


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


def table(rows: list[tuple[str, dict]]) -> str:
    codes = list(SUBTASKS)
    head = "| | " + " | ".join(codes) + " | overall | questions |"
    lines = [head, "|" + "---|" * (len(codes) + 3)]
    for label, s in rows:
        cells = [f"{s['per_subtask'][c]:.1f}" if c in s["per_subtask"] else "–" for c in codes]
        n = sum(s.get("count", {}).values())
        lines.append(f"| {label} | " + " | ".join(cells) + f" | **{s['overall']:.1f}** | {n} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="LABEL=PATH (scores.json / summary.json or their directory)")
    args = p.parse_args(argv)
    rows = []
    for item in args.runs:
        label, sep, path = item.rpartition("=")
        if not sep or not label:
            raise SystemExit(f"error: expected LABEL=PATH, got {item!r}")
        rows.append((label, load_scores(Path(path))))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
