"""The experiments' shared training budget (vla/experiment/common.budget) as vla-train reads it, and what
the house experiment passes to its rounds (its commands captured, not run)."""

import json
from argparse import Namespace

from vla.config import compose
from vla.experiment import common
from vla.experiment import house as house_module


def _args(**over) -> Namespace:
    return Namespace(**{"steps": 2400, "checkpoints": 4, "lr": 5e-4, "train_embeddings": False, **over})


def test_the_budget_composes_as_vla_train_reads_it():
    budget = common.budget
    cfg = compose("train", budget(_args(), batch=8, val_every=0))
    assert cfg["train"]["steps"] == 2400 and cfg["train"]["batch_size"] == 8
    assert cfg["train"]["save_every"] == 600 and cfg["train"]["keep_last"] == 4
    assert cfg["policy"]["freeze_embeddings"] is True  # the policy's default: only the action rows train


def test_train_embeddings_reaches_every_proof_through_the_budget():
    """``train_embeddings`` (the GST copy probe's finding) is one override in the shared budget, so the
    house, LIBERO and GST proofs all get it; a namespace without the attribute (an older caller) keeps
    the default. That the override really trains the input embedding (and the default does not):
    tests/test_policy.py::test_freeze_embeddings_decides_whether_a_training_step_moves_the_input_embedding."""
    budget = common.budget
    over = budget(_args(train_embeddings=True), batch=16, val_every=100, keep=1)
    assert "policy.freeze_embeddings=false" in over
    assert compose("train", over)["policy"]["freeze_embeddings"] is False
    plain = Namespace(steps=10, checkpoints=2, lr=1e-3)
    assert not any("freeze_embeddings" in o for o in budget(plain, batch=2, val_every=0))


def test_the_house_proofs_round_0_starts_from_init_from(tmp_path, monkeypatch):
    """``init_from: CK`` (issue 26's stage 2 on the apartments): round 0's vla-train starts
    from the stage-1 weights; without it, from scratch. The command is captured, not run."""
    house = house_module
    seen: list[list[str]] = []
    monkeypatch.setattr(house, "run", lambda cmd, log, *a, **k: seen.append(cmd))
    args = _args(steps=8, house_recipe="bins", init_from=None)
    house._round(args, tmp_path, ["env=house"], ["model=tiny_qwen2_5_vl"], "memory", [], 0)
    args = _args(steps=8, house_recipe="bins", init_from="runs/s26/stage1/checkpoints/step_1500")
    house._round(args, tmp_path, ["env=house"], ["model=tiny_qwen2_5_vl"], "memory", [], 0)
    assert [[c for c in cmd if c.startswith("train.init_from=")] for cmd in seen] == [
        [],
        ["train.init_from=runs/s26/stage1/checkpoints/step_1500"],
    ]


def _captured_house(tmp_path, monkeypatch, **over):
    """The house experiment with its commands captured, not run, and the args of a small one (``over``)."""
    house = house_module
    seen: list[list[str]] = []
    monkeypatch.setattr(house, "run", lambda cmd, log, *a, **k: seen.append(cmd))
    base = dict(
        root=str(tmp_path), stage="train", steps=8, dagger=0, arms=[], scenes=2, workers=0, house_chunk=4,
        house_recipe="routes", house_proprio=None, init_from=None, select="val", val_scenes=1, test_scenes=1, replan=0,
        profiles=["gt"],
    )  # fmt: skip
    return house, seen, _args(**{**base, **over})


def test_the_routes_recipe_labels_with_the_route_follower_and_gives_the_memory_arm_the_routes(tmp_path, monkeypatch):
    """``house_recipe: routes``: the demonstrations are recorded with the route follower as the
    teacher, both arms train on them, and the memory arm's memory inputs carry the routes (what the
    teacher acts on); the commands are captured, not run, and composed as the tools read them."""
    from vla.transforms.map_inputs import MemoryInputsConfig

    house, seen, args = _captured_house(tmp_path, monkeypatch, stage="record")
    house.house(args)
    house.house(Namespace(**{**vars(args), "stage": "train"}))
    record = next(c for c in seen if c[0].endswith("vla-rollout"))
    cfg = compose("rollout", record[1:])
    assert cfg["agent"]["name"] == "dagger" and cfg["agent"]["teacher"]["follow"] == "routes"
    trains = {c[-1].split("/")[-2]: c for c in seen if c[0].endswith("vla-train")}  # out=.../train/ARM/round0
    assert sorted(trains) == ["memory", "no_memory"]
    mem = compose("train", trains["memory"][1:])
    assert "routes" in MemoryInputsConfig.from_dict(mem["data"]["memory"]).inputs
    assert not any(c.startswith("data.memory=") for c in trains["no_memory"])
    assert not any(c.startswith("policy.inputs.proprio=") for c in trains["memory"])  # the recipe's: none


