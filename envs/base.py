"""The contract every environment implements (DESIGN §3).

An environment is a ``gymnasium.Env`` whose observations are :class:`Observation` objects (what a
policy may see) and which exposes privileged :class:`SceneTruth` (for experts, question generation
and scoring only; never shown to a policy). Environments are grouped in *families* (``libero``,
``house``, ...) registered in :mod:`envs.registry`; a family lists its tasks and builds one env per
task, and an episode is a ``(task_id, trial)`` pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from spatial_memory.frame import CameraFrame


@dataclass(frozen=True, eq=False)
class Box:
    """An oriented 3D box in the world frame: ``R`` is world-from-box, ``size`` the full extents."""

    center: np.ndarray
    size: np.ndarray
    R: np.ndarray = field(default_factory=lambda: np.eye(3))

    def corners(self) -> np.ndarray:
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
        return (signs * (np.asarray(self.size) / 2)) @ np.asarray(self.R).T + np.asarray(self.center)

    def contains(self, p_world: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """Boolean per point of Nx3 ``p_world``: inside the box grown by ``margin`` on every side."""
        p_box = (np.asarray(p_world, dtype=np.float64) - self.center) @ np.asarray(self.R)
        return np.all(np.abs(p_box) <= np.asarray(self.size) / 2 + margin, axis=-1)


@dataclass(frozen=True, eq=False)
class ObjectTruth:
    """One object: unique ``id`` (e.g. ``akita_black_bowl_1``), ``category`` (``akita_black_bowl``),
    world pose (``position``, ``R`` world-from-object), its 3D ``box``, and the id it has in the
    instance masks (``None`` when it has none)."""

    id: str
    category: str
    position: np.ndarray
    R: np.ndarray
    box: Box
    instance_id: int | None = None


class CellLattice:
    """World xy <-> (row, col) on a lattice of square cells: rows along y, columns along x, cell
    (row, col) centred at ``(x0 + (col + 0.5) * resolution, y0 + (row + 0.5) * resolution)``."""

    x0: float
    y0: float
    resolution: float

    def world_to_cell(self, xy: np.ndarray) -> np.ndarray:
        xy = np.asarray(xy, dtype=np.float64)
        return np.stack(
            [np.floor((xy[..., 1] - self.y0) / self.resolution), np.floor((xy[..., 0] - self.x0) / self.resolution)], -1
        ).astype(np.int64)

    def cell_to_world(self, rc: np.ndarray) -> np.ndarray:
        rc = np.asarray(rc, dtype=np.float64)
        return np.stack(
            [self.x0 + (rc[..., 1] + 0.5) * self.resolution, self.y0 + (rc[..., 0] + 0.5) * self.resolution], -1
        )


@dataclass(frozen=True, eq=False)
class NavGrid(CellLattice):
    """Navigable area: ``free[row, col]`` True where an agent of ``agent_radius`` may stand.

    Cell (row, col) has its centre at world ``(x0 + (col + 0.5) * resolution, y0 + (row + 0.5) * resolution)``.
    """

    free: np.ndarray
    x0: float
    y0: float
    resolution: float
    agent_radius: float

    def is_free(self, xy: np.ndarray) -> np.ndarray:
        rc = self.world_to_cell(xy)
        h, w = self.free.shape
        ok = (rc[..., 0] >= 0) & (rc[..., 0] < h) & (rc[..., 1] >= 0) & (rc[..., 1] < w)
        out = np.zeros(ok.shape, dtype=bool)
        out[ok] = self.free[rc[..., 0][ok], rc[..., 1][ok]]
        return out


@dataclass(frozen=True, eq=False)
class Room:
    name: str
    polygon: np.ndarray  # Nx2 world xy, counter-clockwise


@dataclass(frozen=True, eq=False)
class SceneTruth:
    """Privileged ground truth of the current scene state (world frame, z up, metres)."""

    objects: tuple[ObjectTruth, ...]
    bounds: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax of the scene's floor area
    T_world_agent: np.ndarray  # agent base pose (4x4)
    walls: tuple[Box, ...] = ()
    rooms: tuple[Room, ...] = ()
    navigable: NavGrid | None = None
    T_world_odom: np.ndarray = field(default_factory=lambda: np.eye(4))  # where the agent's odometry frame is

    def object(self, object_id: str) -> ObjectTruth:
        for o in self.objects:
            if o.id == object_id:
                return o
        raise KeyError(f"no object {object_id!r} in the scene; objects: {sorted(o.id for o in self.objects)}")

    def by_category(self, category: str) -> list[ObjectTruth]:
        return [o for o in self.objects if o.category == category]


@dataclass(eq=False)
class Observation:
    """What a policy may see at one step.

    cameras: named :class:`CameraFrame`s (empty when rendering is off). Their ``T_world_cam`` is in
    the robot's own reference frame (LIBERO: the fixed world of the table; mobile robots: the
    odometry frame that starts at the robot's first pose). state: proprioception (LIBERO: 8-dim
    eef pos, eef axis-angle, gripper qpos; house: odometry ``[x, y, yaw]``). instruction: the task
    in words. step: steps taken since reset (after any settling steps).
    """

    cameras: dict[str, CameraFrame]
    state: np.ndarray
    instruction: str
    step: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskInfo:
    task_id: int
    name: str
    instruction: str
    max_steps: int
    num_trials: int  # how many distinct initial states (trials) the task defines


class Expert(Protocol):
    """A privileged scripted policy built by an env from its own scene truth."""

    def reset(self) -> None: ...

    def act(self, obs: Observation) -> np.ndarray: ...


class VLAEnv(gym.Env):
    """Base class: gymnasium API plus privileged access. ``info['success']`` after every step."""

    metadata = {"render_modes": ["rgb_array"]}
    instruction: str = ""
    max_episode_steps: int = 0
    task: TaskInfo

    def scene_truth(self) -> SceneTruth:
        raise NotImplementedError

    def expert(self) -> Expert:
        raise NotImplementedError(f"{type(self).__name__} has no scripted expert")

    def topdown_frame(self):
        """The shared :class:`~spatial_memory.topdown.TopDownFrame` of this scene (None if the env has no map)."""
        return None


def check_action(action: Any, space: gym.spaces.Box) -> np.ndarray:
    """Validate an agent's action against a Box space: shape, finiteness; clip to the bounds."""
    try:
        a = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"action must be numeric with shape {space.shape}, got {action!r}") from exc
    if a.shape != space.shape:
        raise ValueError(f"action must have shape {space.shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"action contains NaN or inf: {a.tolist()}")
    return np.clip(a, space.low, space.high)
