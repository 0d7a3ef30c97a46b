"""scripts/gst_table.py: pooling the mid-episode questions of rollouts of disjoint episodes."""

import json

import pytest

from tests.conftest import load_script


def _script():
    return load_script("gst_table")


def _run(d, episodes):
    d.mkdir()
    with open(d / "gst.jsonl", "w") as fh:
        for task, subtask, score in episodes:
            row = {"suite": "house/test", "task_id": task, "trial": 0, "subtask": subtask, "score": score}
            fh.write(json.dumps(row) + "\n")
    return d


def test_pooled_runs_are_scored_as_one_and_must_be_disjoint(tmp_path):
    t = _script()
    a = _run(tmp_path / "a", [(0, "EDv", 1.0), (0, "EDv", 0.0), (0, "GPv", 1.0)])
    b = _run(tmp_path / "b", [(1, "EDv", 1.0), (1, "GPv", 0.5)])
    s = t.pooled_scores([a, b])
    # EDv: 2 of 3 right; GPv: (1 + 0.5) / 2; overall: the mean of the subtasks
    assert s["per_subtask"] == pytest.approx({"EDv": 100 * 2 / 3, "GPv": 75.0})
    assert s["overall"] == pytest.approx((100 * 2 / 3 + 75.0) / 2)
    assert s["count"] == {"EDv": 3, "GPv": 2}
    with pytest.raises(SystemExit, match=r"episode \(0, 0\) is in both"):
        t.pooled_scores([a, a])
    c = _run(tmp_path / "c", [(0, "EDv", 1.0)])
    with pytest.raises(SystemExit, match="must be disjoint"):
        t.pooled_scores([a, b, c])
