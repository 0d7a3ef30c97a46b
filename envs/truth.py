"""Privileged scene truth: what experts, question generation and scoring may read, never a policy.

World frame, z up, metres. ``SceneTruth`` is the whole of it for one moment of an episode: every
object (id, category, pose, box, instance id), the walls and rooms, the navigable grid, the agent's
true pose and where its odometry frame lies in the world.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spatial_memory.lattice import CellLattice


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
