"""``Observation``: what a policy may see at one step, and its form as plain data.

An :class:`Observation` is the typed view the rollout loop hands to an agent: named
:class:`~spatial_memory.frame.CameraFrame`\\ s, proprioception, the instruction, the step, the env's
extra sensors (``sensors``) and whatever transforms added (``memory``: the spatial-memory inputs).

:meth:`Observation.to_dict` turns it into a **flat dict of plain data** -- numpy arrays (numeric,
bool or unicode; never object), Python numbers and strings -- that can be batched into tensors,
written to disk or sent over a socket without pickle; :meth:`Observation.from_dict` reads it back
(and validates it). The keys::

    prompt                          str, the instruction
    step                            int, steps since reset
    state                           float array, proprioception (layout declared by the EnvSpec)
    cameras/<name>/rgb              uint8 HxWx3
    cameras/<name>/depth            float32 HxW metres (0 / inf / NaN = invalid)
    cameras/<name>/K                float64 3x3 intrinsics
    cameras/<name>/T_world_cam      float64 4x4 world-from-camera (OpenCV camera axes)
    cameras/<name>/instance         int32 HxW instance ids            (optional)
    cameras/<name>/label_ids        int32 N  \\ instance id -> category  (optional, with instance)
    cameras/<name>/label_names      unicode N /
    sensors/<key>                   extra sensors the env declares (house: blocked; LIBERO: joint_states, ...)
    memory/<key>[/<key>...]         spatial-memory inputs added by a transform (docs/ARCHITECTURE.md)

The layout is the contract between envs, policies, datasets and the server; :class:`~envs.spec.EnvSpec`
declares, per env, which of these keys exist and their shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from spatial_memory.frame import CameraFrame

PlainValue = "np.ndarray | bool | int | float | str"
TOP_KEYS = ("prompt", "step", "state")
PREFIXES = ("cameras/", "sensors/", "memory/")
CAMERA_FIELDS = ("rgb", "depth", "K", "T_world_cam", "instance", "label_ids", "label_names")


def check_plain(key: str, value: Any) -> Any:
    """``value`` if it is plain data (numpy array of a numeric, bool or unicode dtype, a number or a
    string); otherwise ``ValueError`` naming ``key``. Numpy scalars become Python numbers."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufU":
            raise ValueError(
                f"observation key {key!r}: arrays must be numeric, bool or unicode, got dtype {value.dtype}"
            )
        return value
    if isinstance(value, np.generic):
        if value.dtype.kind not in "biufU":
            raise ValueError(f"observation key {key!r}: unsupported numpy scalar of dtype {value.dtype}")
        return value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(
        f"observation key {key!r}: values must be numpy arrays, numbers or strings, got {type(value).__name__}"
    )


