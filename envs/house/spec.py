"""What an apartment is: rooms, doors, walls and placed items (``HouseSpec``), and the parameters
that shape one (``GenParams``). Produced by :func:`.generator.generate_house`; read by the scene,
the MJCF builder, the top-down maps and the task.

World frame: x east, y north, z up, metres; the apartment covers [0, W] x [0, H]; floor at z = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from envs.base import Box
from envs.ground_nav.navgrid import build_navgrid

from .catalog import WALL_THICKNESS, Part

Rect = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True)
class GenParams:
    """The config values that shape an apartment (a scene is a function of seed and these)."""

    min_rooms: int = 4
    max_rooms: int = 8
    min_side_m: float = 8.0
    max_side_m: float = 14.0
    min_objects: int = 10
    max_objects: int = 30
    use_meshes: bool = True
    agent_radius: float = 0.2
    grid_resolution: float = 0.05

    @classmethod
    def from_config(cls, cfg) -> "GenParams":
        return cls(**{k: getattr(cfg, k) for k in cls.__dataclass_fields__})

    @property
    def door_width(self) -> tuple[float, float]:
        """Door widths: 0.9-1.1 m, wider when the agent needs it (its free corridor stays >= 0.3 m)."""
        lo = max(0.9, 2 * (self.agent_radius + 1.5 * self.grid_resolution) + 0.3)
        return lo, lo + 0.2


@dataclass(frozen=True, eq=False)
class RoomSpec:
    name: str  # unique, e.g. "bedroom_2"
    type: str  # a key of catalog.ROOM_TYPES
    rect: Rect  # wall centre lines
    floor_rgba: tuple

    def polygon(self) -> np.ndarray:
        x0, y0, x1, y1 = self.rect
        return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float64)

    def interior(self, extra: float = 0.0) -> Rect:
        m = WALL_THICKNESS / 2 + extra
        x0, y0, x1, y1 = self.rect
        return (x0 + m, y0 + m, x1 - m, y1 - m)

    @property
    def center(self) -> np.ndarray:
        x0, y0, x1, y1 = self.rect
        return np.array([(x0 + x1) / 2, (y0 + y1) / 2])

    @property
    def area(self) -> float:
        x0, y0, x1, y1 = self.rect
        return (x1 - x0) * (y1 - y0)


@dataclass(frozen=True, eq=False)
class Door:
    rooms: tuple[str, str]
    center: tuple[float, float]
    vertical: bool  # the wall runs along y (x = const)
    width: float


@dataclass(frozen=True, eq=False)
class WallSpec:
    center: tuple[float, float, float]
    size: tuple[float, float, float]  # full extents, axis-aligned

    def box(self) -> Box:
        return Box(center=np.array(self.center), size=np.array(self.size))

    def rect(self) -> Rect:
        (cx, cy, _), (sx, sy, _) = self.center, self.size
        return (cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)


@dataclass(frozen=True, eq=False)
class ItemSpec:
    """A piece of furniture or a small object, placed: canonical-frame origin at ``position``, turned by ``yaw``."""

    id: str
    category: str
    instance_id: int
    kind: str  # "furniture" | "object"
    room: str
    position: tuple[float, float, float]
    yaw: float  # radians, a multiple of pi/2
    size: tuple[float, float, float]  # dx (depth, front = +x), dy (width), dz (height)
    parts: tuple[Part, ...]
    support: str | None = None  # the furniture id it stands on
    is_support: bool = False

    @property
    def R(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def box(self) -> Box:
        center = np.array(self.position) + np.array([0.0, 0.0, self.size[2] / 2])
        return Box(center=center, size=np.array(self.size, dtype=np.float64), R=self.R)

    def rect(self) -> Rect:
        return footprint(self.position[0], self.position[1], self.size[0], self.size[1], self.yaw)

    @property
    def top(self) -> float:
        return self.position[2] + self.size[2]

    @property
    def front(self) -> np.ndarray:
        return np.array([math.cos(self.yaw), math.sin(self.yaw)])


@dataclass(frozen=True, eq=False)
class HouseSpec:
    seed: int
    params: GenParams
    size: tuple[float, float]  # W, H of the footprint's bounding box
    rooms: tuple[RoomSpec, ...]
    doors: tuple[Door, ...]
    walls: tuple[WallSpec, ...]
    items: tuple[ItemSpec, ...]
    wall_rgba: tuple

    @property
    def bounds(self) -> Rect:
        return (0.0, 0.0, self.size[0], self.size[1])

    def room(self, name: str) -> RoomSpec:
        for r in self.rooms:
            if r.name == name:
                return r
        raise KeyError(f"no room {name!r}; rooms: {[r.name for r in self.rooms]}")

    def room_at(self, xy: np.ndarray) -> str | None:
        for r in self.rooms:
            x0, y0, x1, y1 = r.rect
            if x0 <= xy[0] <= x1 and y0 <= xy[1] <= y1:
                return r.name
        return None

    def item(self, item_id: str) -> ItemSpec:
        for it in self.items:
            if it.id == item_id:
                return it
        raise KeyError(f"no item {item_id!r}")

    @property
    def furniture(self) -> list[ItemSpec]:
        return [it for it in self.items if it.kind == "furniture"]

    @property
    def objects(self) -> list[ItemSpec]:
        return [it for it in self.items if it.kind == "object"]

    def category_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for it in self.items:
            out[it.category] = out.get(it.category, 0) + 1
        return out

    def unique_categories(self) -> list[str]:
        return sorted(c for c, n in self.category_counts().items() if n == 1)

    def obstacle_rects(self) -> list[Rect]:
        return [w.rect() for w in self.walls] + [it.rect() for it in self.furniture]

    def navgrid(self, agent_radius: float | None = None, resolution: float | None = None):
        return build_navgrid(
            self.bounds,
            [r.rect for r in self.rooms],
            self.obstacle_rects(),
            self.params.agent_radius if agent_radius is None else agent_radius,
            self.params.grid_resolution if resolution is None else resolution,
        )


# ----------------------------------------------------------------------------------------------
# helpers


def footprint(x: float, y: float, dx: float, dy: float, yaw: float) -> Rect:
    """Axis-aligned footprint of a ``dx`` x ``dy`` box at ``(x, y)`` turned by a multiple of 90 degrees."""
    q = int(round(yaw / (math.pi / 2))) % 2
    hx, hy = (dx / 2, dy / 2) if q == 0 else (dy / 2, dx / 2)
    return (x - hx, y - hy, x + hx, y + hy)
