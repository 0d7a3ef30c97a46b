"""``EnvSpec``: what an env emits and accepts, declared once (the features a policy or a server needs).

Every env exposes ``env.env_spec``: the action space (bounds and per-dimension names), the cameras
(name, size, whether depth and instance masks come with them), the state layout, the extra sensors
and the task. :meth:`EnvSpec.features` lists every key of an observation's dict form
(:meth:`~envs.observation.Observation.to_dict`) with its shape and dtype, as LeRobot's ``features``
do; :meth:`EnvSpec.check_observation` validates a dict against it and names the first wrong key.
An ``EnvSpec`` is plain data: ``to_dict`` / ``from_dict`` round-trip through JSON (a server sends
it on connect).

A non-privileged agent receives the ``EnvSpec`` in ``reset(instruction, spec)`` and nothing else
of the env (see ``vla/agents/base.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one array (``None`` in a shape: any length); ``names`` label the entries
    of a 1-D array (e.g. the state's or the action's dimensions)."""

    shape: tuple[int | None, ...]
    dtype: str
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(None if s is None else int(s) for s in self.shape))
        object.__setattr__(self, "dtype", str(np.dtype(self.dtype)))
        if self.names is not None:
            object.__setattr__(self, "names", tuple(str(n) for n in self.names))
            if len(self.shape) != 1 or self.shape[0] != len(self.names):
                raise ValueError(f"ArraySpec names {self.names} do not match shape {self.shape}")

    def check(self, key: str, value: Any) -> None:
        """``ValueError`` naming ``key`` unless ``value`` has this shape and dtype kind."""
        if not self.shape and not isinstance(value, np.ndarray):
            if np.dtype(self.dtype).kind == "b" and not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"observation key {key!r} must be a bool, got {value!r}")
            if np.dtype(self.dtype).kind in "iuf" and (
                isinstance(value, bool) or not isinstance(value, (int, float, np.number))
            ):
                raise ValueError(f"observation key {key!r} must be a number, got {value!r}")
            return
        arr = np.asarray(value)
        if arr.ndim != len(self.shape) or any(s is not None and s != a for s, a in zip(self.shape, arr.shape)):
            raise ValueError(f"observation key {key!r} must have shape {self.shape}, got {arr.shape}")
        want = np.dtype(self.dtype)
        if arr.dtype != want and not (want.kind == "f" and arr.dtype.kind == "f"):
            raise ValueError(f"observation key {key!r} must have dtype {want}, got {arr.dtype}")

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, **({"names": list(self.names)} if self.names else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ArraySpec":
        return cls(tuple(d["shape"]), d["dtype"], tuple(d["names"]) if d.get("names") else None)


@dataclass(frozen=True)
class ActionSpec:
    """A Box action space: bounds per dimension and their names (``check`` validates and clips)."""

    low: tuple[float, ...]
    high: tuple[float, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        low, high = tuple(float(x) for x in self.low), tuple(float(x) for x in self.high)
        names = tuple(str(n) for n in self.names)
        if not (len(low) == len(high) == len(names)) or not low:
            raise ValueError(
                f"ActionSpec needs low, high and names of one length, got {len(low)}, {len(high)}, {len(names)}"
            )
        if any(np.isnan(x) for x in low + high):
            raise ValueError(f"ActionSpec bounds must not be NaN, got {low} / {high}")
        if any(lo > hi for lo, hi in zip(low, high)):
            raise ValueError(f"ActionSpec low must be <= high, got {low} / {high}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "names", names)

    @property
    def dim(self) -> int:
        return len(self.low)

    @classmethod
    def from_space(cls, space: gym.spaces.Box, names: tuple[str, ...] | list[str]) -> "ActionSpec":
        return cls(
            tuple(np.asarray(space.low, dtype=np.float64).ravel()),
            tuple(np.asarray(space.high, dtype=np.float64).ravel()),
            tuple(names),
        )

    def space(self) -> gym.spaces.Box:
        return gym.spaces.Box(np.array(self.low), np.array(self.high), dtype=np.float64)

    def check(self, action: Any) -> np.ndarray:
        """The action as float64, clipped to the bounds; ``ValueError`` for a wrong shape, NaN or inf."""
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"action must be numeric with shape ({self.dim},), got {action!r}") from exc
        if a.shape != (self.dim,):
            raise ValueError(f"action must have shape ({self.dim},) [{', '.join(self.names)}], got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action contains NaN or inf: {a.tolist()}")
        return np.clip(a, self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"low": list(self.low), "high": list(self.high), "names": list(self.names)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ActionSpec":
        return cls(tuple(d["low"]), tuple(d["high"]), tuple(d["names"]))


@dataclass(frozen=True)
class CameraSpec:
    name: str
    height: int
    width: int
    depth: bool = True
    instance: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "height": self.height,
            "width": self.width,
            "depth": self.depth,
            "instance": self.instance,
        }


@dataclass(frozen=True)
class EnvSpec:
    """The features of one env (see the module doc). ``family``: the env family (``libero``,
    ``house``, ...); ``task``: the task's id, name, instruction template and step limit; ``info``:
    family facts a policy may rely on (e.g. LIBERO's image orientation and controller), plain data."""

    family: str
    action: ActionSpec
    state: ArraySpec
    cameras: tuple[CameraSpec, ...] = ()
    sensors: dict[str, ArraySpec] = field(default_factory=dict)
    task: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def camera(self, name: str) -> CameraSpec:
        for c in self.cameras:
            if c.name == name:
                return c
        raise KeyError(f"no camera {name!r} in the {self.family} env; cameras: {[c.name for c in self.cameras]}")

    @property
    def camera_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cameras)

    def features(self) -> dict[str, ArraySpec]:
        """Every key of the observation dict this env emits, with shape and dtype."""
        f: dict[str, ArraySpec] = {"prompt": ArraySpec((), "<U1"), "step": ArraySpec((), "int64"), "state": self.state}
        for c in self.cameras:
            p = f"cameras/{c.name}/"
            f[p + "rgb"] = ArraySpec((c.height, c.width, 3), "uint8")
            f[p + "depth"] = ArraySpec((c.height, c.width), "float32")
            f[p + "K"] = ArraySpec((3, 3), "float64")
            f[p + "T_world_cam"] = ArraySpec((4, 4), "float64")
            if c.instance:
                f[p + "instance"] = ArraySpec((c.height, c.width), "int32")
                f[p + "label_ids"] = ArraySpec((None,), "int32")
                f[p + "label_names"] = ArraySpec((None,), "<U1")
        f.update({f"sensors/{k}": v for k, v in self.sensors.items()})
        return f

    def check_observation(self, d: Mapping[str, Any]) -> None:
        """``ValueError`` naming the first key that is missing or has the wrong shape or dtype.
        Extra ``memory/*`` keys (added by transforms) are allowed; other unknown keys are not."""
        feats = self.features()
        for key, spec in feats.items():
            if key not in d:
                if (
                    key.startswith("cameras/")
                    and key.rsplit("/", 1)[1] in ("label_ids", "label_names")
                    and key.rsplit("/", 1)[0] + "/instance" in d
                ):
                    continue  # an instance mask without labels: nothing labelled in view
                raise ValueError(f"observation is missing key {key!r} that the {self.family} env declares")
            if key == "prompt":
                if not isinstance(d[key], str):
                    raise ValueError("observation key 'prompt' must be a string")
            elif key == "step":
                if isinstance(d[key], bool) or not isinstance(d[key], (int, np.integer)):
                    raise ValueError("observation key 'step' must be an int")
            elif spec.dtype.startswith("<U"):
                if np.asarray(d[key]).dtype.kind != "U":
                    raise ValueError(f"observation key {key!r} must hold strings")
            else:
                spec.check(key, d[key])
        extra = sorted(k for k in d if k not in feats and not k.startswith("memory/"))
        if extra:
            raise ValueError(f"observation has key(s) {extra} that the {self.family} env does not declare")

    # ------------------------------------------------------------------ plain data
    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "action": self.action.to_dict(),
            "state": self.state.to_dict(),
            "cameras": [c.to_dict() for c in self.cameras],
            "sensors": {k: v.to_dict() for k, v in self.sensors.items()},
            "task": dict(self.task),
            "info": dict(self.info),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EnvSpec":
        """The spec of a plain-data dict (``to_dict``'s form); anything malformed -- a missing or
        mistyped field, an impossible shape or size, a dtype that is not bool, int, uint, float or
        unicode -- raises ``ValueError`` naming the field."""
        if not isinstance(d, Mapping):
            raise ValueError(f"malformed EnvSpec: expected a mapping, got {type(d).__name__}")
        try:
            family = d["family"]
            if not isinstance(family, str) or not family:
                raise ValueError(f"'family' must be a non-empty string, got {family!r}")
            cameras = _sequence(d.get("cameras", ()), "cameras")
            sensors = _mapping(d.get("sensors", {}), "sensors")
            return cls(
                family=family,
                action=ActionSpec.from_dict(_mapping(d["action"], "action")),
                state=_array_spec(d["state"], "state"),
                cameras=tuple(_camera_spec(c, f"cameras[{i}]") for i, c in enumerate(cameras)),
                sensors={_name(k, "sensors"): _array_spec(v, f"sensors[{k!r}]") for k, v in sensors.items()},
                task=dict(_mapping(d.get("task", {}), "task")),
                info=dict(_mapping(d.get("info", {}), "info")),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            msg = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"malformed EnvSpec: {msg}") from None


MAX_CAMERA_SIDE = 16384
_SPEC_DTYPE_KINDS = "biufU"


def _mapping(v: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ValueError(f"{what!r} must be a mapping, got {type(v).__name__}")
    return v


def _sequence(v: Any, what: str) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{what!r} must be a list, got {type(v).__name__}")
    return list(v)


def _name(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v or "/" in v:
        raise ValueError(f"names in {what!r} must be non-empty strings without '/', got {v!r}")
    return v


def _array_spec(v: Any, what: str) -> ArraySpec:
    v = _mapping(v, what)
    shape = _sequence(v.get("shape"), f"{what}.shape")
    if len(shape) > 8 or not all(
        s is None or (isinstance(s, int) and not isinstance(s, bool) and s >= 0) for s in shape
    ):
        raise ValueError(f"{what}.shape must be at most 8 non-negative ints (or null), got {shape!r}")
    dtype = v.get("dtype")
    try:
        ok = isinstance(dtype, str) and np.dtype(dtype).kind in _SPEC_DTYPE_KINDS
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{what}.dtype must name a bool, int, uint, float or unicode dtype, got {dtype!r}")
    names = v.get("names")
    if names is not None and not all(isinstance(n, str) for n in _sequence(names, f"{what}.names")):
        raise ValueError(f"{what}.names must be strings")
    return ArraySpec(tuple(shape), dtype, tuple(names) if names else None)


def _camera_spec(c: Any, what: str) -> CameraSpec:
    c = _mapping(c, what)
    extra = sorted(set(c) - {"name", "height", "width", "depth", "instance"})
    if extra:
        raise ValueError(f"{what} has unknown field(s) {extra}")
    name = _name(c.get("name"), f"{what}.name")
    size = [c.get("height"), c.get("width")]
    if not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= MAX_CAMERA_SIDE for x in size):
        raise ValueError(f"{what}: height and width must be ints in [1, {MAX_CAMERA_SIDE}], got {size}")
    flags = [c.get("depth", True), c.get("instance", True)]
    if not all(isinstance(x, bool) for x in flags):
        raise ValueError(f"{what}: depth and instance must be true or false, got {flags}")
    return CameraSpec(name, size[0], size[1], flags[0], flags[1])
