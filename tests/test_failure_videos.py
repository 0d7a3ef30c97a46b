"""scripts/failure_videos.py: videos of a finished run's failed episodes, replayed with rendering on."""

import json
import subprocess
import sys

import imageio.v2 as imageio

from tests.conftest import ROOT, cli_env

sys.path.insert(0, str(ROOT / "scripts"))

from failure_videos import failures  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"


def _write_run(path, rows, tail=""):
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"env": {"name": "libero"}, "agent": {"name": "random"}}))
    rows = [{"suite": "libero_goal", "task": "", "steps": 1, "seconds": 0.1, "error": None, **r} for r in rows]
    (path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def test_failures_are_picked_per_task_in_trial_order_and_successes_skipped(tmp_path):
    rows = [
        {"task_id": t, "trial": k, "success": ok}
        for t, k, ok in [(1, 3, False), (0, 2, False), (0, 0, True), (1, 0, False), (0, 1, False), (1, 5, True)]
    ]
    _write_run(tmp_path / "run", rows, tail='{"task_id": 2, "trial": 0, "succ')  # a killed run's torn last line
    picked = [(r["task_id"], r["trial"]) for r in failures(tmp_path / "run", None, None)]
    assert picked == [(0, 1), (0, 2), (1, 0), (1, 3)]
    assert [(r["task_id"], r["trial"]) for r in failures(tmp_path / "run", 1, None)] == [(0, 1), (1, 0)]
    assert [(r["task_id"], r["trial"]) for r in failures(tmp_path / "run", None, [1])] == [(1, 0), (1, 3)]


def test_a_missing_run_is_a_clear_error(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "failure_videos.py"), str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_videos_of_a_real_rollouts_failures(tmp_path):
    """A real vla-rollout run (rendering off, a random agent failing every episode), then its
    first failure replayed with rendering on: one video with a frame per step plus the reset."""
    out = tmp_path / "run"
    args = [
        "agent=random",
        "env.suite=libero_spatial",
        "env.render=false",
        "env.hard_reset=false",
        "env.resolution=64",
        "env.max_steps=6",
        "eval.tasks=[0]",
        "eval.trials_per_task=2",
        f"out={out}",
        "progress=false",
    ]
    r = subprocess.run([str(VENV_BIN / "vla-rollout"), *args], capture_output=True, text=True, env=cli_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run(
        [str(VENV_BIN / "python"), str(ROOT / "scripts" / "failure_videos.py"), str(out), "--per-task", "1"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    videos = sorted((out / "failure_videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["libero_spatial_task000_trial000_failure.mp4"]
    reader = imageio.get_reader(videos[0])
    assert reader.count_frames() == 7
    frame = reader.get_data(0)
    assert frame.shape[0] == 64 and frame.shape[1] >= 64 and frame.std() > 5  # a rendered scene, not a blank
