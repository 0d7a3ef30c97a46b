"""The rollout loop and vla-rollout: records, summary, resume after kill -9, failures, videos, demos."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import imageio.v2 as imageio
import numpy as np
import pytest

from tests.conftest import VENV_BIN, cli_env
from vla.eval.evaluate import EvalSpec, evaluate
from vla.eval.store import EpisodeStore

FAST_ENV = {"name": "libero", "suite": "libero_spatial", "render": False, "hard_reset": False, "max_steps": 12}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_cli(*args, timeout=600):
    return subprocess.run(
        [str(VENV_BIN / "vla-rollout"), *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=timeout,
        cwd=Path(__file__).parents[1],
    )


def test_cli_writes_episodes_and_summary_and_resumes(tmp_path):
    out = tmp_path / "run"
    args = [
        "agent=random",
        "env.render=false",
        "env.hard_reset=false",
        "env.max_steps=10",
        "eval.tasks=[0,2]",
        "eval.trials_per_task=2",
        "eval.workers=2",
        f"out={out}",
        "progress=false",
    ]
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = lines(out / "episodes.jsonl")
    assert sorted((e["task_id"], e["trial"]) for e in recs) == [(0, 0), (0, 1), (2, 0), (2, 1)]
    for e in recs:
        assert {"suite", "task_id", "task", "trial", "success", "steps", "seconds", "error"} <= set(e)
        assert e["suite"] == "libero_spatial" and e["error"] is None and e["steps"] == 10 and e["success"] is False
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "libero" and summary["agent"] == "random"
    assert summary["episodes"] == 4 and summary["success_rate"] == 0.0 and summary["complete"] is True
    assert set(summary["per_task"]) == {"0", "2"} and summary["per_task"]["2"]["episodes"] == 2
    assert summary["per_task"]["0"]["task"].startswith("pick_up_the_black_bowl")
    # where the failures stopped: 10 random steps never lift the bowl, the goal's first stage
    assert all(e["failed_stage"] == "pick akita_black_bowl_1" and e["stages_reached"] == 0 for e in recs)
    assert summary["per_task"]["0"]["failed_at"] == {"pick akita_black_bowl_1": 2}
    # the same command again runs nothing new
    mtime = (out / "episodes.jsonl").stat().st_mtime_ns
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(lines(out / "episodes.jsonl")) == 4
    assert (out / "episodes.jsonl").stat().st_mtime_ns == mtime
    # a different agent in the same directory is refused
    r = run_cli(*[a if a != "agent=random" else "agent=scripted" for a in args])
    assert r.returncode == 2 and "different run" in r.stderr


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if text in (p / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def test_kill_9_then_resume_loses_only_in_flight_and_never_repeats(tmp_path):
    out = tmp_path / "killed"
    args = [
        "agent.name=tests.agents_for_tests:SlowRandomAgent",
        "env.render=false",
        "env.hard_reset=false",
        "env.max_steps=20",
        "eval.tasks=[1]",
        "eval.trials_per_task=6",
        "eval.workers=2",
        f"out={out}",
        "progress=false",
    ]
    proc = subprocess.Popen(
        [str(VENV_BIN / "vla-rollout"), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=Path(__file__).parents[1],
    )
    path = out / "episodes.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 2):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = {(e["task_id"], e["trial"]) for e in lines(path)}
    assert 2 <= len(done_before) < 6
    # workers die with their parent
    deadline = time.time() + 10
    while _processes_mentioning(str(out)) and time.time() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(out)) == []
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = lines(path)
    keys = [(e["task_id"], e["trial"]) for e in recs]
    assert sorted(keys) == [(1, k) for k in range(6)]  # every episode exactly once
    assert [k for k in keys[: len(done_before)]] and set(keys[: len(done_before)]) == done_before  # old lines untouched


def test_torn_last_line_is_dropped_on_resume(tmp_path):
    path = tmp_path / "episodes.jsonl"
    good = {
        "suite": "s",
        "task_id": 0,
        "task": "t",
        "trial": 0,
        "success": True,
        "steps": 3,
        "seconds": 1.0,
        "error": None,
    }
    path.write_text(json.dumps(good) + "\n" + '{"suite": "s", "task_id": 0, "task": "t", "tri')
    store = EpisodeStore(path)
    assert len(store) == 1 and (0, 0) in store and (0, 1) not in store
    store.append({**good, "trial": 1})
    store.close()
    assert [e["trial"] for e in lines(path)] == [0, 1]
    with pytest.raises(ValueError, match="already recorded"):
        EpisodeStore(path).append(good)


def test_agent_and_simulator_failures_fail_only_their_episode(tmp_path):
    """A worker that dies (a simulator segfault) is replaced and its episode run once more; dying on it
    twice is an infrastructure error: not a result, not in the success rate, listed in the summary."""
    marker = tmp_path / "crashed-once"
    spec = EvalSpec(
        env=FAST_ENV,
        agent={"name": "tests.agents_for_tests:CrashingAgent", "marker": str(marker), "always": 1, "once": 2},
        out=str(tmp_path / "crash"),
        tasks=[0],
        trials_per_task=3,
        workers=1,
    )
    summary = evaluate(spec, progress=False)
    recs = {e["trial"]: e for e in lines(tmp_path / "crash" / "episodes.jsonl")}
    assert sorted(recs) == [0, 2] and marker.exists()  # trial 2's first worker died, its retry finished
    assert recs[0]["error"] is None and recs[2]["error"] is None and recs[2]["steps"] == 12
    (lost,) = lines(tmp_path / "crash" / "infra_errors.jsonl")
    assert (lost["trial"], lost["infra"]) == (1, "worker_lost")
    assert lost["error"] == "worker process died (killed by SIGSEGV) (2 attempts)"
    assert summary["errors"] == 0 and summary["episodes"] == 2 and summary["success_rate"] == 0.0
    assert summary["infra_errors"] == 1 and summary["complete"] is False

    spec = EvalSpec(
        env=FAST_ENV,
        agent={"name": "tests.agents_for_tests:NanAgent"},
        out=str(tmp_path / "nan"),
        tasks=[0],
        trials_per_task=1,
        workers=0,
    )
    evaluate(spec, progress=False)
    (rec,) = lines(tmp_path / "nan" / "episodes.jsonl")
    assert rec["success"] is False and rec["steps"] == 2 and "NaN" in rec["error"]

    spec = EvalSpec(
        env=FAST_ENV,
        agent={"name": "tests.agents_for_tests:WrongShapeAgent"},
        out=str(tmp_path / "shape"),
        tasks=[0],
        trials_per_task=1,
        workers=0,
    )
    evaluate(spec, progress=False)
    (rec,) = lines(tmp_path / "shape" / "episodes.jsonl")
    assert "shape (7,)" in rec["error"] and rec["steps"] == 0


def test_an_env_that_cannot_be_built_is_not_a_result_and_the_same_run_retries_it(tmp_path):
    from envs.registry import register
    from tests import agents_for_tests

    register("libero_unbuildable", "tests.agents_for_tests:UnbuildableTaskFamily")
    agents_for_tests.UNBUILDABLE.add(1)
    env = {**FAST_ENV, "name": "libero_unbuildable"}
    # in this process (workers=0): UNBUILDABLE is this process's state, which a fork-server worker
    # (used once the process has rendered) would not see
    spec = EvalSpec(
        env=env, agent={"name": "random"}, out=str(tmp_path / "r"), tasks=[0, 1], trials_per_task=1, workers=0
    )
    summary = evaluate(spec, progress=False)
    assert [(r["task_id"], r["error"]) for r in lines(tmp_path / "r" / "episodes.jsonl")] == [(0, None)]
    (rec,) = lines(tmp_path / "r" / "infra_errors.jsonl")
    assert rec["task_id"] == 1 and rec["infra"] == "env_construction" and "cannot build task 1" in rec["error"]
    assert summary["episodes"] == 1 and summary["errors"] == 0 and summary["infra_errors"] == 1
    assert summary["not_counted"][0]["task_id"] == 1 and summary["complete"] is False

    agents_for_tests.UNBUILDABLE.clear()  # the env can be built again: the same run runs the episode
    summary = evaluate(spec, progress=False)
    assert [(r["task_id"], r["error"]) for r in lines(tmp_path / "r" / "episodes.jsonl")] == [(0, None), (1, None)]
    assert summary["episodes"] == 2 and summary["infra_errors"] == 0 and summary["complete"] is True


def test_episode_timeout_replaces_the_worker(tmp_path):
    spec = EvalSpec(
        env={**FAST_ENV, "max_steps": 100000},
        agent={"name": "tests.agents_for_tests:SlowRandomAgent"},
        out=str(tmp_path / "slow"),
        tasks=[0],
        trials_per_task=2,
        workers=1,
        episode_timeout_s=3,
    )
    summary = evaluate(spec, progress=False)
    recs = lines(tmp_path / "slow" / "episodes.jsonl")
    assert len(recs) == 2 and all(r["error"] == "episode timed out after 3 s" for r in recs)
    assert summary["complete"] is True


def test_a_suspended_run_does_not_time_out_the_episodes_it_was_running(tmp_path, monkeypatch):
    """A long run paused (SIGSTOP / Ctrl-Z, a host asleep) and resumed: the time it stood still is no
    episode's. Here the clock jumps 10,000 s while the episode runs, against a 600 s timeout."""
    from vla.eval.backends import local

    real, calls = time.time, [0]

    class Clock:  # the scheduler's clock: from its third reading on (the episode running), 10,000 s later
        def __getattr__(self, name):
            return getattr(time, name)

        def time(self):
            calls[0] += 1
            return real() + (10_000.0 if calls[0] >= 3 else 0.0)

    monkeypatch.setattr(local, "time", Clock())
    spec = EvalSpec(
        env={**FAST_ENV, "max_steps": 150},  # ~3 s of slow steps: running when the clock jumps
        agent={"name": "tests.agents_for_tests:SlowRandomAgent"},
        out=str(tmp_path / "paused"),
        tasks=[0],
        trials_per_task=1,
        workers=1,
        episode_timeout_s=600,
    )
    evaluate(spec, progress=False)
    recs = lines(tmp_path / "paused" / "episodes.jsonl")
    assert calls[0] >= 3 and [r["error"] for r in recs] == [None]


