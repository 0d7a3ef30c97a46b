"""The navigable occupancy grid of a ground-navigation scene and shortest paths on it.

The apartments build theirs from room and obstacle rectangles (:func:`build_navgrid`), OmniGibson
from a scene's traversable map by the same rule (``envs/omnigibson/convert.py``). A cell is *free*
when a disc of the agent's radius centred anywhere in the cell touches no wall, no furniture and
nothing outside the rooms. The test is conservative and exact: a cell is blocked
if any part of it overlaps an obstacle, and a cell is free if its centre lies at least
``radius + resolution * sqrt(2)`` from every blocked cell's centre — which bounds the true
clearance of every point of the cell from below by ``radius``.

Segments are traced cell by cell (Amanatides & Woo), so a straight move whose cells are all free
keeps the agent's whole disc clear of obstacles (a segment through a cell corner only touches the
two side cells at that corner, which lies in the closure of the free cells it passes, so they are
skipped; this keeps the test stable under rounding). Shortest paths use Dijkstra on the 8-connected
free cells (no corner cutting) via ``scipy.sparse.csgraph``; paths are then shortened by string
pulling with the same segment test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from envs.base import NavGrid

Rect = tuple[float, float, float, float]  # x0, y0, x1, y1


def grid_shape(bounds: Rect, resolution: float, margin: float) -> tuple[float, float, int, int]:
    x0, y0 = bounds[0] - margin, bounds[1] - margin
    w = int(math.ceil((bounds[2] + margin - x0) / resolution))
    h = int(math.ceil((bounds[3] + margin - y0) / resolution))
    return x0, y0, h, w


def rect_cells(
    rect: Rect, x0: float, y0: float, res: float, shape: tuple[int, int], touching: bool
) -> tuple[slice, slice]:
    """Row/col slices of the cells a world rectangle covers.

    touching=True: every cell that overlaps the rectangle; False: cells whose centre is inside it.
    """

    # cell c spans [c, c + 1] in continuous cell units u = (x - x0) / res; its centre is c + 0.5
    def span(a: float, b: float, origin: float) -> tuple[int, int]:
        ua, ub = (a - origin) / res, (b - origin) / res
        if touching:  # c + 1 > ua and c < ub
            return int(math.floor(ua)), int(math.ceil(ub))
        return int(math.ceil(ua - 0.5)), int(math.floor(ub - 0.5)) + 1  # ua <= c + 0.5 <= ub

    c0, c1 = span(rect[0], rect[2], x0)
    r0, r1 = span(rect[1], rect[3], y0)
    h, w = shape
    return slice(max(r0, 0), min(r1, h)), slice(max(c0, 0), min(c1, w))


def build_navgrid(
    bounds: Rect,
    room_rects: list[Rect],
    obstacles: list[Rect],
    agent_radius: float,
    resolution: float,
    margin: float = 0.5,
) -> NavGrid:
    """Free cells for an agent of ``agent_radius`` inside the rooms, away from the obstacle rectangles."""
    x0, y0, h, w = grid_shape(bounds, resolution, margin)
    inside = np.zeros((h, w), dtype=bool)
    for r in room_rects:
        inside[rect_cells(r, x0, y0, resolution, (h, w), touching=False)] = True
    blocked = ~inside
    for r in obstacles:
        blocked[rect_cells(r, x0, y0, resolution, (h, w), touching=True)] = True
    dist = ndimage.distance_transform_edt(~blocked) * resolution
    free = dist >= agent_radius + resolution * math.sqrt(2)
    return NavGrid(free=free, x0=x0, y0=y0, resolution=resolution, agent_radius=agent_radius)


def main_component(grid: NavGrid) -> np.ndarray:
    """HxW bool: the largest 8-connected free region (starts, goals and exploration live here; all False
    when no cell is free)."""
    labels, n = ndimage.label(grid.free, structure=np.ones((3, 3), dtype=bool))
    if n == 0:
        return np.zeros(grid.free.shape, dtype=bool)
    counts = np.bincount(labels.ravel())
    counts[0] = 0
    return labels == int(np.argmax(counts))


def segment_cells(grid: NavGrid, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cells (row, col) a segment a->b passes through, in order, and the parameter t in [0, 1] where it enters each."""
    res = grid.resolution
    p = np.array([(a[0] - grid.x0) / res, (a[1] - grid.y0) / res])
    q = np.array([(b[0] - grid.x0) / res, (b[1] - grid.y0) / res])
    d = q - p
    cell = np.floor(p).astype(np.int64)
    end = np.floor(q).astype(np.int64)
    step = np.sign(d).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_max = np.where(d != 0, ((cell + (step > 0)) - p) / d, np.inf)
        t_delta = np.where(d != 0, np.abs(1.0 / d), np.inf)
    cells = [(cell[1], cell[0])]
    ts = [0.0]
    n = int(abs(end[0] - cell[0]) + abs(end[1] - cell[1]))
    for _ in range(n):
        t = min(t_max[0], t_max[1])
        if t > 1.0:
            break
        if abs(t_max[0] - t_max[1]) <= 1e-9:  # through a cell corner: the side cells are only touched at a point
            cell += step
            t_max += t_delta
        else:
            axis = 0 if t_max[0] < t_max[1] else 1
            cell[axis] += step[axis]
            t_max[axis] += t_delta[axis]
        cells.append((cell[1], cell[0]))
        ts.append(float(t))
    return np.array(cells, dtype=np.int64), np.array(ts)


