"""What each stage of an experiment cost: read from the logs its commands write, and in results.json."""

from __future__ import annotations

import json

from vla.experiment import cli
from vla.experiment.costs import stage_costs, unfinished
from vla.experiment.recipe import load
from vla.train.log import TrainLog


def _train_log(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _episode(trial: int, seconds: float) -> dict:
    return {
        "suite": "libero_mem",
        "task_id": 2,
        "task": "t",
        "trial": trial,
        "success": False,
        "steps": 9,
        "seconds": seconds,
        "error": None,
    }


def test_a_trainings_hours_count_each_kept_step_once_and_its_episodes_seconds_add_up(tmp_path):
    log = tmp_path / "train" / "current" / "train_log.jsonl"
    # 10 steps of 16 samples at 16/s, a val row, 10 more at 8/s; then a kill: 10 steps past the resume point
    _train_log(
        log,
        [
            {"step": 10, "loss": 2.0, "rank_samples": [16], "samples_per_s": 16.0},
            {"step": 10, "val_loss": 2.1},
            {"step": 20, "loss": 1.9, "rank_samples": [16], "samples_per_s": 8.0},
            {"step": 30, "loss": 1.8, "rank_samples": [16], "samples_per_s": 8.0},
        ],
    )
    TrainLog(log, resume_step=20)._fh.close()  # the resumed run drops step 30 and redoes it
    with open(log, "a") as fh:
        fh.write(json.dumps({"step": 30, "loss": 1.7, "rank_samples": [16], "samples_per_s": 4.0}) + "\n")
        fh.write('{"step": 40, "loss"')  # a line cut by a kill
    eps = tmp_path / "val" / "current" / "step_20" / "episodes.jsonl"
    eps.parent.mkdir(parents=True)
    eps.write_text("".join(json.dumps(_episode(i, 900.0)) + "\n" for i in range(3)) + '{"trial": 3, "succ')
    costs = stage_costs(tmp_path)
    assert costs["stages"]["train/current"] == {"kind": "train", "steps": 30, "hours": round((10 + 20 + 40) / 3600, 3)}
    assert costs["stages"]["val/current/step_20"] == {"kind": "rollout", "episodes": 3, "hours": 0.75}
    assert costs["hours"] == round(0.019 + 0.75, 3)


def test_results_json_carries_the_costs_of_what_ran_under_the_root(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("vla.experiment.libero.libero", lambda a: {"val": {}})
    root = tmp_path / "r"
    eps = root / "rec" / "episodes.jsonl"
    eps.parent.mkdir(parents=True)
    eps.write_text(json.dumps(_episode(0, 36.0)) + "\n")
    (root / "rec" / "plan.json").write_text(json.dumps({"episodes": [[2, 0], [2, 1]]}))
    res = cli.run(load("libero_object_oft", {"steps": 8}), "table", root, ledger_path=tmp_path / "uses.jsonl")
    rec = {"kind": "rollout", "episodes": 1, "hours": 0.01, "of": 2, "hours_left": 0.01}
    assert res["costs"]["stages"] == {"rec": rec}
    assert json.loads((root / "results.json").read_text())["costs"] == res["costs"]
    # and the command says where an unfinished stage is
    assert "unfinished: rec: 1 of 2 episodes, 0.01 h so far, ~0.01 h left" in capsys.readouterr().err


def test_an_unfinished_stage_says_how_much_of_it_there_is_and_the_hours_left_at_its_rate(tmp_path):
    """``stage=table`` as the progress of a long run: a rollout's planned episodes from its ``plan.json``,
    a training's budget from its newest checkpoint (a resumed run may have extended it)."""
    train = tmp_path / "train" / "map"
    _train_log(train / "train_log.jsonl", [{"step": 20, "loss": 2.0, "rank_samples": [16], "samples_per_s": 16.0}])
    for ck, budget in (("resume/step_20", 80), ("step_10", 40)):  # the later step holds the extended budget
        ck = train / "checkpoints" / ck
        ck.mkdir(parents=True)
        (ck / "train_config.json").write_text(json.dumps({"train": {"steps": budget}}))
        (ck / "train_state.pt").write_bytes(b"")  # complete: what vla.train.checkpoint lists
    test = tmp_path / "test" / "map"
    test.mkdir(parents=True)
    (test / "plan.json").write_text(json.dumps({"episodes": [[2, k] for k in range(5)]}))
    (test / "episodes.jsonl").write_text("".join(json.dumps(_episode(i, 720.0)) + "\n" for i in range(2)))
    done = tmp_path / "val" / "map" / "step_20"
    done.mkdir(parents=True)
    (done / "plan.json").write_text(json.dumps({"episodes": [[2, 0]]}))
    (done / "episodes.jsonl").write_text(json.dumps(_episode(0, 36.0)) + "\n")
    stages = stage_costs(tmp_path)["stages"]
    assert stages["train/map"] == {"kind": "train", "steps": 20, "hours": 0.006, "of": 80, "hours_left": 0.017}
    assert stages["test/map"] == {"kind": "rollout", "episodes": 2, "hours": 0.4, "of": 5, "hours_left": 0.6}
    assert stages["val/map/step_20"] == {"kind": "rollout", "episodes": 1, "hours": 0.01, "of": 1}
    assert unfinished({"stages": stages}) == [
        "test/map: 2 of 5 episodes, 0.4 h so far, ~0.6 h left",
        "train/map: 20 of 80 steps, 0.006 h so far, ~0.017 h left",
    ]
