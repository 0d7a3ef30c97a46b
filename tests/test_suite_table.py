"""scripts/suite_table.py: a libero_suite experiment's tables from its results.json."""

from __future__ import annotations

import json

import pytest

from tests.conftest import load_script
from vla.experiment.libero_suite import language_table
from vla.experiment.tables import success_table


def _rows(successes: dict[int, int], n: int = 4, goal: str = "bowl_1") -> list[dict]:
    rows = []
    for t, k in successes.items():
        for i in range(n):
            ok = i < k
            rows.append({"task_id": t, "trial": i, "success": ok, "took": goal if ok else "",
                         "goal_object": goal, **({} if ok else {"failed_stage": "pick bowl_1"})})  # fmt: skip
    return rows


def test_the_tables_say_each_arms_successes_the_language_check_and_each_factor(tmp_path, capsys):
    root = tmp_path / "suite"
    (root / "test" / "policy").mkdir(parents=True)
    (root / "test" / "policy" / "plan.json").write_text(json.dumps({"tasks": {"0": "pick_a", "1": "pick_b"}}))
    own = root / "test" / "policy"
    (own / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows({0: 3, 1: 1})))
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    (swapped / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows({0: 0, 1: 0})))
    res = {
        "test": {"policy": success_table(_rows({0: 3, 1: 1})), "shuffled": success_table(_rows({0: 1, 1: 0}))},
        "language": {"policy": language_table(own, swapped, 4)},
        "perturb": {"camera_1": 0.25, "camera_2": 0.0},
    }
    (root / "results.json").write_text(json.dumps(res))
    load_script("suite_table").main([str(root)])
    out = capsys.readouterr().out
    assert "| 0 pick_a | 3/4 [30, 95] | 1/4 [5, 70] | 1 pick bowl_1 |" in out
    assert "| all | **4/8** (50.0 %) [22, 78] | **1/8** (12.5 %) [2, 47] | |" in out
    assert "| all | 4/8 (named 4, other 0, none 4) | 0/8 (named 0, other 0, none 8) |" in out
    assert "| camera | 25.0 | 0.0 | 50.0 |" in out and "| light | - | - | 50.0 |" in out
    assert "| OpenVLA-OFT | 56.4 | 31.9 | 79.5 | 69.6 |" in out
    with pytest.raises(SystemExit, match="stage=table first"):
        load_script("suite_table").main([str(tmp_path / "none")])


def test_the_val_table_says_where_each_tasks_val_episodes_ended_over_all_checkpoints(tmp_path, capsys):
    """``--val ARM``: per task over every checkpoint's val rollout, solved / never picked / picked and
    never placed / ended later, and apart, the other bowl put where the goal wanted the named one."""

    def row(t: int, reached: int, success: bool = False, took: str = "") -> dict:
        return {"task_id": t, "success": success, "stages": 2, "stages_reached": reached, "took": took,
                "goal_object": "bowl_1"}  # fmt: skip

    runs = {
        "step_1000": [row(0, 2, True, "bowl_1"), row(0, 0), row(1, 1), row(1, 0, took="bowl_2")],
        "step_2000": [row(0, 1), row(1, 2), row(1, 2, took="bowl_2")],
    }
    for step, rows in runs.items():
        out = tmp_path / "val" / "policy" / step
        out.mkdir(parents=True)
        (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    load_script("suite_table").main([str(tmp_path), "--val", "policy"])
    out = capsys.readouterr().out
    assert "| 0 | 3 | 1 | 1 | 1 | 0 | 0 |" in out
    assert "| 1 | 4 | 0 | 1 | 1 | 2 | 2 |" in out
    assert "| all | 7 | **1** | **2** | **2** | **2** | **2** |" in out
    load_script("suite_table").main([str(tmp_path), "--val", "policy/step_2000"])  # one run of them
    assert "| all | 3 | **0** | **0** | **1** | **2** | **1** |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no val run 'shuffled'"):
        load_script("suite_table").main([str(tmp_path), "--val", "shuffled"])