def test_the_routes_token_recipe_gives_the_routes_as_numbers_to_the_memory_arm_alone(tmp_path, monkeypatch):
    """``house_recipe: routes_token``: the routes recipe, and the memory arm (only) reads the routes as a
    proprio token; the commands are captured, not run, and composed as the tools read them."""
    house, seen, args = _captured_house(tmp_path, monkeypatch, house_recipe="routes_token")
    house.house(args)
    trains = {c[-1].split("/")[-2]: compose("train", c[1:]) for c in seen if c[0].endswith("vla-train")}
    assert trains["memory"]["policy"]["inputs"]["proprio"] == "token"
    assert list(trains["memory"]["policy"]["inputs"]["proprio_keys"]) == ["memory/routes"]
    assert trains["no_memory"]["policy"]["inputs"]["proprio"] == "none"


def test_replan_reaches_the_learned_arms_val_and_test_rollouts(tmp_path, monkeypatch):
    """``replan: 1``: the learned arms' val and test rollouts re-plan every step (``agent.replan=1``), their
    val runs land beside the default's (``roundN_replan1``), the baselines' rollouts are left as they are."""
    house, seen, args = _captured_house(tmp_path, monkeypatch, stage="test", replan=1)
    monkeypatch.setattr(house, "_nav", lambda out: {"success": 0.5, "spl": 0.4, "out": str(out)})
    for arm in ("memory", "no_memory"):  # a finished round 0 of each arm
        (tmp_path / "train" / arm / "round0" / "checkpoints" / "step_8").mkdir(parents=True)
        (tmp_path / "train" / arm / "round0" / "summary.json").write_text("{}")
        (tmp_path / "val" / arm / "round0_replan1").mkdir(parents=True)  # as its val rollout leaves it
        (tmp_path / "val" / arm / "round0_replan1" / "summary.json").write_text("{}")
    results = house.house(args)
    rollouts = [compose("rollout", c[1:]) | {"out": c[-2]} for c in seen if c[0].endswith("vla-rollout")]
    learned = [r for r in rollouts if r["agent"]["name"] == "vla"]
    assert len(learned) == 4 and all(r["agent"]["replan"] == 1 for r in learned)  # val and test, both arms
    assert results["val"]["memory"]["round0"]["out"].endswith("val/memory/round0_replan1")
    assert results["test"]["memory"]["replan"] == 1
    assert all(r["agent"]["name"] in ("memory", "random") for r in rollouts if r not in learned)


def test_the_curves_find_every_arm_a_linked_one_included(tmp_path):
    """``<root>/curves.png`` plots every run under ``<root>/train``, also an arm linked in from another
    root (an experiment that shares one arm's training with an earlier one)."""
    from vla.experiment.curves import train_logs

    (tmp_path / "a" / "train" / "memory" / "round0").mkdir(parents=True)
    (tmp_path / "a" / "train" / "memory" / "round0" / "train_log.jsonl").write_text("{}\n")
    (tmp_path / "b" / "no_memory" / "round0").mkdir(parents=True)
    (tmp_path / "b" / "no_memory" / "round0" / "train_log.jsonl").write_text("{}\n")
    (tmp_path / "a" / "train" / "no_memory").symlink_to(tmp_path / "b" / "no_memory")
    assert sorted(train_logs(tmp_path / "a")) == ["memory/round0", "no_memory/round0"]
    (tmp_path / "c" / "train").mkdir(parents=True)
    (tmp_path / "c" / "train" / "train_log.jsonl").write_text("{}\n")  # one run at the top (libero)
    assert list(train_logs(tmp_path / "c")) == ["policy"]


def _scored(root, arm: str, rates: dict[int, float | None]) -> None:
    """``root``'s arm with a checkpoint per step of ``rates`` and each one's val summary (None: val not
    finished for it)."""
    for step, rate in rates.items():
        (root / "train" / arm / "checkpoints" / f"step_{step}").mkdir(parents=True)
        out = root / "val" / arm / f"step_{step}"
        out.mkdir(parents=True)
        done = rate is not None
        (out / "summary.json").write_text(json.dumps({"success_rate": rate or 0.0, "complete": done}))


