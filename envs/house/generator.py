"""Seeded procedural apartments: rooms, walls with doors, furniture, small objects.

``generate_house(seed, params)`` is a pure function of its arguments (one ``numpy`` generator
seeded with ``seed``; no global state), so a seed always gives the same apartment. Steps:

1. footprint W x H (each side in [min_side_m, max_side_m]), split by binary space partitioning
   into 4-8 rectangular rooms of at least 2.6 m per side; sometimes a corner room is dropped
   (L-shaped apartments);
2. room types by size (largest = living room, smallest = bathroom, ...);
3. doors: a random spanning tree of the rooms that share enough wall (so every room is
   reachable) plus a few extra doors that make loops; walls are the room boundaries minus the
   door gaps;
4. furniture per room type (against walls, in corners, in the centre, or related to another piece:
   chairs around the table, nightstands beside the bed), kept clear of doors; pieces are dropped
   again until the free space of every room is connected for an agent of ``agent_radius``;
5. 10-30 small objects on the furniture that has a top to hold them: most categories appear once
   (unique semantic targets), some two or three times (distractors).

World frame: x east, y north, z up, metres; the apartment covers [0, W] x [0, H]; floor at z = 0,
ceiling at ``WALL_HEIGHT``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from envs.base import Box

from . import catalog
from .catalog import FURNITURE, OBJECTS, ROOM_TYPES, WALL_HEIGHT, WALL_THICKNESS, Kind, Part
from .navgrid import build_navgrid

Rect = tuple[float, float, float, float]  # x0, y0, x1, y1

MIN_ROOM_SIDE = 2.6
DOOR_MARGIN = 0.35  # door gap to the nearest wall corner
DOOR_CLEARANCE = 1.0  # no furniture within this distance in front of a door
FURNITURE_GAP = 0.05
OBJECT_GAP = 0.03


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
        return _footprint(self.position[0], self.position[1], self.size[0], self.size[1], self.yaw)

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


def _footprint(x: float, y: float, dx: float, dy: float, yaw: float) -> Rect:
    q = int(round(yaw / (math.pi / 2))) % 2
    hx, hy = (dx / 2, dy / 2) if q == 0 else (dy / 2, dx / 2)
    return (x - hx, y - hy, x + hx, y + hy)


def _overlap(a: Rect, b: Rect, gap: float = 0.0) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def _inside(a: Rect, outer: Rect, tol: float = 1e-9) -> bool:
    return a[0] >= outer[0] - tol and a[1] >= outer[1] - tol and a[2] <= outer[2] + tol and a[3] <= outer[3] + tol


def _snap(v: float, step: float = 0.05) -> float:
    return round(round(v / step) * step, 6)


def _uniform(rng: np.random.Generator, lo_hi: tuple[float, float]) -> float:
    return float(rng.uniform(lo_hi[0], lo_hi[1]))


def _subtract(intervals: list[tuple[float, float]], cut: tuple[float, float]) -> list[tuple[float, float]]:
    out = []
    for a, b in intervals:
        if cut[1] <= a or cut[0] >= b:
            out.append((a, b))
            continue
        if cut[0] > a:
            out.append((a, cut[0]))
        if cut[1] < b:
            out.append((cut[1], b))
    return [(a, b) for a, b in out if b - a > 1e-6]


# ----------------------------------------------------------------------------------------------
# layout


def _bsp(rng: np.random.Generator, W: float, H: float, n: int) -> list[Rect]:
    leaves: list[Rect] = [(0.0, 0.0, W, H)]
    while len(leaves) < n:
        can = [r for r in leaves if max(r[2] - r[0], r[3] - r[1]) >= 2 * MIN_ROOM_SIDE]
        if not can:
            break
        areas = np.array([(r[2] - r[0]) * (r[3] - r[1]) for r in can]) ** 2
        r = can[int(rng.choice(len(can), p=areas / areas.sum()))]
        w, h = r[2] - r[0], r[3] - r[1]
        if w < 2 * MIN_ROOM_SIDE:
            axis = 1
        elif h < 2 * MIN_ROOM_SIDE:
            axis = 0
        elif w / h > 1.25:
            axis = 0
        elif h / w > 1.25:
            axis = 1
        else:
            axis = int(rng.integers(2))
        lo, hi = (r[0], r[2]) if axis == 0 else (r[1], r[3])
        cut = _snap(float(rng.uniform(lo + MIN_ROOM_SIDE, hi - MIN_ROOM_SIDE)))
        cut = min(max(cut, lo + MIN_ROOM_SIDE), hi - MIN_ROOM_SIDE)
        leaves.remove(r)
        if axis == 0:
            leaves += [(r[0], r[1], cut, r[3]), (cut, r[1], r[2], r[3])]
        else:
            leaves += [(r[0], r[1], r[2], cut), (r[0], cut, r[2], r[3])]
    return sorted(leaves, key=lambda r: (r[1], r[0]))


def _shared(a: Rect, b: Rect) -> tuple[bool, float, float, float] | None:
    """(vertical, line coordinate, lo, hi) of the wall two rooms share, or None."""
    eps = 1e-6
    for xa, xb in ((a[2], b[0]), (b[2], a[0])):
        if abs(xa - xb) < eps:
            lo, hi = max(a[1], b[1]), min(a[3], b[3])
            if hi - lo > eps:
                return True, xa, lo, hi
    for ya, yb in ((a[3], b[1]), (b[3], a[1])):
        if abs(ya - yb) < eps:
            lo, hi = max(a[0], b[0]), min(a[2], b[2])
            if hi - lo > eps:
                return False, ya, lo, hi
    return None


def _connected(n: int, edges: list[tuple[int, int]]) -> bool:
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in edges:
        parent[find(i)] = find(j)
    return len({find(i) for i in range(n)}) == 1


def _door_edges(rects: list[Rect], max_door: float) -> list[tuple[int, int, tuple]]:
    out = []
    for i in range(len(rects)):
        for j in range(i + 1, len(rects)):
            s = _shared(rects[i], rects[j])
            if s is not None and s[3] - s[2] >= max_door + 2 * DOOR_MARGIN:
                out.append((i, j, s))
    return out


def _drop_corner_room(
    rng: np.random.Generator, rects: list[Rect], W: float, H: float, min_rooms: int, max_door: float
) -> list[Rect]:
    if len(rects) <= min_rooms or rng.random() >= 0.35:
        return rects
    corners = []
    for k, r in enumerate(rects):
        touches_x = r[0] == 0.0 or r[2] == W
        touches_y = r[1] == 0.0 or r[3] == H
        if touches_x and touches_y and (r[2] - r[0]) * (r[3] - r[1]) < 0.3 * W * H:
            corners.append(k)
    rng.shuffle(corners)
    for k in corners:
        rest = [r for i, r in enumerate(rects) if i != k]
        if _connected(len(rest), [(i, j) for i, j, _ in _door_edges(rest, max_door)]):
            return rest
    return rects


def _room_types(rng: np.random.Generator, rects: list[Rect]) -> list[str]:
    n = len(rects)
    order = sorted(range(n), key=lambda k: -(rects[k][2] - rects[k][0]) * (rects[k][3] - rects[k][1]))
    types = [""] * n
    types[order[0]] = "living_room"
    types[order[-1]] = "bathroom"
    middle = order[1:-1]
    pool = ["kitchen", "bedroom"] + list(
        rng.choice(["bedroom", "office", "dining_room", "bathroom", "bedroom", "office"], size=max(0, len(middle) - 2))
    )
    pool = pool[: len(middle)]
    perm = rng.permutation(len(middle))
    for k, p in zip(middle, perm):
        types[k] = pool[p]
    return types


def _name_rooms(types: list[str]) -> list[str]:
    total = {t: types.count(t) for t in set(types)}
    seen: dict[str, int] = {}
    names = []
    for t in types:
        seen[t] = seen.get(t, 0) + 1
        names.append(t if total[t] == 1 else f"{t}_{seen[t]}")
    return names


def _doors(
    rng: np.random.Generator, rects: list[Rect], types: list[str], names: list[str], widths: tuple[float, float]
) -> list[Door]:
    edges = _door_edges(rects, widths[1])
    order = rng.permutation(len(edges))
    parent = list(range(len(rects)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    chosen = []
    for k in order:
        i, j, _ = edges[k]
        if find(i) != find(j):
            parent[find(i)] = find(j)
            chosen.append(k)
        elif "bathroom" not in (types[i], types[j]) and rng.random() < 0.3:
            chosen.append(k)
    doors = []
    for k in sorted(chosen):
        i, j, (vertical, c, lo, hi) = edges[k]
        w = _snap(float(rng.uniform(*widths)))
        mid = _snap(float(rng.uniform(lo + DOOR_MARGIN + w / 2, hi - DOOR_MARGIN - w / 2)), 0.01)
        center = (c, mid) if vertical else (mid, c)
        doors.append(Door((names[i], names[j]), center, vertical, w))
    return doors


def _walls(rects: list[Rect], doors: list[Door]) -> list[WallSpec]:
    t = WALL_THICKNESS
    pieces: list[tuple[bool, float, float, float]] = []  # vertical, line, lo, hi
    # exterior: each room side minus what it shares with other rooms
    for k, r in enumerate(rects):
        sides = [
            (True, r[0], r[1], r[3]),
            (True, r[2], r[1], r[3]),
            (False, r[1], r[0], r[2]),
            (False, r[3], r[0], r[2]),
        ]
        for vertical, c, lo, hi in sides:
            free = [(lo, hi)]
            for m, o in enumerate(rects):
                if m == k:
                    continue
                s = _shared(r, o)
                if s is not None and s[0] == vertical and abs(s[1] - c) < 1e-6:
                    free = _subtract(free, (s[2], s[3]))
            pieces += [(vertical, c, a, b) for a, b in free]
    # interior: shared walls minus door gaps
    gaps: dict[tuple[bool, float], list[tuple[float, float]]] = {}
    for d in doors:
        c, along = (d.center[0], d.center[1]) if d.vertical else (d.center[1], d.center[0])
        gaps.setdefault((d.vertical, round(c, 6)), []).append((along - d.width / 2, along + d.width / 2))
    for i in range(len(rects)):
        for j in range(i + 1, len(rects)):
            s = _shared(rects[i], rects[j])
            if s is None:
                continue
            vertical, c, lo, hi = s
            free = [(lo, hi)]
            for g in gaps.get((vertical, round(c, 6)), []):
                free = _subtract(free, g)
            pieces += [(vertical, c, a, b) for a, b in free]
    gap_ends = {(v, round(c, 6), round(e, 6)) for (v, c), gs in gaps.items() for g in gs for e in g}
    walls = []
    for vertical, c, a, b in pieces:
        ext_a = 0.0 if (vertical, round(c, 6), round(a, 6)) in gap_ends else t / 2
        ext_b = 0.0 if (vertical, round(c, 6), round(b, 6)) in gap_ends else t / 2
        a, b = a - ext_a, b + ext_b
        if vertical:
            walls.append(WallSpec((c, (a + b) / 2, WALL_HEIGHT / 2), (t, b - a, WALL_HEIGHT)))
        else:
            walls.append(WallSpec(((a + b) / 2, c, WALL_HEIGHT / 2), (b - a, t, WALL_HEIGHT)))
    return walls


# ----------------------------------------------------------------------------------------------
# furniture


@dataclass(eq=False)
class _Placed:
    kind: Kind
    room: str
    x: float
    y: float
    z: float
    yaw: float
    size: tuple[float, float, float]
    required: bool
    support: str | None = None  # index-free reference, resolved later for objects
    parts: tuple[Part, ...] = ()
    rect: Rect = field(default=(0, 0, 0, 0))

    def __post_init__(self) -> None:
        self.rect = _footprint(self.x, self.y, self.size[0], self.size[1], self.yaw)

    @property
    def front(self) -> np.ndarray:
        return np.array([math.cos(self.yaw), math.sin(self.yaw)])

    @property
    def side(self) -> np.ndarray:
        return np.array([-math.sin(self.yaw), math.cos(self.yaw)])


def _door_zones(room: RoomSpec, doors: list[Door]) -> list[Rect]:
    zones = []
    for d in doors:
        if room.name not in d.rooms:
            continue
        cx, cy = d.center
        h = d.width / 2 + 0.2
        if d.vertical:
            zones.append((cx - DOOR_CLEARANCE, cy - h, cx + DOOR_CLEARANCE, cy + h))
        else:
            zones.append((cx - h, cy - DOOR_CLEARANCE, cx + h, cy + DOOR_CLEARANCE))
    return zones


def _fits(p: _Placed, interior: Rect, zones: list[Rect], placed: list[_Placed]) -> bool:
    if not _inside(p.rect, interior):
        return False
    if any(_overlap(p.rect, z) for z in zones):
        return False
    return not any(_overlap(p.rect, q.rect, FURNITURE_GAP) for q in placed)


def _sample_size(rng: np.random.Generator, kind: Kind) -> tuple[float, float, float]:
    return tuple(round(_uniform(rng, r), 3) for r in kind.size)  # type: ignore[return-value]


def _wall_candidate(rng: np.random.Generator, kind: Kind, room: RoomSpec, interior: Rect, size) -> _Placed | None:
    dx, dy, _ = size
    x0, y0, x1, y1 = interior
    side = int(rng.integers(4))
    if side == 0:  # west wall, facing +x
        if y1 - y0 < dy:
            return None
        return _Placed(
            kind, room.name, x0 + dx / 2, float(rng.uniform(y0 + dy / 2, y1 - dy / 2)), 0.0, 0.0, size, False
        )
    if side == 1:  # east wall, facing -x
        if y1 - y0 < dy:
            return None
        return _Placed(
            kind, room.name, x1 - dx / 2, float(rng.uniform(y0 + dy / 2, y1 - dy / 2)), 0.0, math.pi, size, False
        )
    if x1 - x0 < dy:
        return None
    x = float(rng.uniform(x0 + dy / 2, x1 - dy / 2))
    if side == 2:  # south wall, facing +y
        return _Placed(kind, room.name, x, y0 + dx / 2, 0.0, math.pi / 2, size, False)
    return _Placed(kind, room.name, x, y1 - dx / 2, 0.0, -math.pi / 2, size, False)


def _corner_candidate(rng: np.random.Generator, kind: Kind, room: RoomSpec, interior: Rect, size) -> _Placed:
    dx, dy, _ = size
    x0, y0, x1, y1 = interior
    corner = int(rng.integers(4))
    sx, sy = (corner & 1), (corner >> 1)
    h = max(dx, dy) / 2
    x = x0 + h if sx == 0 else x1 - h
    y = y0 + h if sy == 0 else y1 - h
    yaw = 0.0 if sx == 0 else math.pi
    return _Placed(kind, room.name, x, y, 0.0, yaw, size, False)


def _related_candidates(
    rng: np.random.Generator, kind: Kind, room: RoomSpec, size, anchor: _Placed, relation: str
) -> list[_Placed]:
    dx, dy, _ = size
    a_dx, a_dy, _ = anchor.size
    base = np.array([anchor.x, anchor.y])
    out = []
    if relation == "front_of":
        gap = 0.4 if anchor.kind.category == "sofa" else 0.02
        c = base + anchor.front * (a_dx / 2 + gap + dx / 2)
        yaw = anchor.yaw if anchor.kind.category == "sofa" else anchor.yaw + math.pi
        out.append(_Placed(kind, room.name, float(c[0]), float(c[1]), 0.0, yaw, size, False))
    elif relation == "beside":
        back = base - anchor.front * (a_dx / 2)
        for s in rng.permutation([-1, 1]):
            c = back + anchor.front * (dx / 2) + anchor.side * s * (a_dy / 2 + 0.08 + dy / 2)
            out.append(_Placed(kind, room.name, float(c[0]), float(c[1]), 0.0, anchor.yaw, size, False))
    elif relation == "around":
        ys = [-a_dy / 4, a_dy / 4] if a_dy >= 1.4 else [0.0]
        for sx in (-1, 1):
            for yy in ys:
                c = base + anchor.front * sx * (a_dx / 2 + 0.08 + dx / 2) + anchor.side * yy
                yaw = anchor.yaw + (math.pi if sx > 0 else 0.0)
                out.append(_Placed(kind, room.name, float(c[0]), float(c[1]), 0.0, yaw, size, False))
    return out


def _furnish_room(rng: np.random.Generator, room: RoomSpec, doors: list[Door]) -> list[_Placed]:
    spec = ROOM_TYPES[room.type]
    interior = room.interior(0.01)
    zones = _door_zones(room, doors)
    room_area = (interior[2] - interior[0]) * (interior[3] - interior[1])
    plan = [(c, True) for c in spec["required"]]
    optional = list(spec["optional"])
    rng.shuffle(optional)
    plan += [(c, False) for c in optional[: int(rng.integers(1, len(optional) + 1))]]
    placed: list[_Placed] = []
    for category, required in plan:
        kind = FURNITURE[category]
        if sum((q.rect[2] - q.rect[0]) * (q.rect[3] - q.rect[1]) for q in placed) > 0.35 * room_area and not required:
            continue
        rel, _, anchor_cat = kind.placement.partition(":")
        anchors = [q for q in placed if q.kind.category == anchor_cat] if anchor_cat else []
        if anchor_cat and not anchors:
            continue
        for _ in range(40):
            size = _sample_size(rng, kind)
            if rel == "wall":
                cands = [_wall_candidate(rng, kind, room, interior, size)]
            elif rel == "corner":
                cands = [_corner_candidate(rng, kind, room, interior, size)]
            elif rel == "center":
                x0, y0, x1, y1 = interior
                yaw = float(rng.integers(2)) * math.pi / 2
                r = _footprint(0, 0, size[0], size[1], yaw)
                m = 0.9
                if x1 - x0 < 2 * m + r[2] - r[0] or y1 - y0 < 2 * m + r[3] - r[1]:
                    cands = []
                else:
                    cands = [
                        _Placed(
                            kind,
                            room.name,
                            float(rng.uniform(x0 + m + r[2], x1 - m - r[2])),
                            float(rng.uniform(y0 + m + r[3], y1 - m - r[3])),
                            0.0,
                            yaw,
                            size,
                            False,
                        )
                    ]
            else:
                cands = _related_candidates(rng, kind, room, size, anchors[int(rng.integers(len(anchors)))], rel)
            ok = [c for c in cands if c is not None and _fits(c, interior, zones, placed)]
            if ok:
                c = ok[0]
                c.required = required
                placed.append(c)
                if category == "dining_table":  # chairs around it (2-4, duplicates on purpose)
                    chair = FURNITURE["chair"]
                    csize = _sample_size(rng, chair)
                    for ch in _related_candidates(rng, chair, room, csize, c, "around"):
                        if _fits(ch, interior, zones, placed):
                            placed.append(ch)
                if category == "desk":
                    oc = FURNITURE["office_chair"]
                    for ch in _related_candidates(rng, oc, room, _sample_size(rng, oc), c, "front_of"):
                        if _fits(ch, interior, zones, placed):
                            placed.append(ch)
                break
    return placed


def _connected_rooms(
    rooms: list[RoomSpec], walls: list[WallSpec], furniture: list[_Placed], params: GenParams, bounds: Rect
) -> bool:
    grid = build_navgrid(
        bounds,
        [r.rect for r in rooms],
        [w.rect() for w in walls] + [p.rect for p in furniture],
        params.agent_radius,
        params.grid_resolution,
    )
    labels, _ = ndimage.label(grid.free, structure=np.ones((3, 3), dtype=bool))
    counts = np.bincount(labels.ravel())
    counts[0] = 0
    main = int(np.argmax(counts))
    need = 1.0 / params.grid_resolution**2  # at least 1 m^2 of each room in the main component
    for r in rooms:
        x0, y0, x1, y1 = r.rect
        rc0 = grid.world_to_cell(np.array([x0, y0]))
        rc1 = grid.world_to_cell(np.array([x1, y1]))
        sub = labels[max(rc0[0], 0) : rc1[0] + 1, max(rc0[1], 0) : rc1[1] + 1]
        if np.count_nonzero(sub == main) < need:
            return False
    return True


# ----------------------------------------------------------------------------------------------
# small objects


def _place_objects(
    rng: np.random.Generator, supports: list[tuple[int, _Placed]], n: int, room_types: dict[str, str]
) -> list[tuple[_Placed, int]]:
    """(object, index of its support) for up to n small objects."""
    if not supports:
        return []
    used: list[str] = []
    on: dict[int, list[Rect]] = {k: [] for k, _ in supports}
    out: list[tuple[_Placed, int]] = []
    areas = np.array([(p.rect[2] - p.rect[0]) * (p.rect[3] - p.rect[1]) for _, p in supports])
    weights = np.sqrt(areas) / np.sqrt(areas).sum()
    tries = 0
    while len(out) < n and tries < 40 * n:
        tries += 1
        k, sup = supports[int(rng.choice(len(supports), p=weights))]
        pool = ROOM_TYPES[room_types[sup.room]]["objects"]
        dup = [c for c in pool if c in used]
        fresh = [c for c in pool if c not in used]
        if dup and (not fresh or rng.random() < 0.22):
            category = dup[int(rng.integers(len(dup)))]
        elif fresh:
            category = fresh[int(rng.integers(len(fresh)))]
        else:
            continue
        kind = OBJECTS[category]
        size = _sample_size(rng, kind)
        if kind.shape in (catalog.shape_frame, catalog.shape_clock, catalog.shape_laptop, catalog.shape_monitor):
            yaw = sup.yaw  # faces where the support faces
        else:
            yaw = float(rng.integers(4)) * math.pi / 2
        top = (sup.rect[0] + 0.04, sup.rect[1] + 0.04, sup.rect[2] - 0.04, sup.rect[3] - 0.04)
        r = _footprint(0, 0, size[0], size[1], yaw)
        if top[2] - top[0] < r[2] - r[0] or top[3] - top[1] < r[3] - r[1]:
            continue
        for _ in range(15):
            x = float(rng.uniform(top[0] - r[0], top[2] - r[2]))
            y = float(rng.uniform(top[1] - r[1], top[3] - r[3]))
            cand = _Placed(kind, sup.room, x, y, sup.size[2], yaw, size, False)
            if not any(_overlap(cand.rect, q, OBJECT_GAP) for q in on[k]):
                on[k].append(cand.rect)
                out.append((cand, k))
                used.append(category)
                break
    return out


# ----------------------------------------------------------------------------------------------


def generate_house(seed: int, params: GenParams | None = None) -> HouseSpec:
    """The apartment of ``seed`` (deterministic for a given seed and params)."""
    params = params or GenParams()
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"scene seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    for _attempt in range(20):
        W = _snap(float(rng.uniform(params.min_side_m, params.max_side_m)), 0.1)
        H = _snap(float(rng.uniform(params.min_side_m, params.max_side_m)), 0.1)
        n = int(rng.integers(params.min_rooms, params.max_rooms + 1))
        rects = _bsp(rng, W, H, n)
        if len(rects) < params.min_rooms or not _connected(
            len(rects), [(i, j) for i, j, _ in _door_edges(rects, params.door_width[1])]
        ):
            continue
        rects = _drop_corner_room(rng, rects, W, H, params.min_rooms, params.door_width[1])
        break
    else:
        raise ValueError(
            f"cannot lay out {params.min_rooms}-{params.max_rooms} rooms "
            f"in a {params.min_side_m}-{params.max_side_m} m footprint"
        )
    types = _room_types(rng, rects)
    names = _name_rooms(types)
    rooms = [
        RoomSpec(nm, t, r, catalog.FLOOR_COLOURS[t][int(rng.integers(len(catalog.FLOOR_COLOURS[t])))])
        for nm, t, r in zip(names, types, rects)
    ]
    doors = _doors(rng, rects, types, names, params.door_width)
    walls = _walls(rects, doors)
    bounds = (0.0, 0.0, W, H)

    furniture: list[_Placed] = []
    for room in rooms:
        furniture += _furnish_room(rng, room, doors)
    # drop furniture (optional pieces first, latest first) until every room is reachable
    while not _connected_rooms(rooms, walls, furniture, params, bounds):
        if not furniture:
            raise ValueError(f"apartment {seed}: rooms cannot be connected for agent_radius={params.agent_radius}")
        optional = [k for k, p in enumerate(furniture) if not p.required]
        furniture.pop(optional[-1] if optional else len(furniture) - 1)

    supports = [(k, p) for k, p in enumerate(furniture) if p.kind.support]
    n_obj = int(rng.integers(params.min_objects, params.max_objects + 1))
    objects = _place_objects(rng, supports, n_obj, {r.name: r.type for r in rooms})

    # ids: furniture first, then objects; "<category>_<k>" counts within the category
    items: list[ItemSpec] = []
    counter: dict[str, int] = {}
    fid: dict[int, str] = {}

    def new_id(category: str) -> str:
        counter[category] = counter.get(category, 0) + 1
        return f"{category}_{counter[category]}"

    for k, p in enumerate(furniture):
        iid = new_id(p.kind.category)
        fid[k] = iid
        items.append(
            ItemSpec(
                iid,
                p.kind.category,
                len(items) + 1,
                "furniture",
                p.room,
                (p.x, p.y, 0.0),
                p.yaw,
                p.size,
                tuple(p.kind.parts(*p.size, params.use_meshes)),
                None,
                p.kind.support,
            )
        )
    for p, k in objects:
        items.append(
            ItemSpec(
                new_id(p.kind.category),
                p.kind.category,
                len(items) + 1,
                "object",
                p.room,
                (p.x, p.y, p.z),
                p.yaw,
                p.size,
                tuple(p.kind.parts(*p.size, params.use_meshes)),
                fid[k],
                False,
            )
        )
    wall_rgba = catalog.WALL_COLOURS[int(rng.integers(len(catalog.WALL_COLOURS)))]
    return HouseSpec(int(seed), params, (W, H), tuple(rooms), tuple(doors), tuple(walls), tuple(items), wall_rgba)