@pytest.mark.parametrize(
    "args, message",
    [
        (["env.suite=libero_nope"], "unknown LIBERO suite"),
        (["eval.tasks=[42]"], "unknown task id"),
        (["eval.trials_per_task=51"], "only 50 initial states"),
        (["eval.videos=sometimes"], "eval.videos must be one of"),
        (["agent=nope"], "unknown agent 'nope' (agent=NAME); choose from dagger, memory"),
        (["out=/proc/forbidden"], "not writable"),
    ],
)
def test_cli_bad_input_is_one_clear_line(args, message):
    r = run_cli(*args, "progress=false", timeout=120)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_videos_of_the_filmed_trials_and_no_demo_of_a_failed_one(tmp_path):
    """Rendered random episodes (they fail): with videos=all and video_trials=1 a video of the first trial
    run (official state 1) and none of the next, and record= keeps nothing."""
    env = {"name": "libero", "suite": "libero_object", "resolution": 64, "hard_reset": False, "max_steps": 4}
    spec = EvalSpec(
        env=env,
        agent={"name": "random"},
        out=str(tmp_path / "v"),
        tasks=[0],
        trials_per_task=2,
        first_trial=1,
        workers=0,
        videos="all",
        video_trials=1,
        record=str(tmp_path / "demos"),
    )
    evaluate(spec, progress=False)
    recs = lines(tmp_path / "v" / "episodes.jsonl")
    assert [(r["trial"], r["success"], r["error"], r["steps"]) for r in recs] == [
        (1, False, None, 4),
        (2, False, None, 4),
    ]
    assert recs[0]["video"] == "libero_object_task000_trial001_failure.mp4" and "video" not in recs[1]
    (video,) = (tmp_path / "v" / "videos").glob("*.mp4")
    frames = imageio.mimread(video)
    assert len(frames) == 5 and frames[0].shape == (64, 128, 3)  # reset + 4 steps, two cameras side by side
    assert list((tmp_path / "demos").rglob("*.hdf5")) == []  # neither a demo nor a leftover temporary file


