"""Demonstrations as HDF5, in the layout of the official LIBERO datasets, plus what the memory needs.

Per task one file ``<task name>_demo.hdf5``, readable unchanged by LIBERO's and robomimic's own
loaders (``libero.lifelong.datasets.get_dataset``, ``robomimic.utils.dataset.SequenceDataset``)::

    data/                       attrs: env_name, problem_info, macros_image_convention ("opengl"),
                                       bddl_file_name, bddl_file_content, env_args (JSON; its
                                       env_kwargs rebuild the task with LIBERO's TASK_MAPPING),
                                       language_instruction, image_orientation ("opengl"),
                                       env_image_orientation (what the env delivered: "rot180"),
                                       env_spec (the EnvSpec as JSON), num_demos, total
    data/demo_<i>/actions       (T, 7) float64
    data/demo_<i>/states        (T, S) flattened MuJoCo states (time, qpos, qvel)
    data/demo_<i>/robot_states  (T, 9) gripper qpos, eef pos, eef quat
    data/demo_<i>/rewards, dones (T,) uint8 (1 on the last, successful step)
    data/demo_<i>/obs/agentview_rgb, eye_in_hand_rgb           (T, H, W, 3) uint8
    data/demo_<i>/obs/ee_states, ee_pos, ee_ori, gripper_states, joint_states, state
    data/demo_<i>/obs/<cam>_depth (T, H, W) float32 metres, <cam>_instance (T, H, W) int32,
                      <cam>_K (T, 3, 3), <cam>_T_world_cam (T, 4, 4)
                                attrs: num_samples, init_state, model_file, trial,
                                       instance_names, instance_labels,
                                       language_instruction (this demo's; a house scene's trials differ)

Images and every per-pixel extra are stored in the official OpenGL convention (bottom row first;
``K`` describes them as stored: ``fy < 0``). The evaluation protocol's images are these rotated
by 180 degrees: :mod:`vla.data.libero_hdf5` reads them back in the protocol orientation. (Changed
in issue 14: before, images were stored as the env delivered them, ``image_orientation`` said
which; ``model_file`` and ``macros_image_convention`` are new; ``env_args.env_kwargs`` now holds
LIBERO's keyword arguments, the project's settings moved to ``env_args.vla_spatial``.)

``instance_labels`` (instance id -> category) is the union over the episode's frames (an env may
label only the ids in view, as the house does).

``obs[t]`` is the observation on which ``actions[t]`` was taken. Every episode streams into its own
file under ``.episodes/`` (so workers never share a file and a killed run keeps every finished
demo); :func:`merge_demos` assembles the per-task files, ordered by trial (through
:func:`merge_episode_files`, which ``vla-data`` uses for its selected demos too).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from envs.base import Observation, RecordsDemos

from ..agents.base import LabelsActions

from .runtime import Episode, EpisodeResult, Subscriber
from .video import episode_stem

_EPISODE_DIR = ".episodes"


class _Stream:
    """Append-only resizable datasets, one row per step."""

    def __init__(self, group: h5py.Group) -> None:
        self.group = group
        self.n = 0

    def append(self, name: str, value: Any) -> None:
        arr = np.asarray(value)
        if name not in self.group:
            compression = "lzf" if arr.ndim >= 2 else None
            self.group.create_dataset(
                name,
                shape=(0,) + arr.shape,
                maxshape=(None,) + arr.shape,
                dtype=arr.dtype,
                chunks=(1,) + arr.shape,
                compression=compression,
            )
        ds = self.group[name]
        ds.resize(ds.shape[0] + 1, axis=0)
        ds[-1] = arr


def _camera_prefix(env: Any, camera: str) -> str:
    return env.record_names.get(camera, camera) if isinstance(env, RecordsDemos) else camera


class DemoRecorder(Subscriber):
    """Records successful episodes (``keep="all"``: every episode that ended without an error) under
    ``<root>/.episodes/``. An agent that labels its steps (:class:`~vla.agents.base.LabelsActions`, the
    DAgger agent) has its labels stored as ``actions`` and what it executed as ``executed_actions``."""

    def __init__(self, root: str | Path, keep: str = "success") -> None:
        if keep not in ("success", "all"):
            raise ValueError(f"record_keep must be success or all, got {keep!r}")
        self.keep = keep
        self.root = Path(root)
        self._file: h5py.File | None = None
        self._tmp: Path | None = None
        self._prev: Observation | None = None
        self._labels: dict[int, str] = {}

    def on_episode_start(self, episode: Episode) -> None:
        d = self.root / _EPISODE_DIR
        d.mkdir(parents=True, exist_ok=True)
        self._tmp = d / f".{episode_stem(episode.key)}.{os.getpid()}.tmp.hdf5"
        self._file = h5py.File(self._tmp, "w")
        demo = self._file.create_group("data/demo_0")
        self._demo, self._obs = _Stream(demo), _Stream(demo.create_group("obs"))
        official = isinstance(episode.env, RecordsDemos)
        attrs = episode.env.dataset_attrs() if official else {}
        for k, v in attrs.items():
            self._file["data"].attrs[k] = v
        self._file["data"].attrs["language_instruction"] = episode.instruction
        self._file["data"].attrs["env_spec"] = json.dumps(episode.env.env_spec.to_dict())
        demo.attrs["language_instruction"] = episode.instruction
        has_cams = bool(episode.observation and episode.observation.cameras)
        names = episode.env.instance_names() if official and has_cams else {}
        demo.attrs["instance_names"] = json.dumps({str(k): v for k, v in names.items()})
        self._labels = {}
        demo.attrs["trial"] = int(episode.key["trial"])
        if official:
            demo.attrs["model_file"] = episode.env.model_xml()
        self._prev = episode.observation
        self._state = episode.env.sim_state if official else None
        self._prev_state = self._state() if self._state else None

    def on_step(self, episode, action, observation, reward, info) -> None:
        obs, env = self._prev, episode.env
        official = isinstance(env, RecordsDemos)
        for cam, f in obs.cameras.items():
            self._labels.update(f.labels)
            p = _camera_prefix(env, cam)
            rec = env.record_frame(f) if official else {"rgb": f.rgb, "depth": f.depth, "K": f.K}
            if not official:
                rec["T_world_cam"] = f.T_world_cam
                if f.instance is not None:
                    rec["instance"] = f.instance
            self._obs.append(f"{p}_rgb", rec["rgb"])
            self._obs.append(f"{p}_depth", rec["depth"])
            if "instance" in rec:
                self._obs.append(f"{p}_instance", rec["instance"])
            self._obs.append(f"{p}_K", rec["K"])
            self._obs.append(f"{p}_T_world_cam", rec["T_world_cam"])
        self._obs.append("state", obs.state)
        for k, v in obs.sensors.items():
            if k == "robot_state":
                self._demo.append("robot_states", v)  # LIBERO's datasets keep it beside the actions
            else:
                self._obs.append(k, v)  # LIBERO: ee_states, gripper_states, joint_states; house: blocked
        if "ee_states" in obs.sensors:
            self._obs.append("ee_pos", obs.sensors["ee_states"][:3])
            self._obs.append("ee_ori", obs.sensors["ee_states"][3:])
        label = episode.agent.label() if isinstance(episode.agent, LabelsActions) else None
        if label is not None:
            self._demo.append("executed_actions", np.asarray(action, dtype=np.float64))
        self._demo.append("actions", np.asarray(action if label is None else label, dtype=np.float64))
        self._demo.append("rewards", np.uint8(reward > 0))
        self._demo.append("dones", np.uint8(bool(info.get("success"))))
        if self._state is not None:
            self._demo.append("states", self._prev_state)
            self._prev_state = self._state()
        self._prev = observation

    def on_episode_end(self, episode: Episode, result: EpisodeResult) -> None:
        if self._file is None:
            return
        demo = self._file["data/demo_0"]
        n = demo["actions"].shape[0] if "actions" in demo else 0
        demo.attrs["num_samples"] = n
        demo.attrs["instance_labels"] = json.dumps({str(k): v for k, v in sorted(self._labels.items())})
        if "states" in demo and n:
            demo.attrs["init_state"] = demo["states"][0]
        self._file.close()
        self._file = None
        if (result.success or self.keep == "all") and result.error is None and n:
            final = self.root / _EPISODE_DIR / f"{episode_stem(episode.key)}.hdf5"
            os.replace(self._tmp, final)
            result.extra["demo"] = str(final.relative_to(self.root))
        else:
            self._tmp.unlink(missing_ok=True)


_TRIAL_RE = re.compile(r"_task(\d+)_trial(\d+)\.hdf5$")


def merge_demos(root: str | Path, task_names: dict[int, str]) -> list[Path]:
    """Assemble ``<root>/<task name>_demo.hdf5`` per task from the per-episode files (idempotent). A task
    file merged after the newest of its episodes, from as many of them, is kept as it is: a rerun over
    finished episodes (a resumed experiment's record stage) rewrites nothing, so a task file's mtime -- part
    of the key of every memory cache built from it (:mod:`vla.data.map_input_cache`) -- stays."""
    root = Path(root)
    by_task: dict[int, list[tuple[int, Path]]] = {}
    for p in sorted((root / _EPISODE_DIR).glob("*.hdf5")):
        if p.name.startswith("."):
            continue
        m = _TRIAL_RE.search(p.name)
        if m:
            by_task.setdefault(int(m.group(1)), []).append((int(m.group(2)), p))
    out = []
    for task_id, items in sorted(by_task.items()):
        path, episodes = (
            root / f"{task_names.get(task_id, f'task{task_id:03d}')}_demo.hdf5",
            [p for _, p in sorted(items)],
        )
        out.append(path if _merged(path, episodes) else merge_episode_files(path, episodes))
    return out


def _merged(out: Path, episodes: list[Path]) -> bool:
    """Whether task file ``out`` was merged after the newest of ``episodes`` and holds as many demos (an
    episode file is written once, by a rename: a new or rerun episode is newer than the merge)."""
    if not out.exists() or out.stat().st_mtime < max(p.stat().st_mtime for p in episodes):
        return False
    try:
        with h5py.File(out, "r") as f:
            return int(f["data"].attrs.get("num_demos", -1)) == len(episodes)
    except (OSError, KeyError):
        return False


def merge_episode_files(out: str | Path, episodes: list[Path], demo_attrs: list[dict[str, Any]] | None = None) -> Path:
    """One task file ``out`` from per-episode files, in the order given (``demo_0``, ``demo_1``, ...): the
    first file's ``data`` attributes, ``num_demos`` and ``total`` (steps); ``demo_attrs[i]`` are added to
    ``demo_i``'s attributes. Written to ``<out>.tmp`` and moved into place, so a killed merge leaves the
    previous file whole."""
    out = Path(out)
    if demo_attrs is not None and len(demo_attrs) != len(episodes):
        raise ValueError(f"merge_episode_files: {len(episodes)} episodes but {len(demo_attrs)} demo_attrs")
    tmp = out.with_suffix(".hdf5.tmp")
    total = 0
    with h5py.File(tmp, "w") as dst:
        data = dst.create_group("data")
        for i, path in enumerate(episodes):
            with h5py.File(path, "r") as src:
                if i == 0:
                    for k, v in src["data"].attrs.items():
                        data.attrs[k] = v
                src.copy(src["data/demo_0"], data, name=f"demo_{i}")
                for k, v in (demo_attrs[i] if demo_attrs is not None else {}).items():
                    data[f"demo_{i}"].attrs[k] = v
                total += int(src["data/demo_0"].attrs["num_samples"])
        data.attrs["num_demos"] = len(episodes)
        data.attrs["total"] = total
    os.replace(tmp, out)
    return out
