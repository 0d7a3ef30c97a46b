"""``gst.jsonl``: every mid-episode question with its answer and score, one line each (a side log)."""

from __future__ import annotations

from typing import Any

from vla.eval.sidelog import EpisodeLog


class GSTLog(EpisodeLog):
    field = "gst_questions"
    summary_key = "gst"

    def summary(self, selected: set[tuple[int, int]]) -> dict[str, Any] | None:
        from .metrics import aggregate

        rows = self.selected_rows(selected)
        if not rows:
            return None
        return aggregate([(r["subtask"], float(r["score"])) for r in rows], bootstrap=200)
