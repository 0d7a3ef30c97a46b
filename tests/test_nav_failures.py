"""scripts/nav_failures.py: the memory navigator's failed episodes replayed and sorted by kind."""

import json
import subprocess
import sys

from tests.conftest import ROOT, cli_env

sys.path.insert(0, str(ROOT / "scripts"))

from nav_failures import KINDS, classify  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"


def test_kinds_follow_the_trace():
    """No target ever: never found, however near the base came; a target and the base within ``near`` of
    the env's target: near but not reached; a target and never near: another object."""
    assert classify({"steps_with_target": 0, "min_distance_m": 0.5}, 2.0) == "never_found"
    assert classify({"steps_with_target": 7, "min_distance_m": 1.3}, 2.0) == "near_not_reached"
    assert classify({"steps_with_target": 7, "min_distance_m": 2.0}, 2.0) == "near_not_reached"
    assert classify({"steps_with_target": 7, "min_distance_m": 6.1}, 2.0) == "other_object"
    assert classify({"steps_with_target": 7, "min_distance_m": 6.1}, 7.0) == "near_not_reached"


def _run(args, cwd=ROOT):
    return subprocess.run(args, capture_output=True, text=True, env=cli_env(), cwd=cwd)


def test_a_real_runs_failure_is_replayed_and_sorted(tmp_path):
    """A real vla-rollout of the memory agent on one val apartment, cut to 6 steps so that it fails, then
    its failure replayed: one row, the replay fails as the run did, the trace is the episode's."""
    out = tmp_path / "run"
    args = [
        "env=house",
        "env.split=val",
        "env.num_scenes=1",
        "env.max_steps=6",
        "agent=memory",
        "eval.trials_per_task=1",
        f"out={out}",
        "progress=false",
    ]
    r = _run([str(VENV_BIN / "vla-rollout"), *args])
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert not row["success"] and row["steps"] == 6
    r = _run([str(VENV_BIN / "python"), str(ROOT / "scripts" / "nav_failures.py"), str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    (got,) = [json.loads(x) for x in (out / "nav_failures.jsonl").read_text().splitlines()]
    assert got["task"] == row["task"] and got["replay_success"] is False
    assert got["kind"] in KINDS and got["kind"] == classify(got, 2.0)
    # not reached (the success predicate is within 1 m), and a real distance from the env's info
    assert 1.0 < got["min_distance_m"] < 30.0 and 0 <= got["steps_with_target"] <= 6
    assert f"1 failures of {out}" in r.stdout


def test_only_memory_agent_runs_are_replayed(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"env": {"name": "house"}, "agent": {"name": "random"}}))
    (out / "episodes.jsonl").write_text("")
    r = _run([str(VENV_BIN / "python"), str(ROOT / "scripts" / "nav_failures.py"), str(out)])
    assert r.returncode == 2 and "agent=memory" in r.stderr
    r = _run([str(VENV_BIN / "python"), str(ROOT / "scripts" / "nav_failures.py"), str(tmp_path / "nope")])
    assert r.returncode == 2 and "does not exist" in r.stderr
