"""Per-episode side logs: extra ``.jsonl`` files of a run that resume exactly like ``episodes.jsonl``.

A subscriber that produces rows of its own per episode (the mid-episode GST questioner: one row per
question) returns them in ``result.extra[<field>]`` and declares an :class:`EpisodeLog` through
:meth:`vla.rollout.runtime.Subscriber.episode_logs`. The evaluator pops the field from each
episode record and appends its rows **before** the episode's own line, so an episode line means
all of it is on disk; on open, rows of episodes that never finished (a killed run) are dropped, so
a resumed run produces them again and nothing is counted twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable


def _plain(x: Any) -> Any:
    return x.tolist() if hasattr(x, "tolist") else str(x)


class EpisodeLog:
    """One side log. ``field``: the episode-record key whose rows it takes; ``summary_key``: where
    :meth:`summary` goes in ``summary.json`` (override :meth:`summary` to aggregate)."""

    field: str = ""
    summary_key: str = ""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        self._fh = None

    def open(self, finished: Iterable[tuple[int, int]]) -> None:
        """Keep the rows of finished ``(task_id, trial)`` episodes, drop the rest (and torn lines)."""
        finished = set(finished)
        self.rows = []
        if not self.path.exists():
            return
        keep = []
        for line in self.path.read_text().splitlines(keepends=True):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if line.endswith("\n") and (int(row["task_id"]), int(row["trial"])) in finished:
                keep.append(line)
                self.rows.append(row)
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(keep))
        os.replace(tmp, self.path)

    def append(self, rec: dict[str, Any], rows: list[dict[str, Any]] | None) -> None:
        if not rows:
            return
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        for row in rows:
            full = {"suite": rec["suite"], "task_id": rec["task_id"], "trial": rec["trial"], **row}
            self._fh.write(json.dumps(full, default=_plain) + "\n")
            self.rows.append(full)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def selected_rows(self, selected: set[tuple[int, int]]) -> list[dict[str, Any]]:
        return [r for r in self.rows if (int(r["task_id"]), int(r["trial"])) in selected]

    def summary(self, selected: set[tuple[int, int]]) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