def test_a_successful_episode_becomes_a_demo_in_libero_layout(tmp_path):
    """The scripted expert solves libero_object task 3 (one 32-pixel camera, a few seconds): its episode is kept."""
    env = {"name": "libero", "suite": "libero_object", "hard_reset": False, "resolution": 32, "cameras": ["agentview"]}
    env.update(depth=False, segmentation=False)
    spec = EvalSpec(
        env=env,
        agent={"name": "scripted"},
        out=str(tmp_path / "e"),
        tasks=[3],
        trials_per_task=1,
        workers=1,  # render in a worker: EGL's threads in the test process would hang later forked renderers
        record=str(tmp_path / "demos"),
    )
    evaluate(spec, progress=False)
    (rec,) = lines(tmp_path / "e" / "episodes.jsonl")
    assert rec["success"] is True and rec["error"] is None
    n = rec["steps"]
    (h5,) = (tmp_path / "demos").glob("*_demo.hdf5")
    assert h5.name == "pick_up_the_bbq_sauce_and_place_it_in_the_basket_demo.hdf5"
    with h5py.File(h5) as f:
        data = f["data"]
        assert data.attrs["num_demos"] == 1 and data.attrs["total"] == n
        assert "bbq sauce" in data.attrs["language_instruction"]
        assert json.loads(data.attrs["problem_info"])["problem_name"] == "libero_floor_manipulation"
        assert data.attrs["bddl_file_content"].startswith("(define")
        demo = data["demo_0"]
        assert demo.attrs["num_samples"] == n and demo["actions"].shape == (n, 7)
        assert demo["states"].shape[0] == n and demo["robot_states"].shape == (n, 9)
        np.testing.assert_array_equal(demo["dones"][:], [0] * (n - 1) + [1])  # it succeeded at its last step
        np.testing.assert_array_equal(demo.attrs["init_state"], demo["states"][0])
        obs = demo["obs"]
        assert obs["ee_states"].shape == (n, 6) and obs["gripper_states"].shape == (n, 2)
        assert obs["joint_states"].shape == (n, 7) and obs["agentview_rgb"].shape == (n, 32, 32, 3)


