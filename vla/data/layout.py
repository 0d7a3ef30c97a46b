"""Demonstration files: which files, which episodes, and what each episode says about itself.

Two layouts of ``data/demo_<i>/...`` are read:

* the project's recordings (``vla/rollout/record.py``, ``record=DIR``): attributes
  ``language_instruction`` (file and, newer, per demo), ``image_orientation``, ``env_spec`` (newer),
  per demo ``instance_labels``; datasets ``obs/<cam>_rgb|_depth|_instance|_K|_T_world_cam``,
  ``obs/state``, ``obs/<sensor>``, ``robot_states``, ``actions``. LIBERO and house alike (house
  cameras are ``ego_*``).
* LIBERO's official files (its ``scripts/create_dataset.py``): attributes ``problem_info``,
  ``env_args``, ``env_name``, ``macros_image_convention``, ``bddl_file_name``; datasets
  ``obs/agentview_rgb``, ``obs/eye_in_hand_rgb`` (the simulator's raw OpenGL buffers, bottom row
  first), ``obs/ee_states``, ``obs/gripper_states``, ``obs/joint_states``, ``robot_states``, ``actions``.
  Their depth, if any, is the normalised z-buffer, not metres: it is not offered.

A directory given as a path means every ``*.hdf5`` below it, except that a recording directory holds
each episode twice -- ``DIR/.episodes/<episode>.hdf5`` (written as each episode finishes, so complete
even after a killed run) and ``DIR/<task>_demo.hdf5`` (merged at the end of the run) -- and the
per-episode files are read there. Temporary files (names starting with ``.``) are skipped.

Everything an :class:`EpisodeRef` holds is read from attributes and shapes (and the actions, which
are small); images are read per sample later. Bad files raise ``ValueError`` naming the file, the
episode and the key.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import h5py
import numpy as np

from envs.registry import demo_layout, recognize_demo
from envs.spec import ArraySpec, CameraSpec, EnvSpec

from .handles import open_hdf5

CAMERA_FIELDS = ("rgb", "depth", "instance", "K", "T_world_cam")
_NOT_SENSORS = {"state", "ee_pos", "ee_ori"}  # obs/ datasets that are not env sensors (state, LIBERO extras)
_DEMO_RE = re.compile(r"^demo_(\d+)$")
_EPISODE_FILE_RE = re.compile(r"_task\d+_trial\d+$")  # record.py's per-episode file stems


@dataclass
class EpisodeRef:
    """One episode of one file (plain data: pickles cheaply into data-loader workers)."""

    id: str  # unique within the source
    path: str  # absolute file path
    group: str  # "data/demo_<i>"
    length: int  # steps (= actions)
    instruction: str
    family: str  # "libero" | "house" | the env_spec's family | "unknown"
    cameras: dict[str, str]  # camera name -> dataset prefix (obs/<prefix>_rgb), in the env's order
    camera_fields: dict[str, tuple[str, ...]]  # camera name -> fields stored (metric ones only)
    orientation: str | None  # stored orientation of LIBERO images (opengl | upright | rot180); None otherwise
    spec: dict[str, Any]  # EnvSpec.to_dict() as the file says or implies
    labels: dict[int, str] = field(default_factory=dict)  # instance id -> category (union over the episode)
    sensors: tuple[str, ...] = ()  # sensor keys offered (obs/<key>; robot_state = robot_states)
    state: str = "obs/state"  # "obs/state", or obs/ datasets joined by "+" (the family's derived_state:
    # "ee_states+gripper_states" for official LIBERO files)

    def where(self, key: str = "") -> str:
        return f"{self.path}: {self.group.split('/')[-1]}" + (f": {key}" if key else "")


# ------------------------------------------------------------------------------------------ files
def _temporary(p: Path) -> bool:
    return p.name.startswith(".") or ".tmp" in p.name


def find_demo_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The demonstration files that ``paths`` (files and/or directories) denote (see module doc)."""
    entries = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not entries:
        raise ValueError("no demonstration paths given")
    out: list[Path] = []
    for entry in entries:
        p = Path(entry).expanduser()
        if p.is_file():
            out.append(p.resolve())
        elif p.is_dir():
            found = sorted(x for x in p.rglob("*.hdf5") if x.is_file() and not _temporary(x))
            episode_dirs = {x.parent.parent for x in found if x.parent.name == ".episodes"}
            found = [x for x in found if not (x.parent in episode_dirs and x.name.endswith("_demo.hdf5"))]
            if not found:
                raise ValueError(f"{p}: no *.hdf5 demonstration files below this directory")
            out.extend(x.resolve() for x in found)
        else:
            raise ValueError(f"{p}: no such file or directory")
    seen: set[Path] = set()
    return [x for x in out if not (x in seen or seen.add(x))]


