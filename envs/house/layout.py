"""The floor plan of an apartment: rooms by binary space partitioning, room types and names, doors
(a random spanning tree of the rooms that share enough wall, plus a few loops) and the walls
(room boundaries minus the door gaps). Steps 1-3 of :func:`.generator.generate_house`.
"""

from __future__ import annotations

import numpy as np

from .catalog import WALL_HEIGHT, WALL_THICKNESS
from .spec import Door, Rect, WallSpec

MIN_ROOM_SIDE = 2.6
DOOR_MARGIN = 0.35  # door gap to the nearest wall corner


def snap(v: float, step: float = 0.05) -> float:
    return round(round(v / step) * step, 6)


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


def split_footprint(rng: np.random.Generator, W: float, H: float, n: int) -> list[Rect]:
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
        cut = snap(float(rng.uniform(lo + MIN_ROOM_SIDE, hi - MIN_ROOM_SIDE)))
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


def connected(n: int, edges: list[tuple[int, int]]) -> bool:
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in edges:
        parent[find(i)] = find(j)
    return len({find(i) for i in range(n)}) == 1


def door_edges(rects: list[Rect], max_door: float) -> list[tuple[int, int, tuple]]:
    out = []
    for i in range(len(rects)):
        for j in range(i + 1, len(rects)):
            s = _shared(rects[i], rects[j])
            if s is not None and s[3] - s[2] >= max_door + 2 * DOOR_MARGIN:
                out.append((i, j, s))
    return out


def drop_corner_room(
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
        if connected(len(rest), [(i, j) for i, j, _ in door_edges(rest, max_door)]):
            return rest
    return rects


def room_types(rng: np.random.Generator, rects: list[Rect]) -> list[str]:
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


def name_rooms(types: list[str]) -> list[str]:
    total = {t: types.count(t) for t in set(types)}
    seen: dict[str, int] = {}
    names = []
    for t in types:
        seen[t] = seen.get(t, 0) + 1
        names.append(t if total[t] == 1 else f"{t}_{seen[t]}")
    return names


def make_doors(
    rng: np.random.Generator, rects: list[Rect], types: list[str], names: list[str], widths: tuple[float, float]
) -> list[Door]:
    edges = door_edges(rects, widths[1])
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
        w = snap(float(rng.uniform(*widths)))
        mid = snap(float(rng.uniform(lo + DOOR_MARGIN + w / 2, hi - DOOR_MARGIN - w / 2)), 0.01)
        center = (c, mid) if vertical else (mid, c)
        doors.append(Door((names[i], names[j]), center, vertical, w))
    return doors


def make_walls(rects: list[Rect], doors: list[Door]) -> list[WallSpec]:
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
