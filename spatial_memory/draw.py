"""Drawing on a ``TopDownFrame`` in plain numpy: polygon fills, map levels, overlays.

The same functions draw the environments' ground-truth maps and the memory's maps (docs/ARCHITECTURE.md §4):
medium = walls and object footprints black on white, hard = walls only, easy = a colour image of
the top-most surfaces. Overlays follow GST-Bench: trajectory red, start blue, agent as an arrow.
"""

from __future__ import annotations

import numpy as np

from .topdown import LEVELS, TopDownFrame

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
RED = (220, 30, 30)
BLUE = (30, 60, 230)
GREEN = (20, 160, 60)


def polygon_mask(frame: TopDownFrame, polygons_xy: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """Boolean HxW mask of pixels whose centre lies inside any of the world-xy polygons (even-odd rule)."""
    mask = np.zeros((frame.height, frame.width), dtype=bool) if out is None else out
    for poly in polygons_xy:
        uv = frame.world_to_pixel(np.asarray(poly, dtype=np.float64).reshape(-1, 2))
        c0, r0 = np.floor(uv.min(axis=0)).astype(int)
        c1, r1 = np.ceil(uv.max(axis=0)).astype(int)
        c0, r0 = max(c0, 0), max(r0, 0)
        c1, r1 = min(c1, frame.width), min(r1, frame.height)
        if c0 >= c1 or r0 >= r1:
            continue
        py, px = np.mgrid[r0:r1, c0:c1].astype(np.float64) + 0.5
        inside = np.zeros(px.shape, dtype=bool)
        a, b = uv, np.roll(uv, -1, axis=0)
        for (xa, ya), (xb, yb) in zip(a, b):
            if ya == yb:
                continue
            crosses = (ya > py) != (yb > py)
            x_at = xa + (py - ya) * (xb - xa) / (yb - ya)
            inside ^= crosses & (px < x_at)
        mask[r0:r1, c0:c1] |= inside
    return mask


def box_footprint(center: np.ndarray, size: np.ndarray, R: np.ndarray | None = None) -> np.ndarray:
    """4x2 world-xy corners of an oriented 3D box's footprint (convex hull of its 8 corners in xy)."""
    center = np.asarray(center, dtype=np.float64)
    half = np.asarray(size, dtype=np.float64) / 2
    R = np.eye(3) if R is None else np.asarray(R, dtype=np.float64)
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
    corners = (signs * half) @ R.T + center
    return convex_hull_2d(corners[:, :2])


def convex_hull_2d(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull of Nx2 points (monotone chain)."""
    pts = np.unique(np.round(np.asarray(points, dtype=np.float64), 12), axis=0)
    if len(pts) <= 2:
        return pts

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[np.ndarray] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[np.ndarray] = []
    for p in pts[::-1]:
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def compose_level(
    level: str, walls: np.ndarray, objects: np.ndarray | None = None, colour: np.ndarray | None = None
) -> np.ndarray:
    """The map image (uint8 HxWx3) of one abstraction level from boolean layers.

    easy needs ``colour`` (top-most surface colours, white where nothing is known); medium draws
    walls and object footprints black on white; hard draws walls only.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown top-down level {level!r}; expected one of {LEVELS}")
    if level == "easy":
        if colour is None:
            raise ValueError("the easy level needs a colour image")
        return np.ascontiguousarray(colour, dtype=np.uint8).copy()
    img = np.full(walls.shape + (3,), 255, dtype=np.uint8)
    black = walls if level == "hard" or objects is None else (walls | objects)
    img[black] = 0
    return img


def _disk_mask(frame: TopDownFrame, uv: np.ndarray, radius_px: float) -> tuple[slice, slice, np.ndarray] | None:
    r = max(radius_px, 0.5)
    c0, r0 = int(np.floor(uv[0] - r)), int(np.floor(uv[1] - r))
    c1, r1 = int(np.ceil(uv[0] + r)) + 1, int(np.ceil(uv[1] + r)) + 1
    c0, r0, c1, r1 = max(c0, 0), max(r0, 0), min(c1, frame.width), min(r1, frame.height)
    if c0 >= c1 or r0 >= r1:
        return None
    py, px = np.mgrid[r0:r1, c0:c1].astype(np.float64) + 0.5
    return slice(r0, r1), slice(c0, c1), (px - uv[0]) ** 2 + (py - uv[1]) ** 2 <= r * r


def draw_disk(img: np.ndarray, frame: TopDownFrame, xy: np.ndarray, radius_px: float, colour=RED) -> np.ndarray:
    hit = _disk_mask(frame, frame.world_to_pixel(np.asarray(xy, dtype=np.float64)[:2]), radius_px)
    if hit is not None:
        rs, cs, m = hit
        img[rs, cs][m] = colour
    return img


def draw_polyline(
    img: np.ndarray, frame: TopDownFrame, xy: np.ndarray, colour=RED, thickness_px: float = 3.0
) -> np.ndarray:
    """A world-xy polyline (Nx2) drawn with round joins: the union of disks of radius
    ``thickness_px / 2`` centred at points spaced at most half a pixel along it (vectorised)."""
    uv = frame.world_to_pixel(np.asarray(xy, dtype=np.float64).reshape(-1, 2)[:, :2])
    if len(uv) == 0:
        return img
    seg = uv[1:] - uv[:-1]
    n = np.maximum(np.ceil(np.linalg.norm(seg, axis=1) / 0.5).astype(np.int64), 1)
    owner = np.repeat(np.arange(len(seg)), n)
    frac = (np.arange(len(owner)) - np.repeat(np.cumsum(n) - n, n) + 1) / np.repeat(n, n)
    pts = np.concatenate([uv[:1], uv[:-1][owner] + seg[owner] * frac[:, None]])
    q = np.round(pts * 4).astype(np.int64) + (1 << 30)  # drop samples closer than a quarter pixel
    pts = pts[np.unique((q[:, 0] << 32) | q[:, 1], return_index=True)[1]]
    r = max(thickness_px / 2, 0.5)
    R = int(np.ceil(r)) + 1
    base = np.floor(pts).astype(np.int64)
    layer = np.zeros(img.shape[:2], dtype=bool)
    for dr in range(-R, R + 1):
        for dc in range(-R, R + 1):
            c, rr = base[:, 0] + dc, base[:, 1] + dr
            hit = (
                ((c + 0.5 - pts[:, 0]) ** 2 + (rr + 0.5 - pts[:, 1]) ** 2 <= r * r)
                & (c >= 0)
                & (c < frame.width)
                & (rr >= 0)
                & (rr < frame.height)
            )
            layer[rr[hit], c[hit]] = True
    img[layer] = colour
    return img


def draw_arrow(
    img: np.ndarray, frame: TopDownFrame, xy: np.ndarray, yaw_rad: float, length_px: float = 22.0, colour=GREEN
) -> np.ndarray:
    """A filled arrowhead at world xy pointing along world yaw (radians from +x, CCW)."""
    tip_dir = np.array([np.cos(yaw_rad), np.sin(yaw_rad)])
    side = np.array([-tip_dir[1], tip_dir[0]])
    s = frame.metres_per_pixel * length_px
    c = np.asarray(xy, dtype=np.float64)[:2]
    tri = np.array(
        [
            c + tip_dir * s * 0.6,
            c - tip_dir * s * 0.4 + side * s * 0.35,
            c - tip_dir * s * 0.2,
            c - tip_dir * s * 0.4 - side * s * 0.35,
        ]
    )
    img[polygon_mask(frame, [tri])] = colour
    return img