# ------------------------------------------------------------------------------------------ attributes
def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray) and value.dtype.kind in "SUO":
        return "".join(_text(v) for v in value.ravel())
    return str(value)


def _json_attr(attrs: Any, key: str, where: str) -> Any:
    try:
        return json.loads(_text(attrs[key]))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: attribute {key!r} is not valid JSON: {exc}") from exc


def instruction_of(path: Path, data_attrs: Any, demo_attrs: Any, family: str) -> str:
    """The episode's instruction: the demo's ``language_instruction``, else the file's; else what the
    file's name implies to its family (official LIBERO files, ``<task>_demo.hdf5``: the benchmark's
    instruction), else ``problem_info["language_instruction"]``."""
    for attrs in (demo_attrs, data_attrs):
        if "language_instruction" in attrs:
            text = _text(attrs["language_instruction"]).strip().strip('"')
            if text:
                return text
    named = demo_layout(family).instruction_from_name(path.stem)
    if named is not None:
        return named
    if "problem_info" in data_attrs:
        info = _json_attr(data_attrs, "problem_info", f"{path}: data")
        text = _text(info.get("language_instruction", "")).strip().strip('"') if isinstance(info, dict) else ""
        if text:
            return text
    raise ValueError(
        f"{path}: no language instruction (attribute language_instruction of data or of the demo, "
        "or problem_info['language_instruction'])"
    )


def family_of(path: Path, attrs: Any, prefixes: list[str], action_dim: int) -> tuple[str, dict | None]:
    """(family, EnvSpec dict if the file stores one); without one, the family whose demonstration layout
    recognises the file (``envs.registry.recognize_demo``), else ``"unknown"``."""
    if "env_spec" in attrs:
        spec = _json_attr(attrs, "env_spec", f"{path}: data")
        try:
            return EnvSpec.from_dict(spec).family, spec
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: data: attribute 'env_spec' is not an EnvSpec: {exc}") from exc
    return recognize_demo(attrs, prefixes, action_dim) or "unknown", None


def stored_orientation(path: Path, attrs: Any, family: str) -> str | None:
    """How the file stores its images, as its family's layout reads the attributes (None: as delivered)."""
    try:
        return demo_layout(family).stored_orientation(attrs)
    except ValueError as exc:
        raise ValueError(f"{path}: data: {exc}") from exc


def implied_spec(
    family: str, cameras: list[CameraSpec], sensors: dict[str, ArraySpec], action_dim: int, state_dim: int
) -> EnvSpec:
    """The EnvSpec a file without one implies, as its family's layout says."""
    return demo_layout(family).implied_spec(family, cameras, sensors, action_dim, state_dim)


# ------------------------------------------------------------------------------------------ episodes
def _demo_names(path: Path, data: h5py.Group) -> list[str]:
    names = [k for k in data.keys() if _DEMO_RE.match(k)]
    if not names:
        raise ValueError(f"{path}: no data/demo_<i> groups (keys: {sorted(data.keys())[:8]})")
    return sorted(names, key=lambda k: int(_DEMO_RE.match(k).group(1)))


def _check_lengths(path: Path, demo_name: str, demo: h5py.Group, n: int) -> None:
    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and name != "actions" and obj.ndim >= 1 and obj.shape[0] != n:
            raise ValueError(f"{path}: {demo_name}: {name} has {obj.shape[0]} frames but actions has {n}")

    demo.visititems(visit)
    if "num_samples" in demo.attrs and int(demo.attrs["num_samples"]) != n:
        k = int(demo.attrs["num_samples"])
        raise ValueError(f"{path}: {demo_name}: attribute num_samples is {k} but actions has {n}")


def read_episodes(path: Path) -> list[tuple[EpisodeRef, np.ndarray]]:
    """Every demo of one file as (EpisodeRef, actions (T, D) float64); ``ValueError`` on bad content."""
    with open_hdf5(str(path)) as f:
        if "data" not in f or not isinstance(f["data"], h5py.Group):
            raise ValueError(f"{path}: no 'data' group (not a demonstration file)")
        data = f["data"]
        out = []
        names = _demo_names(path, data)
        for name in names:
            out.append(_read_demo(path, data, name, len(names)))
        return out


