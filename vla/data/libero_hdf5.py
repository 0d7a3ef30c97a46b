"""Read LIBERO HDF5 demonstration files: the official datasets, OpenVLA's "no-noops" regeneration,
and what ``record=`` / ``vla-data`` write.

All three share the per-demo layout of LIBERO's ``create_dataset.py`` (``data/demo_<i>/actions``,
``obs/agentview_rgb``, ``obs/eye_in_hand_rgb``, ``obs/ee_states``, ``obs/gripper_states``, ...).
They differ in what else they carry:

* official: file attributes (``problem_info``, ``env_args``, ``macros_image_convention`` =
  ``"opengl"``), 128 px images in OpenGL orientation;
* OpenVLA no-noops (``<suite>_no_noops/<task>_demo.hdf5``): no file attributes at all, 256 px,
  no-op actions dropped, failed replays missing from the demo numbering, images still in OpenGL
  orientation (OpenVLA turns them by 180 degrees when it converts to RLDS);
* ours: the official attributes plus depth, masks and camera matrices (:mod:`vla.rollout.record`).

Episodes come out as :class:`~vla.data.episode.DemoEpisode`, images in the evaluation protocol's
orientation. The instruction is the file's ``problem_info``; without it (no-noops files), the
task is looked up by the file's name in LIBERO's benchmarks.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from envs.orientation import ORIENTATIONS, reorient

from .episode import DemoEpisode

PROTOCOL = "rot180"
CAMERA_DATASETS = {"agentview": "agentview_rgb", "wrist": "eye_in_hand_rgb"}


@lru_cache(maxsize=1)
def task_languages() -> dict[str, str]:
    """LIBERO task name -> instruction, over every suite."""
    from envs.libero import suites

    out = {}
    for suite in suites.SUITES:
        bench = suites.benchmark(suite)
        for i in range(bench.n_tasks):
            t = bench.get_task(i)
            out[t.name] = t.language
    return out


def stored_orientation(attrs) -> str:
    """How a file stores its images: our ``image_orientation`` attribute, else LIBERO's
    ``macros_image_convention``, else OpenGL (the official files and OpenVLA's regeneration)."""
    for key in ("image_orientation", "macros_image_convention"):
        if key in attrs:
            value = attrs[key]
            value = value.decode() if isinstance(value, bytes) else str(value)
            if value not in ORIENTATIONS:
                raise ValueError(f"unknown image orientation {value!r} in attribute {key!r}")
            return value
    return "opengl"


def _instruction(f: h5py.File, path: Path) -> str:
    attrs = f["data"].attrs
    if "problem_info" in attrs:
        return str(json.loads(attrs["problem_info"])["language_instruction"]).strip().strip('"')
    if "language_instruction" in attrs:
        return str(attrs["language_instruction"])
    name = path.name.removesuffix(".hdf5").removesuffix("_demo")
    langs = task_languages()
    if name not in langs:
        raise ValueError(f"{path}: no problem_info attribute and {name!r} is not a LIBERO task name")
    return langs[name]


def demo_keys(f: h5py.File) -> list[str]:
    """``demo_<i>`` groups in increasing ``i`` (as LIBERO orders them; gaps allowed)."""
    keys = [k for k in f["data"].keys() if re.fullmatch(r"demo_\d+", k)]
    return sorted(keys, key=lambda k: int(k[5:]))


def variant(f: h5py.File) -> str:
    attrs = f["data"].attrs
    if "env_args" not in attrs:
        return "no_noops"  # OpenVLA's regeneration writes no file attributes
    return "vla_spatial" if "env_image_orientation" in attrs or "image_orientation" in attrs else "official"


def read_libero_hdf5(path: str | Path, images: bool = True, extra: bool = False) -> Iterator[DemoEpisode]:
    """The demonstrations of one LIBERO HDF5 file, in demo order. ``images=False`` skips the
    camera arrays (fast statistics); ``extra=True`` adds joint states, sim states and, where
    present, depth / masks / camera matrices (in the file's own orientation)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no LIBERO HDF5 file at {path}")
    with h5py.File(path, "r") as f:
        if "data" not in f:
            raise ValueError(f"{path} is not a LIBERO dataset: no 'data' group")
        task = _instruction(f, path)
        orientation = stored_orientation(f["data"].attrs)
        kind = variant(f)
        for key in demo_keys(f):
            demo = f["data"][key]
            obs = demo["obs"]
            if "ee_states" in obs:
                ee = obs["ee_states"][()]
            else:
                ee = np.concatenate([obs["ee_pos"][()], obs["ee_ori"][()]], axis=1)
            state = np.concatenate([ee, obs["gripper_states"][()]], axis=1).astype(np.float32)
            ims = {}
            if images:
                for cam, name in CAMERA_DATASETS.items():
                    if name in obs:
                        stack = reorient(obs[name][()], orientation, PROTOCOL, stacked=True)
                        ims[cam] = np.ascontiguousarray(stack)
            ext = {}
            if extra:
                for name in ("joint_states",):
                    if name in obs:
                        ext[name] = obs[name][()]
                for name in ("states", "robot_states", "rewards", "dones"):
                    if name in demo:
                        ext[name] = demo[name][()]
                for name in obs:
                    if name.endswith(("_depth", "_instance", "_K", "_T_world_cam")):
                        ext[name] = obs[name][()]
            meta = {
                "file": str(path),
                "demo": key,
                "task_name": path.name.removesuffix(".hdf5").removesuffix("_demo"),
                "variant": kind,
                "stored_orientation": orientation,
            }
            for a in ("trial", "num_samples"):
                if a in demo.attrs:
                    meta[a] = int(demo.attrs[a])
            yield DemoEpisode(task=task, actions=demo["actions"][()], state=state, images=ims, extra=ext, meta=meta)


def read_libero_dir(root: str | Path, **kw) -> Iterator[DemoEpisode]:
    """Every ``*_demo.hdf5`` under ``root`` (a suite's directory), in name order."""
    root = Path(root)
    files = sorted(root.glob("*_demo.hdf5"))
    if not files:
        raise FileNotFoundError(f"no *_demo.hdf5 files in {root}")
    for p in files:
        yield from read_libero_hdf5(p, **kw)
