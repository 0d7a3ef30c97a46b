"""The LIBERO kinds of named experiments (``libero_mem``, ``libero_suite``): their stage commands composed as
the tools read them, faked where a stage would record, train or roll out (split from test_experiment.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vla.experiment import cli
from vla.experiment.recipe import load


def _trained_or_out(cmd: list[str]) -> Path | None:
    """A faked stage command: a ``vla-train`` leaves checkpoints step_1000 and step_2000 (None returned),
    a rollout gets its ``out`` directory made and returned."""
    out = Path(next(x for x in cmd if x.startswith("out="))[4:])
    if Path(cmd[0]).name == "vla-train":
        for step in (1000, 2000):
            (out / "checkpoints" / f"step_{step}").mkdir(parents=True)
        return None
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_libero_mem_trains_three_arms_on_one_recording_and_counts_the_twins(tmp_path, monkeypatch):
    """``libero_mem`` (issue 49): one recording with depth and masks (arm starts perturbed), three arms from
    it -- the current frame, a memory of frames, the map -- each scored on val and its best tested on
    disjoint sampled states, the commands composed as the tools read them; the table counts scenes whose
    twins were both solved, with Wilson intervals, and the stage where each task's failures stopped."""
    from vla.config import check_config, compose
    from vla.experiment import libero_mem, tables

    seen: list[list[str]] = []

    def fake(cmd, log):
        seen.append(cmd)
        out = _trained_or_out(cmd)
        if out is None:
            return
        first = int(next(x for x in cmd if x.startswith("eval.first_trial="))[17:])
        rows = [{"task_id": t, "trial": first + i, "success": (t, i) != (3, 1)} for t in (2, 3) for i in range(2)]
        rows[3]["failed_stage"] = "pick cream_cheese_1"  # the env's stage of the one failure
        for r in rows:  # the test keeps every video
            end = "success" if r["success"] else "failure"
            r["video"] = f"libero_mem_task{r['task_id']:03d}_trial{r['trial']:03d}_{end}.mp4"
        (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (out / "summary.json").write_text(json.dumps({"success_rate": 0.75 if "step_1000" in str(out) else 0.5}))

    monkeypatch.setattr(libero_mem, "run", fake)
    monkeypatch.setattr("vla.experiment.common.run", fake)  # the recording
    R = tmp_path / "r"
    recipe = load("libero_mem_plate")
    res = cli.run(recipe, "all", R, ledger_path=tmp_path / "uses.jsonl")
    record, *rest = seen
    rec = compose("rollout", record[1:])
    check_config(rec)
    assert rec["env"]["depth"] and rec["env"]["segmentation"] and rec["env"]["arm_init_noise"] == 0.02
    assert rec["eval"]["trials_per_task"] == 55 and list(rec["eval"]["tasks"]) == [2, 3]
    trains = {
        Path(next(x for x in c if x.startswith("out="))).name: compose("train", c[1:])
        for c in rest
        if "vla-train" in c[0]
    }
    assert set(trains) == {"current", "frames", "map"}
    assert (
        trains["frames"]["policy"]["inputs"]["history"] == 4 and trains["current"]["policy"]["inputs"]["history"] == 0
    )
    assert trains["map"]["policy"]["inputs"]["memory_map"] and trains["map"]["data"]["memory"]["camera"] == "agentview"
    assert list(trains["map"]["policy"]["inputs"]["proprio_keys"]) == ["state", "memory/origins"]
    assert "origins" in trains["map"]["data"]["memory"]["inputs"]
    assert not trains["current"]["data"].get("memory")
    for c in rest:
        if "vla-rollout" in c[0]:
            cfg = compose("rollout", c[1:])
            check_config(cfg)
            assert not cfg["env"].get("arm_init_noise") and cfg["eval"]["first_trial"] in (1000, 2000)
            assert cfg["env"]["depth"] == ("/map/" in cfg["agent"]["checkpoint"])
    # the map arm is tested under realistic too, its memory fed by that profile; the others only under gt
    profiles = {
        Path(next(x for x in c if x.startswith("out="))).name: compose("rollout", c[1:])["perception"]["name"]
        for c in rest
        if "vla-rollout" in c[0] and "/test/" in next(x for x in c if x.startswith("out="))
    }
    assert profiles == {"current": "gt", "frames": "gt", "map": "gt", "map_realistic": "realistic"}
    for c in rest:  # the test films the first 5 states of each twin
        if "vla-rollout" in c[0] and "/test/" in next(x for x in c if x.startswith("out=")):
            ev = compose("rollout", c[1:])["eval"]
            assert (ev["videos"], ev["video_trials"], ev["first_trial"]) == ("all", 5, 2000)
    assert res["test"]["map_realistic"]["perception"] == "realistic"
    for arm in ("current", "frames", "map", "map_realistic"):
        t = res["test"][arm]
        assert t["checkpoint"] == "step_1000" and t["pairs"] == {"2-3": {"scenes": 2, "both_solved": 1}}
        assert t["tasks"]["3"]["success"] == 1 and t["success"] == 0.75
        assert t["tasks"]["3"]["failed_at"] == {"pick cream_cheese_1": 1} and t["tasks"]["2"]["failed_at"] == {}
        assert t["videos"] == {
            "success": "videos/libero_mem_task002_trial2000_success.mp4",
            "failure": "videos/libero_mem_task003_trial2001_failure.mp4",
        }
    lo, hi = tables.wilson(3, 4)
    assert 0.2 < lo < 0.75 < hi <= 1.0
    with pytest.raises(ValueError, match="overlap"):
        load("libero_mem_plate", {"val_first": 40})
    with pytest.raises(ValueError, match="arms must be among"):
        load("libero_mem_plate", {"arms": ["memory"]})


def test_libero_suite_trains_a_policy_and_its_shuffled_control_and_checks_the_language(tmp_path, monkeypatch):
    """``libero_suite`` (issue 50): one recording of every task (sampled states, arm starts perturbed), the
    policy and its shuffled-instruction control trained on it, each chosen on sampled val states and
    tested on the official 50 per task; the language check (each scene under the other bowl's
    instruction) and, for the policy only, LIBERO-Plus's factors at levels 1 and 2 on official states."""
    from vla.config import check_config, compose
    from vla.experiment import libero_suite

    seen: list[list[str]] = []

    def fake(cmd, log):
        seen.append(cmd)
        out = _trained_or_out(cmd)
        if out is None:
            return
        swapped = "env.instruction=distractor" in cmd
        rows = []
        for t in (0, 1):
            for i in range(2):
                # under the other bowl's instruction the policy takes its usual bowl: it ignores the words
                goal = "akita_black_bowl_2" if swapped else "akita_black_bowl_1"
                took = "akita_black_bowl_1" if (t, i) != (1, 1) else ""
                row = {"task_id": t, "trial": i, "success": took == goal, "took": took, "goal_object": goal}
                rows.append({**row, **({} if row["success"] else {"failed_stage": "pick akita_black_bowl_1"})})
        (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (out / "summary.json").write_text(json.dumps({"success_rate": 0.75 if "step_1000" in str(out) else 0.5}))

    monkeypatch.setattr(libero_suite, "run", fake)
    monkeypatch.setattr("vla.experiment.common.run", fake)  # the recording
    R = tmp_path / "r"
    recipe = load("libero_spatial_suite", {"tasks": [0, 1], "language_trials": 2})
    res = cli.run(recipe, "all", R, ledger_path=tmp_path / "uses.jsonl")
    record, *rest = seen
    rec = compose("rollout", record[1:])
    check_config(rec)
    assert rec["env"]["init_states"] == "sampled" and rec["env"]["arm_init_noise"] == 0.02
    assert rec["eval"]["trials_per_task"] == 55 and rec["eval"]["first_trial"] == 0
    trains = {
        Path(next(x for x in c if x.startswith("out="))).name: compose("train", c[1:])
        for c in rest
        if "vla-train" in c[0]
    }
    assert (
        trains["policy"]["data"]["instructions"] == "own" and trains["shuffled"]["data"]["instructions"] == "shuffled"
    )
    runs: dict[str, dict] = {}
    for c in rest:
        if "vla-rollout" in c[0]:
            cfg = compose("rollout", c[1:])
            check_config(cfg)
            out = next(x for x in c if x.startswith("out="))[4:]
            runs[str(Path(out).relative_to(R))] = cfg
    for arm in ("policy", "shuffled"):
        val = runs[f"val/{arm}/step_1000"]
        assert val["env"]["init_states"] == "sampled" and val["eval"]["first_trial"] == 1000
        assert val["env"]["arm_init_noise"] == 0.02  # as the official states were recorded
        test = runs[f"test/{arm}"]
        assert test["env"]["init_states"] == "official" and test["eval"]["trials_per_task"] == 50
        assert (test["eval"]["videos"], test["eval"]["video_trials"]) == ("all", 2)  # filmed: 2 states a task
        assert test["agent"]["checkpoint"].endswith(f"{arm}/checkpoints/step_1000")
        lang = runs[f"language/{arm}"]
        assert lang["env"]["instruction"] == "distractor" and lang["eval"]["trials_per_task"] == 2
        assert lang["env"]["init_states"] == "official"
    perturbed = sorted(k for k in runs if k.startswith("perturb/"))
    assert len(perturbed) == 14 and all(k.endswith("/policy") for k in perturbed)  # 7 factors x 2 levels
    assert runs["perturb/camera_2/policy"]["env"]["perturb"] == "camera:2"
    assert res["test"]["policy"]["tasks"]["1"]["failed_at"] == {"pick akita_black_bowl_1": 1}
    lang = res["language"]["policy"]
    assert lang["own"] == {"episodes": 4, "success": 3, "named": 3, "other": 0, "none": 1}
    assert lang["distractor"] == {"episodes": 4, "success": 0, "named": 0, "other": 3, "none": 1}
    assert set(res["perturb"]) == {
        f"{f}_{lv}" for f in ("camera", "robot", "language", "light", "texture", "noise", "layout") for lv in (1, 2)
    }
    with pytest.raises(ValueError, match="arms must be among"):
        load("libero_spatial_suite", {"arms": ["map"]})


def test_libero_mem_wrist_variant_trains_on_the_plate_recording_through_the_wrist(tmp_path, monkeypatch):
    """``libero_mem_plate_wrist``: nothing recorded (it reads libero_mem_plate's files, refused while there
    are none), the policy sees the wrist camera only, the frame memory and the map come from it too."""
    from vla.config import check_config, compose
    from vla.experiment import libero_mem

    seen: list[list[str]] = []
    monkeypatch.setattr(libero_mem, "run", lambda cmd, log: seen.append(cmd))
    monkeypatch.setattr("vla.experiment.common.run", lambda cmd, log: seen.append(cmd))
    R = tmp_path / "libero_mem_plate_wrist"
    recipe = load("libero_mem_plate_wrist")
    with pytest.raises(SystemExit, match="vla-experiment libero_mem_plate stage=record first"):
        cli.run(recipe, "train", R, ledger_path=tmp_path / "uses.jsonl")
    plate = tmp_path / "libero_mem_plate" / "demos"
    plate.mkdir(parents=True)
    (plate / "KITCHEN_MEM_plate_recall_spot_a_demo.hdf5").touch()
    cli.run(recipe, "train", R, ledger_path=tmp_path / "uses.jsonl")
    assert all("vla-train" in c[0] for c in seen), "nothing recorded"
    trains = {Path(next(x for x in c if x.startswith("out="))).name: compose("train", c[1:]) for c in seen}
    for arm, cfg in trains.items():
        assert list(cfg["policy"]["inputs"]["cameras"]) == ["wrist"], arm
        assert list(cfg["data"]["paths"]) == [str(plate / "KITCHEN_MEM_plate_recall_spot_a_demo.hdf5")]
    assert trains["frames"]["policy"]["inputs"]["history_camera"] == "wrist"
    assert trains["map"]["data"]["memory"]["camera"] == "wrist"
    assert recipe.test_set() == load("libero_mem_plate").test_set()  # one test set, its uses counted together
    monkeypatch.setattr("vla.experiment.common.checkpoints", lambda d: [d / "checkpoints" / "step_500"])
    cli.run(recipe, "select", R, ledger_path=tmp_path / "uses.jsonl")
    val = [compose("rollout", c[1:]) for c in seen if "vla-rollout" in c[0]]
    assert val and all(list(v["env"]["cameras"]) == ["wrist"] for v in val)
    check_config(val[0])


def test_libero_suite_with_no_training_compares_closed_loop_settings_of_a_chosen_policy(tmp_path, monkeypatch):
    """``steps: 0`` (attempt 3, ``libero_spatial_suite_replan``): nothing recorded or trained; init_from's
    checkpoint is scored on val under each of ``agents``' settings, the best (ties: the earlier listed)
    tested with that setting -- the official episodes, the language check and the factors alike."""
    from vla.config import compose
    from vla.experiment import libero_suite

    seen: list[list[str]] = []
    val_success = {"chunk": 0.5, "replan4": 0.7, "replan1": 0.7, "ensemble": 0.6}

    def fake(cmd, log):
        seen.append(cmd)
        out = _trained_or_out(cmd)
        name = out.name if out.parent.name == "policy" and out.parent.parent.name == "val" else None
        rows = [{"task_id": 0, "trial": 0, "success": True, "took": "bowl_1", "goal_object": "bowl_1"}]
        (out / "episodes.jsonl").write_text(json.dumps(rows[0]) + "\n")
        (out / "summary.json").write_text(json.dumps({"success_rate": val_success.get(name, 1.0), "complete": True}))

    monkeypatch.setattr(libero_suite, "run", fake)
    monkeypatch.setattr("vla.experiment.common.run", fake)
    ck = tmp_path / "suite16k" / "step_5000"
    R = tmp_path / "r"
    recipe = load("libero_spatial_suite_replan", {"tasks": [0, 1], "init_from": str(ck)})
    res = cli.run(recipe, "select", R, ledger_path=tmp_path / "uses.jsonl")
    assert all("vla-rollout" in c[0] for c in seen), "nothing recorded or trained"
    assert len(seen) == 4 and res["val"]["policy"] == val_success and res["test"] == {}
    cfgs = {Path(next(x for x in c if x.startswith("out="))[4:]).name: compose("rollout", c[1:]) for c in seen}
    assert cfgs["replan4"]["agent"]["replan"] == 4 and cfgs["ensemble"]["agent"]["ensemble"] == 0.01
    assert cfgs["chunk"]["agent"]["replan"] == 0 and cfgs["chunk"]["eval"]["first_trial"] == 1003
    assert {c["agent"]["checkpoint"] for c in cfgs.values()} == {str(ck)}
    summary = R / "val" / "policy" / "ensemble" / "summary.json"
    kept = summary.read_text()
    summary.unlink()  # a setting not scored yet: no choice among part of them
    assert cli.run(recipe, "table", R, ledger_path=tmp_path / "uses.jsonl")["test"] == {}
    summary.write_text(kept)
    seen.clear()
    res = cli.run(recipe, "test", R, ledger_path=tmp_path / "uses.jsonl")
    tested = [compose("rollout", c[1:]) for c in seen if "/val/" not in next(x for x in c if x.startswith("out="))]
    assert len(tested) == 16  # the official episodes, the language check, 7 factors x 2 levels
    assert all(t["agent"]["replan"] == 4 and t["agent"]["checkpoint"] == str(ck) for t in tested)  # tie: earlier
    assert res["test"]["policy"]["agent"] == "replan4" and res["test"]["policy"]["checkpoint"] == str(ck)
    with pytest.raises(ValueError, match="agents are compared on one checkpoint"):
        load("libero_spatial_suite_replan", {"steps": 8000, "checkpoints": 8})
    with pytest.raises(ValueError, match="steps: 0"):
        load("libero_spatial_suite", {"steps": 0})
    with pytest.raises(ValueError, match="distinct names"):
        load("libero_spatial_suite_replan", {"agents": ["a=replan=1", "a=replan=2"]})
