"""eval.backend=ray on a local Ray instance the test starts (2 CPUs, offline): the same episodes as the
local backend, a lost worker's episode retried once then failed, a killed driver resumed without
losing or repeating an episode, workers calling one vla-serve actor, and scenes generated as Ray tasks."""

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, VENV_BIN, cli_env
from vla.eval.evaluate import EvalSpec, evaluate

ray = pytest.importorskip("ray", reason="eval.backend=ray needs the ray extra (requirements.lock pins it)")

HOUSE = {"name": "house", "num_scenes": 2, "num_trials": 3, "width": 64, "height": 64, "use_meshes": False}
HOUSE_ARGS = ["env=house", "env.num_scenes=2", "env.width=64", "env.height=64", "env.use_meshes=false"]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def comparable(path: Path) -> list[dict]:
    """Episode rows in plan order without their wall-clock time."""
    rows = sorted(lines(path), key=lambda r: (r["task_id"], r["trial"]))
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(scope="module")
def cluster():
    env_vars = {k: os.environ[k] for k in ("MUJOCO_GL", "PYOPENGL_PLATFORM") if k in os.environ}
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.WARNING,
        runtime_env={"env_vars": {**env_vars, "PYTHONPATH": str(ROOT)}},
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def spec(out: Path, agent: dict, backend: str, workers: int = 2, **kw) -> EvalSpec:
    return EvalSpec(
        env={**HOUSE, "max_steps": kw.pop("max_steps", 15)},
        agent=agent,
        out=str(out),
        trials_per_task=3,
        workers=workers,
        backend=backend,
        ray={} if backend == "ray" else None,
        **kw,
    )


def test_ray_runs_the_episodes_the_local_backend_runs(cluster, tmp_path):
    local = evaluate(spec(tmp_path / "local", {"name": "random"}, "local"), progress=False)
    # 3 workers on 2 CPUs: the third waits for room and must neither hold an episode nor the run
    remote = evaluate(spec(tmp_path / "ray", {"name": "random"}, "ray", workers=3), progress=False)
    assert comparable(tmp_path / "ray" / "episodes.jsonl") == comparable(tmp_path / "local" / "episodes.jsonl")
    assert [(r["task_id"], r["trial"]) for r in comparable(tmp_path / "ray" / "episodes.jsonl")] == [
        (t, k) for t in (0, 1) for k in range(3)
    ]
    assert remote["complete"] and remote["episodes"] == local["episodes"] == 6
    assert remote["per_task"] == local["per_task"] and remote["path_m"] == local["path_m"]
    # a second run has nothing left to do
    again = evaluate(spec(tmp_path / "ray", {"name": "random"}, "ray"), progress=False)
    assert len(lines(tmp_path / "ray" / "episodes.jsonl")) == 6 and again["episodes"] == 6


def test_a_lost_worker_is_retried_once_then_its_episode_is_an_infrastructure_error(cluster, tmp_path):
    marker = tmp_path / "crashed-once"
    agent = {"name": "tests.agents_for_tests:CrashingAgent", "marker": str(marker), "always": 1, "once": 2}
    summary = evaluate(spec(tmp_path / "crash", agent, "ray", tasks=[0]), progress=False)
    recs = {r["trial"]: r for r in lines(tmp_path / "crash" / "episodes.jsonl")}
    (lost,) = lines(tmp_path / "crash" / "infra_errors.jsonl")  # not a result: not counted, rerun retries it
    assert lost["trial"] == 1 and lost["infra"] == "worker_lost" and 1 not in recs
    assert lost["error"].startswith("worker lost") and lost["error"].endswith("(2 attempts)")
    assert marker.exists()  # trial 2's first worker did die ...
    assert recs[2]["error"] is None and recs[2]["steps"] == 15  # ... and its retry ran the whole episode
    assert recs[0]["error"] is None and summary["errors"] == 0 and summary["infra_errors"] == 1
    assert summary["episodes"] == 2 and not summary["complete"]
    # the retried episode is the one a worker that never crashed runs
    plain = evaluate(spec(tmp_path / "plain", {"name": "random"}, "local", tasks=[0], workers=0), progress=False)
    assert plain["errors"] == 0
    assert comparable(tmp_path / "crash" / "episodes.jsonl")[1] == comparable(tmp_path / "plain" / "episodes.jsonl")[2]


def _free_cpus() -> float:
    return ray.available_resources().get("CPU", 0.0)


