"""analyses/house_labels.py: the apartment demonstrations' labels sorted by what the memory's table says."""

import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, VENV_BIN, cli_env

sys.path.insert(0, str(ROOT / "analyses"))

from house_labels import label_stats, lead_route, lead_row  # noqa: E402


def _table(cats, deg, m):
    return {
        "objects/category": np.array(cats),
        "objects/direction_deg": np.array(deg),
        "objects/distance_m": np.array(m),
    }


def test_the_lead_row_counts_only_when_the_instruction_names_it():
    """The transform puts named categories first, so the lead row is the target's when its category
    is in the instruction (underscores and case as the memory's normalisation has them)."""
    t = _table(["teddy_bear", "sofa"], [12.0, -40.0], [2.5, 1.0])
    assert lead_row("go to the teddy bear", t) == (12.0, 2.5)
    assert lead_row("go to the Sofa", t) is None  # the sofa is in the table, but not first: not the lead
    assert lead_row("go to the bear", t) is None  # a word of the category is not the category
    assert lead_row("go to the sofa", _table([], [], [])) is None
    assert lead_row("go to the sofa", {}) is None


def test_the_lead_route_is_the_first():
    """The route a follower takes: the first of ``memory/routes/*`` (the target's leads when there is one)."""
    routes = {
        "routes/kind": np.array(["target", "frontier"]),
        "routes/direction_deg": np.array([-30.0, 80.0]),
        "routes/length_m": np.array([3.5, 1.0]),
    }
    assert lead_route(routes) == (-30.0, 3.5)
    assert lead_route({"routes/kind": np.array([], dtype=str)}) is None and lead_route({}) is None


def test_statistics_by_bearing_and_distance():
    """Two states without the target (one drives, one turns right), three with it: 10 deg left and
    turning left (towards), 40 deg left and turning right (away), 0.5 m away with the stop label."""
    fwd, left, right, stop = [0.25, 0, 0, 0], [0, 0, 0.5, 0], [0, 0, -0.5, 0], [0, 0, 0, 1]
    rows = [
        (None, np.array(fwd)),
        (None, np.array(right)),
        ((10.0, 2.0), np.array(left)),
        ((40.0, 4.0), np.array(right)),
        ((-2.0, 0.5), np.array(stop)),
    ]
    s = label_stats(rows)
    assert s["samples"] == 5 and s["target_in_table"] == pytest.approx(0.6)
    u = s["not_in_table"]
    assert (u["samples"], u["forward"], u["turn_left"], u["turn_right"], u["stop"]) == (2, 0.5, 0.0, 0.5, 0.0)
    by_deg = {tuple(r["deg"]): r for r in s["by_bearing"]}
    assert by_deg[(0.0, 5.0)]["stop"] == 1.0 and by_deg[(0.0, 5.0)]["turn_towards"] is None  # no turn to judge
    assert by_deg[(5.0, 15.0)]["turn_towards"] == 1.0
    assert by_deg[(30.0, 90.0)]["turn_towards"] == 0.0
    assert by_deg[(15.0, 30.0)]["samples"] == 0
    by_m = {r["m"][0]: r for r in s["by_distance"]}
    assert (by_m[0.0]["samples"], by_m[0.0]["stop"]) == (1, 1.0)
    assert (by_m[1.5]["samples"], by_m[1.5]["stop"], by_m[3.0]["samples"]) == (1, 0.0, 1)
    with pytest.raises(ValueError):
        label_stats([])


@pytest.mark.slow  # ~1 min: two recorded expert episodes, one training step with memory inputs
def test_a_training_runs_data_is_read_with_its_memory_inputs(tmp_path):
    """Every sample of the run's data once (train and val split), each with the memory inputs the run
    trained on: the counts add up to the recorded steps, and a run without memory inputs is refused."""
    env = cli_env()
    roll = [
        str(VENV_BIN / "vla-rollout"),
        "env=house",
        "env.seed=900001",
        "env.use_meshes=false",
        "env.width=64",
        "env.height=64",
        "env.max_steps=60",
        "env.num_trials=2",
        "env.stop_action=true",
        "agent=scripted",
        "eval.trials_per_task=2",
        "eval.workers=0",
        f"record={tmp_path / 'demos'}",
        f"out={tmp_path / 'roll'}",
        "progress=false",
    ]
    r = subprocess.run(roll, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    import h5py

    steps = 0
    for f in (tmp_path / "demos").glob("*.hdf5"):
        with h5py.File(f, "r") as h:
            steps += sum(len(h["data"][k]["actions"]) for k in h["data"])
    assert steps > 0
    common = [
        sys.executable, "-m", "vla.train.cli", "model=tiny_qwen2_5_vl", "model.image_size=56", "data=house_nav",
        f"data.paths=[{tmp_path / 'demos'}]", "data.val_fraction=0.5", "policy.action_dim=4", "train.steps=1",
        "train.batch_size=2", "train.loader_workers=0", "train.val_every=0", "train.export=false", "train.plot=false",
        "progress=false",
    ]  # fmt: skip
    for name, policy in (("mem", "policy=house_memory"), ("plain", "policy=house")):
        extra = ["data.memory={map_size: [56, 56], max_objects: 4, inputs: [topdown, objects, text, routes]}"]
        extra = extra if name == "mem" else []
        r = subprocess.run(
            [*common, policy, *extra, f"out={tmp_path / name}"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    script = [sys.executable, str(ROOT / "analyses" / "house_labels.py")]
    r = subprocess.run(
        [*script, str(tmp_path / "mem"), "--json", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    s = json.loads((tmp_path / "s.json").read_text())
    assert s["samples"] == steps
    assert s["not_in_table"]["samples"] + sum(b["samples"] for b in s["by_bearing"]) == steps
    assert sum(b["samples"] for b in s["by_bearing"]) == sum(b["samples"] for b in s["by_distance"])
    assert s["target_in_table"] > 0  # the expert's episodes end at their target: it is in the table then
    assert f"{steps} samples" in r.stdout
    by_routes = [*script, str(tmp_path / "mem"), "--rows", "routes", "--json", str(tmp_path / "r.json")]
    r = subprocess.run(by_routes, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    routes = json.loads((tmp_path / "r.json").read_text())
    assert routes["samples"] == steps and routes["target_in_table"] > s["target_in_table"]  # a route nearly always
    r = subprocess.run(
        [*script, str(tmp_path / "plain")], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert r.returncode != 0 and "reads no memory inputs" in r.stderr