@pytest.mark.slow
def test_rendered_demos_keep_every_camera_stream(tmp_path):
    """A rendered expert episode (~1 min here): images, depth, masks and camera matrices per step."""
    env = {"name": "libero", "suite": "libero_object", "resolution": 64, "hard_reset": False}
    spec = EvalSpec(
        env=env,
        agent={"name": "scripted"},
        out=str(tmp_path / "e"),
        tasks=[3],
        trials_per_task=1,
        workers=0,
        record=str(tmp_path / "demos"),
    )
    evaluate(spec, progress=False)
    (rec,) = lines(tmp_path / "e" / "episodes.jsonl")
    assert rec["success"] is True, rec
    n = rec["steps"]
    (h5,) = (tmp_path / "demos").glob("*_demo.hdf5")
    with h5py.File(h5) as f:
        demo = f["data/demo_0"]
        obs = demo["obs"]
        assert obs["agentview_rgb"].shape == (n, 64, 64, 3) and obs["eye_in_hand_rgb"].dtype == np.uint8
        assert obs["agentview_depth"].shape == (n, 64, 64) and obs["agentview_instance"].dtype == np.int32
        assert obs["agentview_K"].shape == (n, 3, 3) and obs["eye_in_hand_T_world_cam"].shape == (n, 4, 4)
        # the wrist camera moves with the arm: its pose is recorded per step
        assert not np.allclose(obs["eye_in_hand_T_world_cam"][0], obs["eye_in_hand_T_world_cam"][-1])
        assert json.loads(demo.attrs["instance_names"])["1"] == "bbq_sauce_1"


def test_workers_are_not_forked_from_a_process_that_rendered(tmp_path):
    """A worker forked after this process rendered with software GL inherits Mesa's locks without its
    threads and hangs in its first render: such a process starts its workers from a fork server."""
    code = (
        "import mujoco\n"
        "from vla.eval.backends.local import _start_method\n"
        "before = _start_method()\n"
        "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\"1\"/></worldbody></mujoco>')\n"
        "r = mujoco.Renderer(m, 16, 16); r.update_scene(mujoco.MjData(m)); r.render()\n"
        "print(before, _start_method())\n"
    )
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=root, timeout=99
    )
    assert r.stdout.split() == ["fork", "forkserver"], r.stdout + r.stderr[-2000:]


def test_a_fork_server_worker_knows_the_families_registered_at_run_time(tmp_path, monkeypatch):
    """Workers started from a fork server (this process rendered, or runs Ray) begin fresh: the env
    families this process registered must reach them, or every episode is an env it cannot build."""
    from envs.registry import register
    from vla.eval.backends import local

    register("libero_alias", "envs.libero.family:LiberoFamily")
    monkeypatch.setattr(local, "_start_method", lambda: "forkserver")
    env = {**FAST_ENV, "name": "libero_alias", "max_steps": 2}
    spec = EvalSpec(env=env, agent={"name": "random"}, out=str(tmp_path / "r"), tasks=[0], trials_per_task=1)
    summary = evaluate(spec, progress=False)
    assert [(r["task_id"], r["error"]) for r in lines(tmp_path / "r" / "episodes.jsonl")] == [(0, None)]
    assert summary["infra_errors"] == 0