def _free_at(grid: NavGrid, rc: np.ndarray) -> np.ndarray:
    h, w = grid.free.shape
    ok = (rc[:, 0] >= 0) & (rc[:, 0] < h) & (rc[:, 1] >= 0) & (rc[:, 1] < w)
    out = np.zeros(len(rc), dtype=bool)
    out[ok] = grid.free[rc[ok, 0], rc[ok, 1]]
    return out


def free_fraction(grid: NavGrid, a: np.ndarray, b: np.ndarray, backoff_m: float = 1e-3) -> float:
    """How far (as a fraction of a->b) the agent can go before entering a non-free cell (1.0 = all of it)."""
    cells, ts = segment_cells(grid, a, b)
    ok = _free_at(grid, cells)
    if ok.all():
        return 1.0
    first = int(np.argmin(ok))
    if first == 0:
        return 0.0
    length = float(np.hypot(b[0] - a[0], b[1] - a[1]))
    return max(0.0, ts[first] - backoff_m / max(length, 1e-12))


def segment_free(grid: NavGrid, a: np.ndarray, b: np.ndarray) -> bool:
    cells, _ = segment_cells(grid, a, b)
    return bool(_free_at(grid, cells).all())


@dataclass
class Planner:
    """Shortest paths on a :class:`NavGrid` (8-connected free cells, no corner cutting)."""

    grid: NavGrid
    _index: np.ndarray = field(init=False, repr=False)
    _cells: np.ndarray = field(init=False, repr=False)
    _graph: csr_matrix = field(init=False, repr=False)

    def __post_init__(self) -> None:
        free = self.grid.free
        h, w = free.shape
        self._index = np.full((h, w), -1, dtype=np.int64)
        self._cells = np.argwhere(free)
        self._index[free] = np.arange(len(self._cells))
        rows, cols, wts = [], [], []
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            r0, r1 = max(0, -dr), h - max(0, dr)
            c0, c1 = max(0, -dc), w - max(0, dc)
            a = free[r0:r1, c0:c1]
            b = free[r0 + dr : r1 + dr, c0 + dc : c1 + dc]
            ok = a & b
            if dr and dc:  # diagonal: both orthogonal neighbours must be free too
                ok &= free[r0 + dr : r1 + dr, c0:c1] & free[r0:r1, c0 + dc : c1 + dc]
            rr, cc = np.nonzero(ok)
            rr, cc = rr + r0, cc + c0
            rows.append(self._index[rr, cc])
            cols.append(self._index[rr + dr, cc + dc])
            wts.append(np.full(len(rr), math.hypot(dr, dc)))
        r, c, wt = np.concatenate(rows), np.concatenate(cols), np.concatenate(wts)
        n = len(self._cells)
        self._graph = csr_matrix(
            (np.concatenate([wt, wt]), (np.concatenate([r, c]), np.concatenate([c, r]))), shape=(n, n)
        )

    # ------------------------------------------------------------------------------------------
    def cell_of(self, xy: np.ndarray) -> tuple[int, int]:
        rc = self.grid.world_to_cell(np.asarray(xy, dtype=np.float64)[:2])
        return int(rc[0]), int(rc[1])

    def nearest_free_cell(self, xy: np.ndarray) -> tuple[int, int]:
        """The free cell whose centre is closest to xy."""
        if len(self._cells) == 0:
            raise ValueError("the navigable grid has no free cell")
        centres = self.grid.cell_to_world(self._cells)
        k = int(np.argmin(np.sum((centres - np.asarray(xy, dtype=np.float64)[:2]) ** 2, axis=1)))
        return int(self._cells[k, 0]), int(self._cells[k, 1])

    def distance_field(self, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Geodesic distance (metres, HxW, inf where unreachable) from the nearest of the source cells (Nx2 rc),
        and for every cell its predecessor index towards that source (-9999 at sources / unreachable)."""
        src = self._index[sources[:, 0], sources[:, 1]] if len(sources) else np.zeros(0, np.int64)
        src = np.unique(src[src >= 0])
        h, w = self.grid.free.shape
        dist = np.full((h, w), np.inf)
        pred_full = np.full((h, w), -9999, dtype=np.int64)
        if len(src) == 0:
            return dist, pred_full
        d, pred, _ = dijkstra(self._graph, directed=False, indices=src, min_only=True, return_predecessors=True)
        dist[self._cells[:, 0], self._cells[:, 1]] = d * self.grid.resolution
        pred_full[self._cells[:, 0], self._cells[:, 1]] = pred
        return dist, pred_full

    def path_to_source(self, pred: np.ndarray, start: tuple[int, int]) -> np.ndarray:
        """Cells (Nx2 rc) from ``start`` to its nearest source along a :meth:`distance_field` predecessor map."""
        out = [start]
        i = self._index[start]
        if i < 0:
            raise ValueError(f"start cell {start} is not free")
        p = pred[start]
        while p >= 0:
            rc = self._cells[p]
            out.append((int(rc[0]), int(rc[1])))
            p = pred[rc[0], rc[1]]
        return np.array(out, dtype=np.int64)

    def components(self) -> np.ndarray:
        """HxW labels of the 8-connected free components (0 = not free)."""
        labels, _ = ndimage.label(self.grid.free, structure=np.ones((3, 3), dtype=bool))
        return labels

    def smooth(self, xy: np.ndarray) -> np.ndarray:
        """Shorten a polyline (Nx2, consecutive points joined by free segments) by string pulling."""
        xy = np.asarray(xy, dtype=np.float64)
        if len(xy) <= 2:
            return xy
        out = [xy[0]]
        i = 0
        while i < len(xy) - 1:
            j = len(xy) - 1
            while j > i + 1 and not segment_free(self.grid, xy[i], xy[j]):
                j -= 1
            out.append(xy[j])
            i = j
        return np.array(out)

    def plan(self, start_xy: np.ndarray, goal_cells: np.ndarray) -> np.ndarray | None:
        """A smoothed world-xy path from start_xy to the nearest goal cell (None when none is reachable).

        The first point is ``start_xy`` itself when it lies in a free cell, else the nearest free cell centre.
        """
        dist, pred = self.distance_field(goal_cells)
        start = self.cell_of(start_xy)
        h, w = self.grid.free.shape
        if not (0 <= start[0] < h and 0 <= start[1] < w) or not self.grid.free[start]:
            start = self.nearest_free_cell(start_xy)
            first = self.grid.cell_to_world(np.array(start))
        else:
            first = np.asarray(start_xy, dtype=np.float64)[:2]
        if not np.isfinite(dist[start]):
            return None
        cells = self.path_to_source(pred, start)
        pts = self.grid.cell_to_world(cells)
        pts[0] = first
        return self.smooth(pts)
