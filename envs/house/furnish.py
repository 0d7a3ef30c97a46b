"""Furnishing an apartment: furniture per room type (against walls, in corners, in the centre, or
related to another piece: chairs around the table, nightstands beside the bed), kept clear of
doors; the test that every room stays reachable for the agent; small objects on the furniture that
has a top. Steps 4-5 of :func:`.generator.generate_house`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from envs.ground_nav.navgrid import build_navgrid

from . import catalog
from .catalog import FURNITURE, OBJECTS, ROOM_TYPES, Kind, Part
from .spec import Door, GenParams, Rect, RoomSpec, WallSpec, footprint

DOOR_CLEARANCE = 1.0  # no furniture within this distance in front of a door
FURNITURE_GAP = 0.05
OBJECT_GAP = 0.03


def _overlap(a: Rect, b: Rect, gap: float = 0.0) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def _inside(a: Rect, outer: Rect, tol: float = 1e-9) -> bool:
    return a[0] >= outer[0] - tol and a[1] >= outer[1] - tol and a[2] <= outer[2] + tol and a[3] <= outer[3] + tol


def _uniform(rng: np.random.Generator, lo_hi: tuple[float, float]) -> float:
    return float(rng.uniform(lo_hi[0], lo_hi[1]))


@dataclass(eq=False)
class Placed:
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
        self.rect = footprint(self.x, self.y, self.size[0], self.size[1], self.yaw)

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


def _fits(p: Placed, interior: Rect, zones: list[Rect], placed: list[Placed]) -> bool:
    if not _inside(p.rect, interior):
        return False
    if any(_overlap(p.rect, z) for z in zones):
        return False
    return not any(_overlap(p.rect, q.rect, FURNITURE_GAP) for q in placed)


def _sample_size(rng: np.random.Generator, kind: Kind) -> tuple[float, float, float]:
    return tuple(round(_uniform(rng, r), 3) for r in kind.size)  # type: ignore[return-value]


def _wall_candidate(rng: np.random.Generator, kind: Kind, room: RoomSpec, interior: Rect, size) -> Placed | None:
    dx, dy, _ = size
    x0, y0, x1, y1 = interior
    side = int(rng.integers(4))
    if side == 0:  # west wall, facing +x
        if y1 - y0 < dy:
            return None
        return Placed(kind, room.name, x0 + dx / 2, float(rng.uniform(y0 + dy / 2, y1 - dy / 2)), 0.0, 0.0, size, False)
    if side == 1:  # east wall, facing -x
        if y1 - y0 < dy:
            return None
        return Placed(
            kind, room.name, x1 - dx / 2, float(rng.uniform(y0 + dy / 2, y1 - dy / 2)), 0.0, math.pi, size, False
        )
    if x1 - x0 < dy:
        return None
    x = float(rng.uniform(x0 + dy / 2, x1 - dy / 2))
    if side == 2:  # south wall, facing +y
        return Placed(kind, room.name, x, y0 + dx / 2, 0.0, math.pi / 2, size, False)
    return Placed(kind, room.name, x, y1 - dx / 2, 0.0, -math.pi / 2, size, False)


def _corner_candidate(rng: np.random.Generator, kind: Kind, room: RoomSpec, interior: Rect, size) -> Placed:
    dx, dy, _ = size
    x0, y0, x1, y1 = interior
    corner = int(rng.integers(4))
    sx, sy = (corner & 1), (corner >> 1)
    h = max(dx, dy) / 2
    x = x0 + h if sx == 0 else x1 - h
    y = y0 + h if sy == 0 else y1 - h
    yaw = 0.0 if sx == 0 else math.pi
    return Placed(kind, room.name, x, y, 0.0, yaw, size, False)


def _related_candidates(
    rng: np.random.Generator, kind: Kind, room: RoomSpec, size, anchor: Placed, relation: str
) -> list[Placed]:
    dx, dy, _ = size
    a_dx, a_dy, _ = anchor.size
    base = np.array([anchor.x, anchor.y])
    out = []
    if relation == "front_of":
        gap = 0.4 if anchor.kind.category == "sofa" else 0.02
        c = base + anchor.front * (a_dx / 2 + gap + dx / 2)
        yaw = anchor.yaw if anchor.kind.category == "sofa" else anchor.yaw + math.pi
        out.append(Placed(kind, room.name, float(c[0]), float(c[1]), 0.0, yaw, size, False))
    elif relation == "beside":
        back = base - anchor.front * (a_dx / 2)
        for s in rng.permutation([-1, 1]):
            c = back + anchor.front * (dx / 2) + anchor.side * s * (a_dy / 2 + 0.08 + dy / 2)
            out.append(Placed(kind, room.name, float(c[0]), float(c[1]), 0.0, anchor.yaw, size, False))
    elif relation == "around":
        ys = [-a_dy / 4, a_dy / 4] if a_dy >= 1.4 else [0.0]
        for sx in (-1, 1):
            for yy in ys:
                c = base + anchor.front * sx * (a_dx / 2 + 0.08 + dx / 2) + anchor.side * yy
                yaw = anchor.yaw + (math.pi if sx > 0 else 0.0)
                out.append(Placed(kind, room.name, float(c[0]), float(c[1]), 0.0, yaw, size, False))
    return out


def furnish_room(rng: np.random.Generator, room: RoomSpec, doors: list[Door]) -> list[Placed]:
    spec = ROOM_TYPES[room.type]
    interior = room.interior(0.01)
    zones = _door_zones(room, doors)
    room_area = (interior[2] - interior[0]) * (interior[3] - interior[1])
    plan = [(c, True) for c in spec["required"]]
    optional = list(spec["optional"])
    rng.shuffle(optional)
    plan += [(c, False) for c in optional[: int(rng.integers(1, len(optional) + 1))]]
    placed: list[Placed] = []
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
                r = footprint(0, 0, size[0], size[1], yaw)
                m = 0.9
                if x1 - x0 < 2 * m + r[2] - r[0] or y1 - y0 < 2 * m + r[3] - r[1]:
                    cands = []
                else:
                    cands = [
                        Placed(
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


def rooms_reachable(
    rooms: list[RoomSpec], walls: list[WallSpec], furniture: list[Placed], params: GenParams, bounds: Rect
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


def place_objects(
    rng: np.random.Generator, supports: list[tuple[int, Placed]], n: int, room_types: dict[str, str]
) -> list[tuple[Placed, int]]:
    """(object, index of its support) for up to n small objects."""
    if not supports:
        return []
    used: list[str] = []
    on: dict[int, list[Rect]] = {k: [] for k, _ in supports}
    out: list[tuple[Placed, int]] = []
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
        r = footprint(0, 0, size[0], size[1], yaw)
        if top[2] - top[0] < r[2] - r[0] or top[3] - top[1] < r[3] - r[1]:
            continue
        for _ in range(15):
            x = float(rng.uniform(top[0] - r[0], top[2] - r[2]))
            y = float(rng.uniform(top[1] - r[1], top[3] - r[3]))
            cand = Placed(kind, sup.room, x, y, sup.size[2], yaw, size, False)
            if not any(_overlap(cand.rect, q, OBJECT_GAP) for q in on[k]):
                on[k].append(cand.rect)
                out.append((cand, k))
                used.append(category)
                break
    return out
