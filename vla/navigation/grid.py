"""The navigator's 2D map: the lattice window (``GridWindow``), one step's ``OccupancyGrid``, the
cost map, and the free-space rays of a depth image (``scan_rays``).

Cells: rows along y, columns along x, in the odometry frame (:class:`spatial_memory.lattice.CellLattice`).
An **obstacle** cell holds an occupied memory voxel in the base's height band (hit at least
``min_obstacle_hits`` times) or comes from bumps,
**known free** cells are seen floor, cells on a free-space ray, or where the base stood; a view
that cannot vouch for the floor marks it **suspect**. The **cost** is infinite closer than
``agent_radius_m + lethal_margin_m`` to an obstacle, expensive up to ``agent_radius_m + inflation_m``,
then a falling clearance cost; ``unknown_cost`` extra through unknown and ``suspect_cost`` through
suspect cells (optimistic planning: unknown floor is usually free).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from spatial_memory.lattice import CellLattice

from .config import NavigatorConfig


@dataclass(frozen=True)
class GridWindow(CellLattice):
    """A window of the global lattice: cell (row, col) has its centre at
    ``(x0 + (col + 0.5) res, y0 + (row + 0.5) res)`` (rows = y, cols = x, odometry frame)."""

    x0: float
    y0: float
    res: float
    shape: tuple[int, int]

    @property
    def resolution(self) -> float:
        return self.res

    def inside(self, rc: np.ndarray) -> np.ndarray:
        rc = np.asarray(rc)
        return (rc[..., 0] >= 0) & (rc[..., 0] < self.shape[0]) & (rc[..., 1] >= 0) & (rc[..., 1] < self.shape[1])

    def centres(self) -> np.ndarray:
        r, c = np.mgrid[0 : self.shape[0], 0 : self.shape[1]]
        return self.cell_to_world(np.stack([r, c], -1))


@dataclass(eq=False)
class OccupancyGrid:
    """One step's 2D map (all arrays ``window.shape``): ``obstacle``, ``known``, ``free`` (known and not
    obstacle), ``clearance`` (metres to the nearest obstacle cell), ``cost`` (per cell, inf = lethal),
    ``height`` (top of the obstacle voxels, -inf where none; the target's own voxels left out),
    ``suspect`` (unknown floor that a view could not vouch for: see :func:`scan_rays`), ``forbidden``
    (cells where a move bumped: lethal whatever the map says)."""

    window: GridWindow
    obstacle: np.ndarray
    known: np.ndarray
    free: np.ndarray
    clearance: np.ndarray
    cost: np.ndarray
    height: np.ndarray
    suspect: np.ndarray | None = None
    forbidden: np.ndarray | None = None  # where a move bumped: the base's centre may not go there

    @property
    def unknown(self) -> np.ndarray:
        return ~self.known


def drop_specks(obstacle: np.ndarray, min_cells: int) -> np.ndarray:
    """``obstacle`` without its 8-connected patches of fewer than ``min_cells`` cells (depth noise that
    survived the hit count); unchanged for ``min_cells <= 1``."""
    if min_cells <= 1 or not obstacle.any():
        return obstacle
    n, labels, stats, _ = cv2.connectedComponentsWithStats(obstacle.astype(np.uint8), connectivity=8)
    keep = stats[:, cv2.CC_STAT_AREA] >= min_cells
    keep[0] = False  # background
    return keep[labels]


def cost_map(
    obstacle: np.ndarray, known: np.ndarray, res: float, cfg: NavigatorConfig, suspect: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(cost, clearance) from obstacle and known (and suspect) masks: see the module doc for the terms."""
    if obstacle.any():
        clearance = (
            cv2.distanceTransform((~obstacle).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE).astype(np.float64)
            * res
        )
    else:
        clearance = np.full(obstacle.shape, np.inf)
    r = cfg.agent_radius_m
    lethal = r + cfg.lethal_margin_m
    infl = r + cfg.inflation_m
    cost = np.ones(obstacle.shape, dtype=np.float64)
    cost += cfg.unknown_cost * ~known
    if suspect is not None:
        cost += cfg.suspect_cost * (suspect & ~known)
    cost += cfg.inflation_cost * (clearance < infl)
    if cfg.comfort_m > infl:
        cost += cfg.clearance_cost * np.clip((cfg.comfort_m - clearance) / (cfg.comfort_m - infl), 0.0, 1.0)
    cost[clearance < lethal] = np.inf
    return cost, clearance


def half_fovs(frame: Any) -> tuple[float, float]:
    """(vertical, horizontal) half field of view of a camera frame, radians."""
    H, W = frame.depth.shape
    K = frame.K
    return math.atan2(H / 2, abs(K[1, 1])), math.atan2(W / 2, abs(K[0, 0]))


def scan_rays(frame: Any, cfg: NavigatorConfig) -> tuple[np.ndarray, np.ndarray]:
    """World xy samples (Nx2 each, every half cell) of the floor a depth image shows to be free, and
    of the floor it cannot vouch for.

    Per image column (every ``scan_col_stride``-th) whose lowest pixel sees the floor: free up to the
    nearest pixel in the obstacle band (less ``scan_margin_m``), or, when the column shows no
    obstacle, up to its farthest floor pixel; capped at ``scan_max_m``. A level camera never sees
    the floor right in front of the base; these rays mark it free when the column showed nothing in
    the way. A column whose lowest pixel already hits an obstacle (a bed whose near edge lies below
    the view) marks the floor up to that pixel *suspect* instead: something may reach closer. A very
    low object close by can still be missed entirely; the bump sensor covers that."""
    depth = frame.depth
    H, W = depth.shape
    rs, cs = max(int(cfg.scan_row_stride), 1), max(int(cfg.scan_col_stride), 1)
    rows = np.arange(H - 1, -1, -rs)[::-1]  # always include the bottom row
    v, u = np.meshgrid(rows.astype(np.float64), np.arange(0, W, cs, dtype=np.float64), indexing="ij")
    D = depth[rows][:, ::cs].astype(np.float64)
    valid = np.isfinite(D) & (D > 0.05)
    D = np.where(valid, D, 0.0)
    K = frame.K
    T = frame.T_world_cam
    x = (u - K[0, 2]) / K[0, 0] * D
    y = (v - K[1, 2]) / K[1, 1] * D
    p = np.stack([x, y, D], -1) @ T[:3, :3].T + T[:3, 3]
    cam = T[:3, 3]
    rho = np.hypot(p[..., 0] - cam[0], p[..., 1] - cam[1])
    lo, hi = cfg.obstacle_band_m
    obst = valid & (p[..., 2] >= lo) & (p[..., 2] < hi)
    floor = valid & (p[..., 2] < cfg.floor_max_z_m)
    rho_obs = np.where(obst, rho, np.inf).min(axis=0)
    rho_floor = np.where(floor, rho, 0.0).max(axis=0)
    # the lowest valid pixel of each column: the floor (or a low step), or an obstacle
    last = valid.shape[0]
    idx = np.where(valid.any(axis=0), last - 1 - np.argmax(valid[::-1], axis=0), 0)
    cols = np.arange(valid.shape[1])
    bottom_obst = obst[idx, cols] & valid[idx, cols]
    rng = np.where(np.isfinite(rho_obs), rho_obs - cfg.scan_margin_m, rho_floor)
    rng = np.where(bottom_obst, 0.0, np.clip(rng, 0.0, cfg.scan_max_m))
    rng_suspect = np.where(bottom_obst, np.minimum(rho[idx, cols], cfg.scan_max_m), 0.0)
    # horizontal bearing of each sampled column (its principal-row ray)
    uc = u[0]
    d_cam = np.stack([(uc - K[0, 2]) / K[0, 0], np.zeros_like(uc), np.ones_like(uc)], -1)
    d_w = d_cam @ T[:3, :3].T
    n = np.hypot(d_w[:, 0], d_w[:, 1])
    ok = n > 1e-6
    dirs = np.where(ok[:, None], d_w[:, :2] / np.maximum(n, 1e-12)[:, None], 0.0)
    out = []
    for r in (rng, rng_suspect):
        good = ok & (r > 0)
        if not good.any():
            out.append(np.zeros((0, 2)))
            continue
        s = np.arange(0.0, float(r[good].max()) + 1e-9, cfg.cell_m / 2)
        pts = cam[:2] + dirs[good][:, None, :] * s[None, :, None]
        out.append(pts[s[None, :] <= r[good][:, None]])
    return out[0], out[1]
