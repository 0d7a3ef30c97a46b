"""OpenVLA's "no-noops" LIBERO datasets: the same HDF5 layout with no-op transitions dropped.

OpenVLA's ``regenerate_libero_dataset.py`` replays the official demos at 256 px, drops every
transition whose action is a no-op -- all but the gripper dimension near zero (norm < 1e-4) *and*
the gripper command equal to the previous kept one (so a pause that opens or closes the gripper
stays) -- keeps only successful replays, and writes ``<suite>_no_noops/<task>_demo.hdf5`` with no
file attributes, images still in OpenGL orientation (turned by 180 degrees later, when it converts
to RLDS). :func:`write_no_noops` turns files in the official layout (ours or LIBERO's) into that.
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np

NOOP_THRESHOLD = 1e-4
STEP_DATASETS = ("actions", "states", "robot_states", "rewards", "dones")
OBS_DATASETS = ("gripper_states", "joint_states", "ee_states", "ee_pos", "ee_ori", "agentview_rgb", "eye_in_hand_rgb")


def is_noop(action, prev_action=None, threshold: float = NOOP_THRESHOLD) -> bool:
    """OpenVLA's criterion: no motion, and the gripper command unchanged from the previous kept action."""
    action = np.asarray(action)
    if prev_action is None:
        return bool(np.linalg.norm(action[:-1]) < threshold)
    return bool(np.linalg.norm(action[:-1]) < threshold and action[-1] == prev_action[-1])


def keep_mask(actions: np.ndarray, threshold: float = NOOP_THRESHOLD) -> np.ndarray:
    """Which transitions survive the filter (compared with the last *kept* action, as OpenVLA does)."""
    keep = np.zeros(len(actions), dtype=bool)
    prev = None
    for t, a in enumerate(actions):
        if not is_noop(a, prev, threshold):
            keep[t] = True
            prev = a
    return keep


def write_no_noops(src: str | Path, dst: str | Path, threshold: float = NOOP_THRESHOLD) -> dict[str, int]:
    """Write ``dst`` in the no-noops layout from ``src`` (official layout). Demo numbers are kept
    (a demo that keeps no transition is dropped, leaving a gap, as failed replays do). Returns
    counts: demos in/out, transitions in/out."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".hdf5.tmp")
    counts = {"demos_in": 0, "demos_out": 0, "steps_in": 0, "steps_out": 0}
    with h5py.File(src, "r") as fin, h5py.File(tmp, "w") as fout:
        grp = fout.create_group("data")
        for key in sorted(fin["data"].keys(), key=lambda k: int(k[5:]) if k[5:].isdigit() else -1):
            if not key.startswith("demo_"):
                continue
            demo = fin["data"][key]
            actions = demo["actions"][()]
            keep = keep_mask(actions, threshold)
            counts["demos_in"] += 1
            counts["steps_in"] += len(actions)
            if not keep.any():
                continue
            out = grp.create_group(key)
            for name in STEP_DATASETS:
                if name in demo:
                    out.create_dataset(name, data=demo[name][()][keep])
            n = int(keep.sum())
            done = np.zeros(n, np.uint8)
            done[-1] = 1
            for name in ("rewards", "dones"):  # the last kept step is the successful one
                if name in out:
                    del out[name]
                out.create_dataset(name, data=done)
            obs = out.create_group("obs")
            for name in (
                "gripper_states",
                "joint_states",
                "ee_states",
                "ee_pos",
                "ee_ori",
                "agentview_rgb",
                "eye_in_hand_rgb",
            ):
                if name in demo["obs"]:
                    obs.create_dataset(name, data=demo["obs"][name][()][keep])
            counts["demos_out"] += 1
            counts["steps_out"] += n
    os.replace(tmp, dst)
    return counts