def _read_demo(path: Path, data: h5py.Group, name: str, n_demos: int) -> tuple[EpisodeRef, np.ndarray]:
    demo = data[name]
    where = f"{path}: {name}"
    if "actions" not in demo or not isinstance(demo["actions"], h5py.Dataset):
        raise ValueError(f"{where}: actions is missing")
    ads = demo["actions"]
    if ads.ndim != 2 or ads.shape[0] < 1 or ads.shape[1] < 1 or ads.dtype.kind not in "iuf":
        raise ValueError(f"{where}: actions must be a numeric (T, D) array with T >= 1, got {ads.shape} {ads.dtype}")
    try:
        actions = np.asarray(ads[()], dtype=np.float64)
    except OSError as exc:
        raise ValueError(f"{where}: actions cannot be read (corrupted?): {exc}") from exc
    bad = np.flatnonzero(~np.isfinite(actions).all(axis=1))
    if len(bad):
        raise ValueError(f"{where}: actions contains NaN or inf at step {int(bad[0])}")
    n, dim = actions.shape
    if "obs" not in demo or not isinstance(demo["obs"], h5py.Group):
        raise ValueError(f"{where}: obs is missing")
    obs = demo["obs"]
    _check_lengths(path, name, demo, n)
    prefixes = [k[: -len("_rgb")] for k in obs.keys() if k.endswith("_rgb")]
    family, spec_dict = family_of(path, data.attrs, prefixes, dim)
    layout = demo_layout(family)
    cameras = layout.camera_names(prefixes)
    official = layout.official(data.attrs)
    fields_, cam_specs = {}, []
    for cam, prefix in cameras.items():
        rgb = obs[f"{prefix}_rgb"]
        if rgb.ndim != 4 or rgb.shape[-1] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"{where}: obs/{prefix}_rgb must be uint8 (T, H, W, 3), got {rgb.shape} {rgb.dtype}")
        have = ["rgb"] + [k for k in CAMERA_FIELDS[1:] if f"{prefix}_{k}" in obs and not official]
        fields_[cam] = tuple(have)
        cam_specs.append(CameraSpec(cam, int(rgb.shape[1]), int(rgb.shape[2]), "depth" in have, "instance" in have))
    camera_keys = {f"{p}_{k}" for p in prefixes for k in CAMERA_FIELDS}
    if spec_dict is not None:
        spec = EnvSpec.from_dict(spec_dict)
        sensor_keys = [k for k in spec.sensors if f"obs/{k}" in demo or (k == "robot_state" and "robot_states" in demo)]
    else:
        sensor_keys = [
            k for k in sorted(obs.keys()) if k not in camera_keys and k not in _NOT_SENSORS and obs[k].ndim <= 2
        ]
        if "robot_states" in demo:
            sensor_keys.append("robot_state")
        sensors = {}
        for k in sensor_keys:
            ds = demo["robot_states"] if k == "robot_state" else obs[k]
            sensors[k] = ArraySpec(tuple(ds.shape[1:]), str(ds.dtype))
        if "state" in obs:
            state_dim = int(np.prod(obs["state"].shape[1:]))
        else:
            state_dim = 8
        spec = implied_spec(family, cam_specs, sensors, dim, state_dim)
    if spec.action.dim != dim:
        raise ValueError(
            f"{where}: actions has {dim} dimensions but the {spec.family} env's actions are "
            f"{list(spec.action.names)} ({spec.action.dim})"
        )
    if "state" in obs:
        state = "obs/state"
    elif layout.derived_state and all(k in obs for k in layout.derived_state):
        state = "+".join(layout.derived_state)
    else:
        derive = " + ".join(f"obs/{k}" for k in layout.derived_state) or "obs/ee_states + obs/gripper_states"
        raise ValueError(f"{where}: obs/state is missing (and no {derive} to derive it)")
    orientation = stored_orientation(path, data.attrs, family)
    labels = {}
    if "instance_labels" in demo.attrs:
        raw = _json_attr(demo.attrs, "instance_labels", where)
        try:
            labels = {int(k): str(v) for k, v in raw.items()}
        except (AttributeError, ValueError) as exc:
            raise ValueError(f"{where}: attribute instance_labels must map instance ids to categories") from exc
    stem = path.stem
    single = n_demos == 1 and _EPISODE_FILE_RE.search(stem) is not None
    ref = EpisodeRef(
        id=stem if single else f"{stem}/{name}",
        path=str(path),
        group=f"data/{name}",
        length=n,
        instruction=instruction_of(path, data.attrs, demo.attrs, family),
        family=family,
        cameras=cameras,
        camera_fields=fields_,
        orientation=orientation,
        spec=spec.to_dict(),
        labels=labels,
        sensors=tuple(sensor_keys),
        state=state,
    )
    return ref, actions


def unique_ids(refs: list[EpisodeRef]) -> None:
    """Make episode ids unique in place: a repeated id gets ``@<crc32 of its file path>``."""
    count: dict[str, int] = {}
    for r in refs:
        count[r.id] = count.get(r.id, 0) + 1
    for r in refs:
        if count[r.id] > 1:
            r.id = f"{r.id}@{zlib.crc32(r.path.encode()):08x}"
