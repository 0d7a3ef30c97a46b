"""The navigator's own layers for one episode, on a fixed lattice around the odometry origin, and
the step's :class:`OccupancyGrid` cut from them and the memory.

Layers (bool, ``n x n`` cells of ``cell_m`` covering ``[-map_extent_m, map_extent_m]^2``):
``scan_free`` (floor on a free-space ray of a depth image), ``visited`` (where the base stood),
``bump`` (where a move bumped: forbidden to the base's centre), ``suspect`` (floor hidden below an
obstacle at the bottom of a view), ``fr_black`` (frontier points not to pick again) and
``goal_black`` (goal cells that did not show the target). ``bbox`` bounds everything known, so the
grid is built on a window around it only. The memory is read through its public queries
(:meth:`SpatialMemory.occupancy_extent`, :meth:`SpatialMemory.occupancy2d`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .config import NavigatorConfig
from .grid import GridWindow, OccupancyGrid, cost_map, drop_specks, scan_rays

LAYERS = ("scan_free", "visited", "bump", "suspect", "fr_black", "goal_black")


class NavLayers:
    def __init__(self, cfg: NavigatorConfig) -> None:
        self.cfg = cfg
        self.n = int(math.ceil(2 * cfg.map_extent_m / cfg.cell_m))
        self.origin = -cfg.map_extent_m  # world coordinate of global cell 0's lower edge
        self.lattice = GridWindow(self.origin, self.origin, cfg.cell_m, (self.n, self.n))
        self.reset()

    def reset(self) -> None:
        for name in LAYERS:
            setattr(self, name, np.zeros((self.n, self.n), dtype=bool))
        self.bbox: tuple[int, int, int, int] | None = None  # (r0, r1, c0, c1) in global cells

    # ------------------------------------------------------------------------ cells
    def cell(self, xy: np.ndarray) -> np.ndarray:
        """Global cell (row, col) of world xy (...x2)."""
        return self.lattice.world_to_cell(xy)

    def mark(self, layer: np.ndarray, rc: np.ndarray) -> None:
        rc = np.asarray(rc, dtype=np.int64).reshape(-1, 2)
        ok = (rc[:, 0] >= 0) & (rc[:, 0] < self.n) & (rc[:, 1] >= 0) & (rc[:, 1] < self.n)
        rc = rc[ok]
        if len(rc) == 0:
            return
        layer[rc[:, 0], rc[:, 1]] = True
        self.grow_bbox(rc[:, 0].min(), rc[:, 0].max(), rc[:, 1].min(), rc[:, 1].max())

    def grow_bbox(self, r0: int, r1: int, c0: int, c1: int) -> None:
        b = self.bbox
        self.bbox = (
            (int(r0), int(r1), int(c0), int(c1))
            if b is None
            else (min(b[0], int(r0)), max(b[1], int(r1)), min(b[2], int(c0)), max(b[3], int(c1)))
        )

    def disc(self, xy: np.ndarray, radius: float) -> np.ndarray:
        """Global cells (Nx2) whose centres lie within ``radius`` of world ``xy``."""
        k = int(math.ceil(radius / self.cfg.cell_m)) + 1
        c = self.cell(np.asarray(xy)[:2])
        dr, dc = np.mgrid[-k : k + 1, -k : k + 1]
        rc = np.stack([c[0] + dr.ravel(), c[1] + dc.ravel()], -1)
        centres = self.lattice.cell_to_world(rc)
        return rc[np.hypot(*(centres - np.asarray(xy)[:2]).T) <= radius + 1e-9]

    def window_of(self, layer: np.ndarray, window: GridWindow) -> np.ndarray:
        """The part of a global layer under a grid window."""
        res = window.res
        r0 = int(round((window.y0 - self.origin) / res))
        c0 = int(round((window.x0 - self.origin) / res))
        return layer[r0:, c0:][: window.shape[0], : window.shape[1]]

    # ------------------------------------------------------------------------ evidence
    def add_scan(self, frame: Any) -> None:
        """Free-space rays of the depth image (see :func:`.grid.scan_rays`)."""
        free, suspect = scan_rays(frame, self.cfg)
        if len(free):
            self.mark(self.scan_free, self.cell(free))
        if len(suspect):
            self.mark(self.suspect, self.cell(suspect))

    def add_visit(self, pose: np.ndarray) -> None:
        self.mark(self.visited, self.disc(pose[:2], self.cfg.agent_radius_m))
        c = self.cell(pose[:2])
        if 0 <= c[0] < self.n and 0 <= c[1] < self.n:
            self.bump[c[0], c[1]] = False  # we stand here: the centre may be here

    # ------------------------------------------------------------------------ the step's grid
    def grid(self, memory: Any, target: Any = None) -> OccupancyGrid:
        """The :class:`OccupancyGrid` on a window 1.5 m around everything known; the height map leaves
        out the voxels of ``target`` (a memory object) so that it does not hide itself."""
        cfg = self.cfg
        res = cfg.cell_m
        bands = cfg.occupancy_bands
        ext = memory.occupancy_extent(self.lattice, (self.n, self.n), bands)
        if ext is not None:
            self.grow_bbox(*ext)
        pad = int(math.ceil(1.5 / res))
        b = self.bbox or tuple(int(x) for x in (self.cell(np.zeros(2)).repeat(2)))
        r0, r1 = max(b[0] - pad, 0), min(b[1] + pad + 1, self.n)
        c0, c1 = max(b[2] - pad, 0), min(b[3] + pad + 1, self.n)
        H, W = r1 - r0, c1 - c0
        window = GridWindow(self.origin + c0 * res, self.origin + r0 * res, res, (H, W))
        occ = memory.occupancy2d(
            self.lattice, (H, W), bands, offset=(r0, c0), exclude=None if target is None else target.id
        )
        obstacle = drop_specks(occ.obstacle, cfg.min_obstacle_cells)
        known = occ.floor | self.scan_free[r0:r1, c0:c1] | self.visited[r0:r1, c0:c1] | obstacle
        suspect = self.suspect[r0:r1, c0:c1] & ~known
        cost, clearance = cost_map(obstacle, known, res, cfg, suspect)
        forbidden = self.bump[r0:r1, c0:c1]
        cost[forbidden] = np.inf
        return OccupancyGrid(
            window,
            obstacle,
            known,
            known & ~obstacle,
            clearance,
            cost,
            height=occ.height,
            suspect=suspect,
            forbidden=forbidden,
        )