def test_init_from_an_experiment_starts_each_arm_from_the_checkpoint_that_experiment_chose(tmp_path, monkeypatch):
    """``init_from: experiment:NAME`` (issue 49's next attempt: libero_mem from the suite's policy): each arm
    trains from the checkpoint NAME chose on val for the arm of the same name (its best; ties: the later),
    ``experiment:NAME/ARM`` from that one arm's, ``@final`` from the last; an unfinished val or a missing
    arm stops the run before any training, saying which command to run. The commands are captured, not run."""
    import pytest

    from vla.experiment import libero_suite as suite_module

    other = tmp_path / "suite"
    _scored(other, "policy", {1000: 0.2, 2000: 0.4, 3000: 0.4, 4000: 0.1})
    _scored(other, "shuffled", {1000: 0.1, 2000: 0.0})
    seen: list[list[str]] = []
    monkeypatch.setattr(suite_module, "run", lambda cmd, log, *a, **k: seen.append(cmd))
    base = dict(
        root=str(tmp_path / "next"), stage="train", arms=[], tasks=[0, 1], suite="libero_spatial", demos=1,
        val_demos=0, record_first=0, arm_init_noise=0.0, workers=1, select="val", val_first=1000, val_trials=1,
    )  # fmt: skip

    def inits(init_from: str) -> dict[str, str]:
        seen.clear()
        suite_module.libero_suite(_args(**base, init_from=init_from))
        trains = {c[-1].split("/")[-1]: c for c in seen if c[0].endswith("vla-train")}
        return {arm: next(x for x in c if x.startswith("train.init_from=")) for arm, c in trains.items()}

    ck = other / "train"
    assert inits("experiment:suite") == {
        "policy": f"train.init_from={ck / 'policy' / 'checkpoints' / 'step_3000'}",
        "shuffled": f"train.init_from={ck / 'shuffled' / 'checkpoints' / 'step_1000'}",
    }
    assert set(inits("experiment:suite/policy").values()) == {f"train.init_from={ck / 'policy/checkpoints/step_3000'}"}
    assert set(inits("experiment:suite@final").values()) == {  # the last of each arm: a longer training continued
        f"train.init_from={ck / 'policy/checkpoints/step_4000'}",
        f"train.init_from={ck / 'shuffled/checkpoints/step_2000'}",
    }
    _scored(other, "policy", {5000: None})  # a checkpoint val has not finished
    with pytest.raises(SystemExit, match="step_5000 is not scored on val yet; run vla-experiment suite stage=select"):
        inits("experiment:suite/policy")
    with pytest.raises(SystemExit, match="has no checkpoint"):
        inits("experiment:suite/frames")
    with pytest.raises(SystemExit, match="optionally @final"):
        inits("experiment:suite@best")


def test_demos_from_trains_on_another_experiments_recording_and_records_nothing(tmp_path, monkeypatch):
    """``demos_from: NAME`` (a longer training or a variant of NAME): nothing is recorded, every arm trains
    on NAME's demonstration files, and a run before NAME's recording stops saying which to run first."""
    import pytest

    from vla.experiment import libero_suite as suite_module

    seen: list[list[str]] = []
    monkeypatch.setattr(suite_module, "run", lambda cmd, log, *a, **k: seen.append(cmd))
    monkeypatch.setattr(common, "run", lambda cmd, log, *a, **k: seen.append(cmd))  # record_demos's
    base = dict(
        root=str(tmp_path / "longer"), stage="select", arms=[], tasks=[0], suite="libero_spatial", demos=1,
        val_demos=0, record_first=0, arm_init_noise=0.0, workers=1, select="final", val_first=1000, val_trials=1,
        init_from=None, demos_from="suite", steps=8, checkpoints=1,
    )  # fmt: skip
    with pytest.raises(SystemExit, match="no demonstrations in .*suite/demos: run vla-experiment suite stage=record"):
        suite_module.libero_suite(Namespace(**{**vars(_args()), **base}))
    (tmp_path / "suite" / "demos").mkdir(parents=True)
    (tmp_path / "suite" / "demos" / "task_demo.hdf5").touch()
    suite_module.libero_suite(Namespace(**{**vars(_args()), **base}))
    assert not any(c[0].endswith("vla-rollout") for c in seen)  # nothing recorded
    trains = [c for c in seen if c[0].endswith("vla-train")]
    assert len(trains) == 2 and all(f"data.paths=[{tmp_path / 'suite/demos/task_demo.hdf5'}]" in c for c in trains)


def test_a_rollouts_rows_leave_out_a_line_still_being_written(tmp_path):
    """``stage=table`` while a test rollout runs (or after a kill) reads the finished episodes and leaves
    out the line being written, rather than failing on it."""
    from vla.experiment.tables import read_rows, success_table

    rows = [{"task_id": 0, "trial": i, "success": i == 0, "failed_stage": "pick bowl"} for i in range(2)]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"task_id": 0, "tri')
    assert read_rows(tmp_path) == rows and success_table(read_rows(tmp_path))["episodes"] == 2
    (tmp_path / "episodes.jsonl").write_text(json.dumps(rows[0]))  # complete JSON, but no newline yet
    assert read_rows(tmp_path) == []


def test_a_checkpoint_deleted_after_its_val_keeps_its_score_and_its_place_in_the_choice(tmp_path):
    """Unchosen checkpoints may be deleted to free the disk once val has scored them: the val table keeps
    their rows (``stage=table``), and an experiment started from the val choice is refused when the
    deleted one was the best, rather than silently started from the second best."""
    import shutil

    import pytest

    other = tmp_path / "suite"
    _scored(other, "policy", {1000: 0.5, 2000: 0.2, 3000: 0.1})
    shutil.rmtree(other / "train" / "policy" / "checkpoints" / "step_2000")
    a = _args(select="val", stage="table", workers=1)
    assert common.val_scores(a, other, "policy", []) == {"step_1000": 0.5, "step_2000": 0.2, "step_3000": 0.1}
    assert common.chosen_checkpoint(tmp_path, "suite/policy", None).name == "step_1000"
    shutil.rmtree(other / "train" / "policy" / "checkpoints" / "step_1000")
    with pytest.raises(SystemExit, match="step_1000, suite's val choice for policy, was deleted"):
        common.chosen_checkpoint(tmp_path, "suite/policy", None)