def test_killed_driver_resumes_without_losing_or_repeating(cluster, tmp_path):
    out = tmp_path / "killed"
    args = [
        *HOUSE_ARGS,
        "env.max_steps=40",
        "agent.name=tests.agents_for_tests:SlowRandomAgent",
        "eval.trials_per_task=3",
        "eval.workers=2",
        "eval.backend=ray",
        f"ray.address={cluster}",
        f"out={out}",
        "progress=false",
    ]
    cmd = [str(VENV_BIN / "vla-rollout"), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT)
    path = out / "episodes.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 2):
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = path.read_text().splitlines()
    assert 2 <= len(before) < 6
    deadline = time.time() + 60  # the driver's workers end with it: the cluster's CPUs come back
    while _free_cpus() < 2 and time.time() < deadline:
        time.sleep(0.2)
    assert _free_cpus() == 2
    r = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    after = path.read_text().splitlines()
    assert after[: len(before)] == before  # old lines untouched
    assert sorted((e["task_id"], e["trial"]) for e in map(json.loads, after)) == [
        (t, k) for t in (0, 1) for k in range(3)
    ]
    assert json.loads((out / "summary.json").read_text())["complete"] is True


def test_workers_play_one_served_agent(cluster, tmp_path):
    """ray.serve=true: the seeded random agent in a vla-serve actor, two workers its clients, takes the
    steps it takes in-process."""
    served = spec(tmp_path / "served", {"name": "random"}, "ray", tasks=[1])
    served.ray = {"serve": True, "serve_num_cpus": 0}
    evaluate(served, progress=False)
    plain = evaluate(spec(tmp_path / "plain", {"name": "random"}, "local", tasks=[1], workers=0), progress=False)
    assert plain["errors"] == 0
    assert comparable(tmp_path / "served" / "episodes.jsonl") == comparable(tmp_path / "plain" / "episodes.jsonl")
    assert json.loads((tmp_path / "served" / "run.json").read_text())["agent"] == {"name": "random"}


def test_a_worker_that_cannot_start_stops_the_run_with_its_reason(cluster, tmp_path):
    with pytest.raises(ValueError, match="a Ray worker could not start: .*cannot import agent"):
        evaluate(spec(tmp_path / "bad", {"name": "tests.agents_for_tests:NoSuchAgent"}, "ray"), progress=False)


def test_bad_ray_options_are_one_clear_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "vla.cli.rollout", *HOUSE_ARGS, "eval.backend=ray", "ray.retries=-1", f"out={tmp_path}"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "ray.retries must be >= 0" in r.stderr and "Traceback" not in r.stderr


def test_scenes_generated_as_ray_tasks_are_the_local_generation(cluster, tmp_path):
    from vla.gst.cli import main as gst_main

    args = [
        "generate",
        "split=test",
        "scenes=2",
        "progress=false",
        "env.use_meshes=false",
        "env.width=96",
        "env.height=96",
        "gen.views=1",
        "gen.stride=4",
        "gen.per_scene={EDv: 1, EDs: 1, GPs: 1, Pos: 1, Traj: 1}",
    ]
    assert gst_main([*args, f"out={tmp_path / 'local'}"]) == 0
    assert gst_main([*args, f"out={tmp_path / 'ray'}", "backend=ray"]) == 0
    for name in ("questions.jsonl", "generation.jsonl"):
        local, remote = (tmp_path / d / name for d in ("local", "ray"))
        assert remote.read_text() == local.read_text() and local.read_text()  # same lines, same order
    media = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*") if p.is_file())
    assert media == sorted(p.relative_to(tmp_path / "ray") for p in (tmp_path / "ray").rglob("*") if p.is_file())
    assert all((tmp_path / "ray" / p).read_bytes() == (tmp_path / "local" / p).read_bytes() for p in media)


def test_demonstrations_recorded_by_ray_workers_are_the_local_ones(cluster, tmp_path):
    """record= with backend=ray: workers write each episode's file into the record dir, the driver
    assembles the per-task files; the scripted expert's demos equal those of the local backend."""
    import h5py
    import numpy as np

    env = {**HOUSE, "seed": 900001, "max_steps": 60, "num_trials": 2}
    for backend in ("local", "ray"):
        s = EvalSpec(env=env, agent={"name": "scripted"}, out=str(tmp_path / f"{backend}_out"), trials_per_task=2,
                     workers=2, backend=backend, ray={} if backend == "ray" else None,
                     record=str(tmp_path / f"{backend}_demos"))  # fmt: skip
        assert evaluate(s, progress=False)["successes"] == 2
    (a,) = (tmp_path / "local_demos").glob("*_demo.hdf5")
    (b,) = (tmp_path / "ray_demos").glob("*_demo.hdf5")
    assert a.name == b.name
    with h5py.File(a) as fa, h5py.File(b) as fb:
        assert fa["data"].attrs["num_demos"] == fb["data"].attrs["num_demos"] == 2
        for d in ("demo_0", "demo_1"):
            np.testing.assert_array_equal(fa[f"data/{d}/actions"][:], fb[f"data/{d}/actions"][:])
            np.testing.assert_array_equal(fa[f"data/{d}/obs/state"][:], fb[f"data/{d}/obs/state"][:])
