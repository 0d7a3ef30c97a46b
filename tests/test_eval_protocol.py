"""Protocol details of the evaluator: the run identity, leftovers of a killed run, the lane schedule."""

import json
import os

import pytest

from vla.eval.evaluate import EvalSpec, evaluate
from vla.eval.identity import clean_temporaries
from vla.eval.schedule import LaneSchedule

FAST_ENV = {"name": "libero", "suite": "libero_spatial", "render": False, "hard_reset": False, "max_steps": 5}


def _spec(out, env=None, **kw):
    base = dict(env=env or FAST_ENV, agent={"name": "random"}, out=str(out), tasks=[0], trials_per_task=1, workers=0)
    return EvalSpec(**{**base, **kw})


def test_rerun_with_other_settings_is_refused_naming_them(tmp_path):
    out = tmp_path / "run"
    evaluate(_spec(out), progress=False)
    ident = json.loads((out / "run.json").read_text())
    assert ident["seed"] == 7 and ident["trials_per_task"] == 1
    assert ident["protocol"]["max_steps"] == {"0": 5}
    assert ident["protocol"]["env"]["settle_steps"] == 10 and ident["protocol"]["env"]["env_seed"] == 0
    # spelling a default out is the same run
    evaluate(_spec(out, env={**FAST_ENV, "settle_steps": 10, "env_seed": 0}), progress=False)
    for change, named in [
        ({"env": {**FAST_ENV, "max_steps": 6}}, "max_steps"),
        ({"env": {**FAST_ENV, "settle_steps": 3}}, "settle_steps"),
        ({"env": {**FAST_ENV, "resolution": 128}}, "resolution"),
        ({"env": {**FAST_ENV, "env_seed": 1}}, "env_seed"),
        ({"seed": 8}, "seed"),
        ({"trials_per_task": 2}, "trials_per_task"),
    ]:
        with pytest.raises(ValueError, match=named):
            evaluate(_spec(out, **change), progress=False)
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 1  # nothing mixed in


def test_leftovers_of_a_killed_run_are_removed_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    (out / ".episodes").mkdir(parents=True)
    (out / "videos").mkdir()
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stale = [
        out / "summary.json.tmp",
        out / "episodes.jsonl.tmp",
        out / "task_demo.hdf5.tmp",
        out / ".episodes" / f".libero_spatial_task000_trial003.{dead}.tmp.hdf5",
        out / "videos" / f".libero_spatial_task000_trial003.{dead}.tmp.mp4",
    ]
    kept = [
        out / "notes.tmp",
        out / "episodes.jsonl",
        out / ".episodes" / f".libero_spatial_task000_trial004.{os.getpid()}.tmp.hdf5",  # a live writer
        out / ".episodes" / "libero_spatial_task000_trial002.hdf5",
    ]
    for p in stale + kept:
        p.write_text("x")
    removed = clean_temporaries(out)
    assert sorted(removed) == sorted(stale)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)


def test_lane_schedule_keeps_trials_in_order_per_worker_and_hands_out_each_once():
    episodes = [(t, k, f"task{t}") for t in (3, 5) for k in range(10)]
    s = LaneSchedule(episodes)
    got = {"a": [], "b": [], "c": []}
    order = ["a", "b", "c"]
    handed = []
    while s:
        for w in order:
            e = s.next(w)
            if e is not None:
                got[w].append(e)
                handed.append(e)
    assert sorted(handed) == sorted(episodes)  # each exactly once
    for w, eps in got.items():
        for prev, nxt in zip(eps, eps[1:]):
            if prev[0] == nxt[0]:
                assert nxt[1] > prev[1], (w, eps)  # never backwards within a task: no re-seeding
    # a and b each got a whole task's start, c took the second half of one of them
    assert got["a"][0][:2] == (3, 0) and got["b"][0][:2] == (5, 0)
    assert got["c"] and got["c"][0][1] == 5


def test_the_trials_per_task_default_to_each_envs_protocol_and_can_start_later(tmp_path):
    """LIBERO: 50 per task (sampled init states too, which offer far more); the apartments: every
    initial state of a scene (env.num_trials), so the README's `env=house ... agent=memory` runs as
    written; eval.first_trial shifts the window (held-out sampled states)."""
    from vla.eval.evaluate import plan

    house = {"name": "house", "split": "test", "num_scenes": 2, "use_meshes": False}
    _, episodes = plan(_spec(tmp_path, env=house, tasks=None, trials_per_task=None))
    assert len(episodes) == 2 * 10 and episodes[-1][:2] == (1, 9)
    _, episodes = plan(_spec(tmp_path, env={**FAST_ENV, "init_states": "sampled"}, trials_per_task=None))
    assert [k for _, k, _ in episodes] == list(range(50))
    _, episodes = plan(_spec(tmp_path, env={**FAST_ENV, "init_states": "sampled"}, first_trial=200, trials_per_task=3))
    assert [k for _, k, _ in episodes] == [200, 201, 202]
    with pytest.raises(ValueError, match="from eval.first_trial=49 but task 0 .* has only 50 initial states"):
        plan(_spec(tmp_path, first_trial=49, trials_per_task=2))


def test_recording_demonstrations_without_cameras_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match=r"renders no cameras \(env.render=false\)"):
        evaluate(_spec(tmp_path / "run", record=str(tmp_path / "demos")), progress=False)
    assert not (tmp_path / "run" / "episodes.jsonl").exists() and not (tmp_path / "demos").exists()
