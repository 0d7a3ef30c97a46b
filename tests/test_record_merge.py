"""merge_demos (vla/rollout/record.py): a rerun over finished episodes leaves the task files as they are
(their mtime keys the memory caches built from them), a new or rerun episode merges again."""

from __future__ import annotations

import os

import h5py
import numpy as np

from vla.rollout.record import merge_demos


def _episode(root, trial: int, steps: int, value: int | None = None) -> None:
    d = root / ".episodes"
    d.mkdir(parents=True, exist_ok=True)
    with h5py.File(d / f"suite_task000_trial{trial:03d}.hdf5", "w") as f:
        g = f.create_group("data")
        g.attrs["env_name"] = "test"
        demo = g.create_group("demo_0")
        demo.attrs["num_samples"] = steps
        demo.create_dataset("actions", data=np.full((steps, 2), trial if value is None else value, np.float32))


def _demos(path) -> list[int]:
    with h5py.File(path, "r") as f:
        return [int(f[f"data/demo_{i}/actions"][0, 0]) for i in range(int(f["data"].attrs["num_demos"]))]


def test_a_rerun_over_finished_episodes_rewrites_nothing(tmp_path):
    for trial, steps in ((0, 3), (2, 4)):
        _episode(tmp_path, trial, steps)
    (out,) = merge_demos(tmp_path, {0: "task"})
    assert _demos(out) == [0, 2]
    t = out.stat().st_mtime_ns  # the timestamps set by hand: no reliance on the clock's granularity
    for p in (tmp_path / ".episodes").glob("*.hdf5"):
        os.utime(p, ns=(t - 10**9, t - 10**9))
    assert merge_demos(tmp_path, {0: "task"}) == [out] and out.stat().st_mtime_ns == t  # kept, not rewritten
    _episode(tmp_path, 1, 5)  # a new episode, newer than the merge
    new = tmp_path / ".episodes" / "suite_task000_trial001.hdf5"
    os.utime(new, ns=(t + 10**9, t + 10**9))
    merge_demos(tmp_path, {0: "task"})
    assert _demos(out) == [0, 1, 2]
    with h5py.File(out, "r") as f:
        assert f["data"].attrs["total"] == 12
    # an episode gone (as many demos no more): merged again though nothing is newer
    new.unlink()
    os.utime(out, ns=(t + 2 * 10**9, t + 2 * 10**9))
    merge_demos(tmp_path, {0: "task"})
    assert _demos(out) == [0, 2]
    # an episode run again (the same trial, the same count, newer): merged again
    _episode(tmp_path, 0, 3, value=9)
    os.utime(tmp_path / ".episodes" / "suite_task000_trial000.hdf5", ns=(t + 3 * 10**9, t + 3 * 10**9))
    merge_demos(tmp_path, {0: "task"})
    assert _demos(out) == [9, 2]


def test_a_finished_recording_without_its_episode_files_keeps_its_task_files(tmp_path):
    """Once a recording is complete its ``.episodes/`` may go (it doubles the recording's disk): a task
    with no per-episode file left keeps its task file as it is, so a resumed record stage (every episode
    finished, nothing recorded) rewrites nothing."""
    import shutil

    for trial, steps in ((0, 3), (1, 4)):
        _episode(tmp_path, trial, steps)
    (out,) = merge_demos(tmp_path, {0: "task"})
    t = out.stat().st_mtime_ns
    shutil.rmtree(tmp_path / ".episodes")
    assert merge_demos(tmp_path, {0: "task"}) == []
    assert _demos(out) == [0, 1] and out.stat().st_mtime_ns == t