def _check_entries(kind: str, entries: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in entries.items():
        if not isinstance(k, str) or not k or k.startswith("/") or k.endswith("/"):
            raise ValueError(f"observation {kind} keys must be non-empty strings like 'a' or 'a/b', got {k!r}")
        out[k] = check_plain(f"{kind}/{k}", v)
    return out


@dataclass(eq=False)
class Observation:
    """What a policy may see at one step (see the module doc for the dict form).

    cameras: named :class:`CameraFrame` s (empty when rendering is off); their ``T_world_cam`` is in
    the robot's own reference frame (LIBERO: the fixed world of the table; mobile robots: the
    odometry frame that starts at the robot's first pose). state: proprioception. instruction: the
    task in words. step: steps taken since reset. sensors: the env's extra sensors, plain data.
    memory: inputs added by a transform (the spatial memory's map and object table), plain data.
    """

    cameras: dict[str, CameraFrame]
    state: np.ndarray
    instruction: str
    step: int
    sensors: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.instruction, str):
            raise ValueError(f"Observation.instruction must be a string, got {type(self.instruction).__name__}")
        for name, frame in self.cameras.items():
            if not isinstance(name, str) or not name or "/" in name:
                raise ValueError(f"Observation camera names must be non-empty strings without '/', got {name!r}")
            if not isinstance(frame, CameraFrame):
                raise ValueError(f"Observation.cameras[{name!r}] must be a CameraFrame, got {type(frame).__name__}")
        self.state = np.asarray(self.state)
        if self.state.dtype.kind not in "biuf":
            raise ValueError(f"Observation.state must be numeric, got dtype {self.state.dtype}")
        self.step = int(self.step)
        self.sensors = _check_entries("sensors", self.sensors)
        self.memory = _check_entries("memory", self.memory)

    # ------------------------------------------------------------------ plain data
    def to_dict(self) -> dict[str, Any]:
        """The flat plain-data form (arrays are shared, not copied)."""
        d: dict[str, Any] = {"prompt": self.instruction, "step": self.step, "state": self.state}
        for name, f in self.cameras.items():
            p = f"cameras/{name}/"
            d[p + "rgb"], d[p + "depth"], d[p + "K"], d[p + "T_world_cam"] = f.rgb, f.depth, f.K, f.T_world_cam
            if f.instance is not None:
                d[p + "instance"] = f.instance
                ids = sorted(int(i) for i in f.labels)
                d[p + "label_ids"] = np.asarray(ids, dtype=np.int32)
                d[p + "label_names"] = np.asarray([f.labels[i] for i in ids], dtype=np.str_)
        d.update({f"sensors/{k}": v for k, v in self.sensors.items()})
        d.update({f"memory/{k}": v for k, v in self.memory.items()})
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Observation":
        """Read the dict form back; malformed input raises ``ValueError`` naming the key."""
        if not isinstance(d, Mapping):
            raise ValueError(f"an observation must be a mapping of flat keys, got {type(d).__name__}")
        missing = [k for k in TOP_KEYS if k not in d]
        if missing:
            raise ValueError(f"observation is missing key(s) {missing}; it has {sorted(d)[:12]}")
        cams: dict[str, dict[str, Any]] = {}
        sensors, memory = {}, {}
        for k, v in d.items():
            if not isinstance(k, str):
                raise ValueError(f"observation keys must be strings, got {k!r}")
            if k in TOP_KEYS:
                continue
            v = check_plain(k, v)
            if k.startswith("cameras/"):
                parts = k.split("/")
                if len(parts) != 3 or parts[2] not in CAMERA_FIELDS or not parts[1]:
                    raise ValueError(
                        f"observation key {k!r}: camera keys are cameras/<name>/<{'|'.join(CAMERA_FIELDS)}>"
                    )
                cams.setdefault(parts[1], {})[parts[2]] = v
            elif k.startswith("sensors/"):
                sensors[k[len("sensors/") :]] = v
            elif k.startswith("memory/"):
                memory[k[len("memory/") :]] = v
            else:
                raise ValueError(
                    f"unknown observation key {k!r}; keys are {list(TOP_KEYS)} or start with {list(PREFIXES)}"
                )
        prompt, step = d["prompt"], d["step"]
        if not isinstance(prompt, str):
            raise ValueError(f"observation key 'prompt' must be a string, got {type(prompt).__name__}")
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise ValueError(f"observation key 'step' must be an int, got {step!r}")
        state = check_plain("state", d["state"])
        if not isinstance(state, np.ndarray) or state.dtype.kind not in "biuf":
            raise ValueError("observation key 'state' must be a numeric array")
        frames = {name: _frame(name, fields_, int(step)) for name, fields_ in cams.items()}
        return cls(cameras=frames, state=state, instruction=prompt, step=int(step), sensors=sensors, memory=memory)


def _frame(name: str, f: dict[str, Any], step: int) -> CameraFrame:
    missing = [k for k in ("rgb", "depth", "K", "T_world_cam") if k not in f]
    if missing:
        raise ValueError(f"observation camera {name!r} is missing {['cameras/' + name + '/' + k for k in missing]}")
    labels: dict[int, str] = {}
    if "label_ids" in f or "label_names" in f:
        ids, names = np.asarray(f.get("label_ids", [])), np.asarray(f.get("label_names", []))
        if (
            ids.shape != names.shape
            or ids.ndim != 1
            or (len(ids) and ids.dtype.kind not in "iu")
            or names.dtype.kind not in "U"
        ):
            raise ValueError(f"observation camera {name!r}: label_ids (int N) and label_names (str N) must match")
        labels = {int(i): str(n) for i, n in zip(ids, names)}
    try:
        return CameraFrame(
            rgb=f["rgb"],
            depth=f["depth"],
            K=f["K"],
            T_world_cam=f["T_world_cam"],
            instance=f.get("instance"),
            labels=labels,
            step=step,
        )
    except ValueError as exc:
        raise ValueError(f"observation camera {name!r}: {exc}") from exc
