"""Object navigation from the agent's own observations and its :class:`SpatialMemory` (no scene truth).

``MemoryNavigator.act(obs, memory)`` turns "go to the <category>" into base actions
``[forward_m, left_m, yaw_rad]``. The caller integrates the frame into the memory before ``act``.
Nothing here reads an env: only the observation (ego frame, odometry ``obs.state``, the bump flag
``obs.sensors["blocked"]``), the memory and the action limits.

Each step the navigator rebuilds a 2D grid in the odometry frame (the memory's frame):

- **obstacle**: an occupied voxel (``hits > 0``) centred in the base's height band
  (``obstacle_band_m``), or an obstacle inferred from bumps (below);
- **known free**: the floor was seen there (a voxel below ``floor_max_z_m``), or the cell lies on a
  free-space ray of a depth image (per image column whose lowest pixel sees the floor: the floor up
  to the first obstacle pixel; this fills the blind ring a level camera cannot see in front of the
  base), or the base stood there. A column whose lowest pixel already hits an obstacle (a bed whose
  near edge lies below the view) marks its floor **suspect** instead; **unknown**: everything else;
- **cost**: infinite closer than ``agent_radius_m + lethal_margin_m`` to an obstacle, expensive up to
  ``agent_radius_m + inflation_m``, then a falling clearance cost; ``unknown_cost`` extra through
  unknown and ``suspect_cost`` through suspect cells (optimistic planning: unknown floor is usually
  free). Planning is one Dijkstra field from the base (numba), which ranks every goal at once.

EXPLORE (target not in memory): turn once on the spot, then pick a frontier (a cluster of known free
cells next to unknown ones, not touching an obstacle) by path cost minus a gain for long clusters
plus a penalty for turning; drive to the cheapest cell within ``frontier_reach_m`` of it, face the
unknown side, and blacklist it if it is still there. GOTO (target category in memory with at least
``min_target_points``): goal cells lie within ``approach_m`` (else ``approach_max_m``) of the
target's box footprint and see at least two points of the box from the camera's height (inside the
vertical field of view, and a 2.5D ray through the height map); drive to the cheapest, face the
target, and stop once the own camera shows it (``phase = "done"``, zero actions). A goal from which
the target does not show is blacklisted and the next one tried. Paths are followed by pure pursuit
(the farthest path point within ``lookahead_m`` reachable in a straight line), translating straight
at it while turning towards it, and turning on the spot first when it lies more than
``turn_in_place_deg`` off the view (the camera sees where the base goes).

Bumps (``obs.sensors["blocked"]``, e.g. a low object below the view): a holonomic base probes short
moves fanning out around the blocked direction (this threads gaps narrower than the map can
resolve); if one gets through it carries on, else the spot ahead is forbidden and an obstacle arc
is assumed in front. When nothing is reachable, lethal cells are relaxed in two levels (down to
``agent_radius_m + relaxed_m``, keeping to the middle of the gap). The path is checked against the
newest grid every step and replanned every ``replan_every`` steps, after a bump, when it crosses a
new obstacle or the target moves; a goal that takes far longer than its path should, collects
``max_bumps`` bumps, or where the base makes no progress for ``stuck_steps``, is blacklisted;
frontier choice has hysteresis (``switch_margin_m``) so two goals cannot alternate.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

import cv2
import numba
import numpy as np
from scipy import ndimage

from envs.base import CellLattice

PHASES = ("explore", "goto", "done")


# ============================================================================== configuration
@dataclass(frozen=True)
class NavigatorConfig:
    """Every knob of :class:`MemoryNavigator` (metres, radians where named ``_rad``, degrees ``_deg``)."""

    # map
    cell_m: float = 0.05  # 2D grid cell (best equal to the memory's voxel size)
    map_extent_m: float = 30.0  # the grid covers [-extent, extent]^2 around the odometry origin
    obstacle_band_m: tuple[float, float] = (0.1, 2.3)  # voxel centres in this height band are obstacles
    floor_max_z_m: float = 0.05  # voxel centres below this are floor
    min_obstacle_hits: int = 1
    scan_max_m: float = 8.0  # free-space rays of the depth image, up to this range
    scan_margin_m: float = 0.1  # stop a free-space ray this short of the first obstacle pixel
    scan_col_stride: int = 4
    scan_row_stride: int = 2
    # costs (agent_radius_m: the base's radius; lethal_margin_m and inflation_m are added to it)
    agent_radius_m: float = 0.2
    lethal_margin_m: float = 0.1
    inflation_m: float = 0.2
    inflation_cost: float = 6.0
    comfort_m: float = 0.65  # clearance below which a cell costs up to clearance_cost extra
    clearance_cost: float = 1.5
    unknown_cost: float = 1.0  # extra cost per metre through unknown cells
    suspect_cost: float = 6.0  # ... and through unknown floor hidden below an obstacle at the bottom of a view
    relaxed_cost: float = (
        20.0  # nothing reachable: lethal cells with clearance >= agent_radius_m + relaxed_m[level-1] cost this
    )
    relaxed_m: tuple[float, float] = (0.05, 0.01)  # (level 1, level 2): squeezing through gaps the lethal margin closes
    bump_radius_m: float = 0.04  # a bump forbids a disc this big just ahead of where the base stopped
    probe_m: float = 0.05  # after a bump, probe moves this long fanning out around the blocked direction (0 = off)
    max_bumps: int = 8  # bumps on one goal before it is given up
    # exploration
    initial_turns: int = -1  # turns on the spot at the start (-1: enough for a full circle)
    min_frontier_cells: int = 6
    frontier_reach_m: float = 0.9  # drive to a cell within this distance of the frontier
    frontier_gain_m: float = 0.4  # score bonus per metre of frontier (capped at 3 m)
    turn_cost_m: float = 0.6  # score penalty for a frontier straight behind (linear in the bearing)
    switch_margin_m: float = 1.0  # hysteresis: a new frontier must be this much better
    blacklist_radius_m: float = 0.6
    # goal (target object)
    min_target_points: int = 3  # object sample points before the target counts as localised
    approach_m: float = 0.7  # goal cells within this horizontal distance of the target's box
    approach_max_m: float = 0.9  # fallback when no goal cell within approach_m sees the target
    success_radius_m: float = 1.0  # own done test: distance to the box ...
    min_visible_fraction: float = 0.001  # ... and the target's share of the ego image
    fov_margin_deg: float = 5.0
    # control
    max_forward_m: float = 0.25  # replaced by the action space's bounds (set_action_limits)
    max_left_m: float = 0.25
    max_turn_rad: float = math.radians(30.0)
    turn_in_place_deg: float = 40.0  # translate only when the path heading is within this of the view
    lookahead_m: float = 1.0
    goal_tolerance_m: float = 0.08
    face_tolerance_deg: float = 4.0
    replan_every: int = 5
    stuck_steps: int = 30  # no progress: less than stuck_distance_m net motion over this many steps
    stuck_distance_m: float = 0.3
    resume_after_done: int = (
        5  # still asked to act this many steps after "done": our estimate was wrong, go closer (0 = stay)
    )

    def __post_init__(self) -> None:
        if not (self.cell_m > 0 and self.map_extent_m > 4 * self.cell_m):
            raise ValueError(
                "NavigatorConfig needs cell_m > 0 and a map extent of several cells, "
                f"got {self.cell_m}, {self.map_extent_m}"
            )
        lo, hi = self.obstacle_band_m
        if not lo < hi or self.floor_max_z_m > lo:
            raise ValueError(
                "NavigatorConfig needs floor_max_z_m <= obstacle_band_m[0] < obstacle_band_m[1], "
                f"got {self.floor_max_z_m}, {self.obstacle_band_m}"
            )
        if self.approach_max_m < self.approach_m or self.approach_m <= 0:
            raise ValueError("NavigatorConfig needs 0 < approach_m <= approach_max_m")
        object.__setattr__(self, "obstacle_band_m", (float(lo), float(hi)))
        object.__setattr__(self, "relaxed_m", tuple(float(m) for m in self.relaxed_m))
        if len(self.relaxed_m) != 2:
            raise ValueError(f"NavigatorConfig.relaxed_m needs two clearances (level 1, level 2), got {self.relaxed_m}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "NavigatorConfig":
        d = dict(d or {})
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown navigator option(s) {unknown}; valid: {sorted(f.name for f in fields(cls))}")
        return cls(**d)


@dataclass(frozen=True)
class Limits:
    max_forward: float
    max_left: float
    max_turn: float  # radians

    @property
    def holonomic(self) -> bool:
        return self.max_left > 1e-6


# ============================================================================== small helpers
def wrap(a: float) -> float:
    """Radians to (-pi, pi]."""
    a = math.fmod(a + math.pi, 2 * math.pi)
    if a <= 0:
        a += 2 * math.pi
    return a - math.pi


def normalise_category(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", str(name).strip().lower())


def parse_target(instruction: str) -> str:
    """The target category of "go to the <category>" (normalised: lower case, words separated by spaces)."""
    text = normalise_category(instruction).rstrip(".!?")
    m = re.match(r"^(?:please )?(?:go|navigate|walk|move|drive) (?:to|towards|toward) (?:the |a |an )?(.+)$", text)
    if not m:
        raise ValueError(f"cannot parse a target from the instruction {instruction!r}; expected 'go to the <category>'")
    return m.group(1).strip()


def box_distance(xy: np.ndarray, center: np.ndarray, size: np.ndarray, yaw: float) -> np.ndarray:
    """Horizontal distance from points (...x2) to a yawed box footprint (0 inside)."""
    xy = np.asarray(xy, dtype=np.float64)
    c, s = math.cos(yaw), math.sin(yaw)
    d = xy - np.asarray(center, dtype=np.float64)[:2]
    local = np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)
    out = np.maximum(np.abs(local) - np.asarray(size, dtype=np.float64)[:2] / 2, 0.0)
    return np.hypot(out[..., 0], out[..., 1])


def drive_action(pose: np.ndarray, target_xy: np.ndarray, limits: Limits, turn_in_place_rad: float) -> np.ndarray:
    """One action towards ``target_xy`` (never past it): turn on the spot while it lies more than
    ``turn_in_place_rad`` off the view, else translate straight at it while turning towards it."""
    x, y, yaw = (float(v) for v in pose[:3])
    d = np.asarray(target_xy, dtype=np.float64)[:2] - (x, y)
    dist = float(np.hypot(*d))
    if dist < 1e-6:
        return np.zeros(3)
    err = wrap(math.atan2(d[1], d[0]) - yaw)
    turn = float(np.clip(err, -limits.max_turn, limits.max_turn))
    if abs(err) > (turn_in_place_rad if limits.holonomic else math.radians(5.0)):
        return np.array([0.0, 0.0, turn])
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])
    if not limits.holonomic:
        local = np.array([min(max(local[0], 0.0), dist), 0.0])
    scale = 1.0
    if abs(local[0]) > limits.max_forward:
        scale = min(scale, limits.max_forward / abs(local[0]))
    if abs(local[1]) > limits.max_left:
        scale = min(scale, limits.max_left / max(abs(local[1]), 1e-12))
    local = local * scale
    return np.array([local[0], local[1], turn])


def turn_action(yaw: float, target_yaw: float, limits: Limits) -> np.ndarray:
    return np.array([0.0, 0.0, float(np.clip(wrap(target_yaw - yaw), -limits.max_turn, limits.max_turn))])


# ============================================================================== grid geometry
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


# ============================================================================== planning kernels
_DR = np.array([-1, -1, -1, 0, 0, 1, 1, 1], dtype=np.int64)
_DC = np.array([-1, 0, 1, -1, 1, -1, 0, 1], dtype=np.int64)


@numba.njit(cache=True)
def _dijkstra_kernel(cost, start, dr, dc):  # pragma: no cover - compiled
    H, W = cost.shape
    n = H * W
    dist = np.full(n, np.inf)
    parent = np.full(n, -1, dtype=np.int64)
    flat = cost.ravel()
    dist[start] = 0.0
    heap = [(0.0, start)]
    while len(heap) > 0:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        r = u // W
        c = u - r * W
        cu = flat[u]
        for k in range(8):
            rr = r + dr[k]
            cc = c + dc[k]
            if rr < 0 or rr >= H or cc < 0 or cc >= W:
                continue
            v = rr * W + cc
            cv = flat[v]
            if not np.isfinite(cv):
                continue
            diag = dr[k] != 0 and dc[k] != 0
            if diag and (not np.isfinite(flat[r * W + cc]) or not np.isfinite(flat[rr * W + c])):
                continue  # no corner cutting
            step = 1.4142135623730951 if diag else 1.0
            nd = d + step * 0.5 * ((cu if np.isfinite(cu) else cv) + cv)
            if nd < dist[v]:
                dist[v] = nd
                parent[v] = u
                heapq.heappush(heap, (nd, v))
    return dist.reshape(H, W), parent


def dijkstra(cost: np.ndarray, start: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Cost-weighted distances (in cells) from ``start`` over 8-connected cells with finite cost (no
    corner cutting; an edge costs its length times the mean cost of its two cells; the start cell may
    itself be lethal) and the parent of every cell (flat indices, -1 = none)."""
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    H, W = cost.shape
    r, c = int(start[0]), int(start[1])
    if not (0 <= r < H and 0 <= c < W):
        raise ValueError(f"start cell {start} outside the grid {cost.shape}")
    return _dijkstra_kernel(cost, r * W + c, _DR, _DC)


def extract_path(parent: np.ndarray, shape: tuple[int, int], goal: tuple[int, int]) -> np.ndarray:
    """Cells (Nx2 row, col) from the Dijkstra start to ``goal`` (empty when it is unreachable)."""
    W = shape[1]
    u = int(goal[0]) * W + int(goal[1])
    out = [u]
    while parent[u] >= 0:
        u = int(parent[u])
        out.append(u)
        if len(out) > parent.size:
            raise RuntimeError("cycle in the parent array")
    out = np.array(out[::-1], dtype=np.int64)
    return np.stack([out // W, out % W], -1)


@numba.njit(cache=True)
def _segment_clear_kernel(ok, r0, c0, r1, c1):  # pragma: no cover - compiled
    H, W = ok.shape
    n = int(max(abs(r1 - r0), abs(c1 - c0)) * 3.0) + 1
    for i in range(n + 1):
        t = i / n
        r = int(math.floor(r0 + (r1 - r0) * t))
        c = int(math.floor(c0 + (c1 - c0) * t))
        if r < 0 or r >= H or c < 0 or c >= W or not ok[r, c]:
            return False
    return True


def segment_clear(ok: np.ndarray, a_rc: np.ndarray, b_rc: np.ndarray) -> bool:
    """Whether every cell on the straight segment between two continuous cell positions (row, col in
    cell units, cell (r, c) spanning [r, r+1) x [c, c+1)) is True in ``ok``."""
    return bool(
        _segment_clear_kernel(
            np.ascontiguousarray(ok, dtype=np.bool_), float(a_rc[0]), float(a_rc[1]), float(b_rc[0]), float(b_rc[1])
        )
    )


@numba.njit(cache=True)
def _visible_counts(height, cand_r, cand_c, cam_z, pts_r, pts_c, pts_z, tan_lo, tol):  # pragma: no cover - compiled
    H, W = height.shape
    out = np.zeros(len(cand_r), dtype=np.int64)
    for i in range(len(cand_r)):
        r0 = cand_r[i] + 0.5
        c0 = cand_c[i] + 0.5
        for j in range(len(pts_r)):
            dr = pts_r[j] - r0
            dc = pts_c[j] - c0
            rho = math.sqrt(dr * dr + dc * dc)
            dz = pts_z[j] - cam_z
            if dz < -tan_lo * rho:  # below the lower edge of the view
                continue
            n = int(rho * 2.0) + 1
            clear = True
            for k in range(1, n):
                t = k / n
                r = int(math.floor(r0 + dr * t))
                c = int(math.floor(c0 + dc * t))
                if r < 0 or r >= H or c < 0 or c >= W:
                    continue
                if height[r, c] > cam_z + dz * t + tol:
                    clear = False
                    break
            if clear:
                out[i] += 1
    return out


def visible_points(
    height: np.ndarray,
    window: GridWindow,
    cells: np.ndarray,
    cam_z: float,
    points: np.ndarray,
    half_fov_rad: float,
    tol: float = 0.03,
) -> np.ndarray:
    """For each candidate cell (Nx2), how many of the world points (Mx3) a camera at ``cam_z`` above
    the cell centre, turned towards them, would see: above the lower edge of the vertical field of
    view, and not hidden behind any cell of the height map along the 2.5D ray."""
    cells = np.asarray(cells, dtype=np.int64).reshape(-1, 2)
    if len(cells) == 0:
        return np.zeros(0, dtype=np.int64)
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    pr = (p[:, 1] - window.y0) / window.res
    pc = (p[:, 0] - window.x0) / window.res
    # heights per cell unit: scale z by 1/res so that slopes are consistent in cell units
    s = 1.0 / window.res
    return _visible_counts(
        np.ascontiguousarray(height * s),
        cells[:, 0].copy(),
        cells[:, 1].copy(),
        cam_z * s,
        pr,
        pc,
        p[:, 2] * s,
        math.tan(half_fov_rad),
        tol * s,
    )


@numba.njit(cache=True)
def _voxel_extent(ijk, hits, label, v, res, origin, floor_z, lo, hi, min_hits, n_cells):  # pragma: no cover - compiled
    r0, r1, c0, c1 = n_cells, -1, n_cells, -1
    for i in range(ijk.shape[0]):
        h = hits[i]
        if h <= 0:
            continue
        z = (ijk[i, 2] + 0.5) * v
        if not (z < floor_z or (z >= lo and z < hi and h >= min_hits)):
            continue
        c = int(math.floor(((ijk[i, 0] + 0.5) * v - origin) / res))
        r = int(math.floor(((ijk[i, 1] + 0.5) * v - origin) / res))
        if r < 0 or r >= n_cells or c < 0 or c >= n_cells:
            continue
        r0, r1, c0, c1 = min(r0, r), max(r1, r), min(c0, c), max(c1, c)
    return r0, r1, c0, c1


@numba.njit(cache=True)
def _rasterize_voxels(
    ijk, hits, label, v, res, origin, floor_z, lo, hi, min_hits, r0, c0, skip_label, obstacle, floor, height
):  # pragma: no cover - compiled
    H, W = obstacle.shape
    for i in range(ijk.shape[0]):
        h = hits[i]
        if h <= 0:
            continue
        z = (ijk[i, 2] + 0.5) * v
        c = int(math.floor(((ijk[i, 0] + 0.5) * v - origin) / res)) - c0
        r = int(math.floor(((ijk[i, 1] + 0.5) * v - origin) / res)) - r0
        if r < 0 or r >= H or c < 0 or c >= W:
            continue
        if z < floor_z:
            floor[r, c] = True
        elif z >= lo and z < hi and h >= min_hits:
            obstacle[r, c] = True
            if label[i] != skip_label or skip_label < 0:
                if z > height[r, c]:
                    height[r, c] = z


def voxel_layers(
    ijk: np.ndarray,
    hits: np.ndarray,
    label: np.ndarray,
    voxel_size: float,
    window: GridWindow,
    cfg: NavigatorConfig,
    skip_label: int = -1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(obstacle, floor, height) on ``window`` from voxel arrays (``VoxelMap.field``): floor = an
    occupied voxel centred below ``floor_max_z_m``; obstacle = one centred in ``obstacle_band_m``
    with at least ``min_obstacle_hits``; height = the top obstacle voxel centre (-inf where none),
    voxels of object ``skip_label`` left out."""
    H, W = window.shape
    obstacle, floor, height = (
        np.zeros((H, W), dtype=np.bool_),
        np.zeros((H, W), dtype=np.bool_),
        np.full((H, W), -np.inf),
    )
    ijk = np.asarray(ijk, dtype=np.int32).reshape(-1, 3)
    if len(ijk):
        _rasterize_voxels(
            ijk,
            np.asarray(hits, dtype=np.int32),
            np.asarray(label, dtype=np.int32),
            float(voxel_size),
            window.res,
            0.0,
            cfg.floor_max_z_m,
            cfg.obstacle_band_m[0],
            cfg.obstacle_band_m[1],
            max(int(cfg.min_obstacle_hits), 1),
            int(math.floor(window.y0 / window.res + 1e-9)),
            int(math.floor(window.x0 / window.res + 1e-9)),
            int(skip_label),
            obstacle,
            floor,
            height,
        )
    return obstacle, floor, height


# ============================================================================== frontiers
def frontier_mask(free: np.ndarray, unknown: np.ndarray) -> np.ndarray:
    """Known free cells with at least one 4-neighbour unknown (cells beyond the edge count as unknown)."""
    u = np.pad(unknown, 1, constant_values=True)
    near = u[:-2, 1:-1] | u[2:, 1:-1] | u[1:-1, :-2] | u[1:-1, 2:]
    return free & near


def frontier_clusters(frontier: np.ndarray, min_cells: int) -> tuple[np.ndarray, int]:
    """Label 8-connected frontier clusters (0 = none); clusters below ``min_cells`` are dropped."""
    labels, n = ndimage.label(frontier, structure=np.ones((3, 3), dtype=bool))
    if n == 0:
        return labels, 0
    sizes = np.bincount(labels.ravel(), minlength=n + 1)
    keep = sizes >= max(int(min_cells), 1)
    keep[0] = False
    remap = np.zeros(n + 1, dtype=np.int64)
    remap[keep] = np.arange(1, int(keep.sum()) + 1)
    return remap[labels], int(keep.sum())


@dataclass(frozen=True)
class FrontierChoice:
    goal: tuple[int, int]  # cell to drive to
    point: tuple[int, int]  # the frontier cell nearest to it
    label: int
    size: int
    score: float


def rank_frontiers(
    dist: np.ndarray,
    labels: np.ndarray,
    n: int,
    res: float,
    reach_m: float,
    gain_m: float,
    extra_cost: np.ndarray | None = None,
) -> list[FrontierChoice]:
    """Per frontier cluster the reachable cell within ``reach_m`` of it with the lowest score
    ``dist * res + extra_cost - gain_m * min(size * res, 3)``; best first. ``dist``: a Dijkstra field
    (cells, inf = unreachable)."""
    if n == 0:
        return []
    front = labels > 0
    edt, idx = ndimage.distance_transform_edt(~front, return_indices=True)
    cand = np.isfinite(dist) & (edt * res <= reach_m)
    if not cand.any():
        return []
    rr, cc = np.nonzero(cand)
    fr, fc = idx[0][rr, cc], idx[1][rr, cc]
    lab = labels[fr, fc]
    sizes = np.bincount(labels.ravel(), minlength=n + 1)
    score = dist[rr, cc] * res - gain_m * np.minimum(sizes[lab] * res, 3.0)
    if extra_cost is not None:
        score = score + extra_cost[rr, cc]
    order = np.lexsort((score, lab))
    first = np.ones(len(order), dtype=bool)
    first[1:] = lab[order][1:] != lab[order][:-1]
    best = order[first]
    out = [
        FrontierChoice(
            (int(rr[b]), int(cc[b])), (int(fr[b]), int(fc[b])), int(lab[b]), int(sizes[lab[b]]), float(score[b])
        )
        for b in best
    ]
    return sorted(out, key=lambda f: f.score)


# ============================================================================== the navigator
@dataclass
class _Goal:
    kind: str  # "frontier" | "target" | "escape"
    cell_xy: np.ndarray  # where to drive (world xy)
    look_xy: np.ndarray  # what to face on arrival
    key_xy: np.ndarray  # identifies the goal across replans (frontier point / target centre)
    started: int  # step the goal was first chosen
    budget: int  # steps allowed
    score: float = 0.0
    path: list = field(default_factory=list)  # world xy waypoints (cell centres), start excluded
    arrived: bool = False
    bumps: int = 0


class MemoryNavigator:
    """Explore until the target is in memory, then go to it (see the module doc). ``phase`` is
    ``"explore"``, ``"goto"`` or ``"done"``; ``grid`` is the last :class:`OccupancyGrid`."""

    def __init__(self, config: NavigatorConfig | dict | None = None, **overrides: Any) -> None:
        cfg = config if isinstance(config, NavigatorConfig) else NavigatorConfig.from_dict(config)
        self.config = replace(cfg, **overrides) if overrides else cfg
        self.limits = Limits(self.config.max_forward_m, self.config.max_left_m, self.config.max_turn_rad)
        n = int(math.ceil(2 * self.config.map_extent_m / self.config.cell_m))
        self._n = n
        self._origin = -self.config.map_extent_m  # world coordinate of global cell 0's lower edge
        self.reset("")

    # ---------------------------------------------------------------------------- setup
    def set_action_limits(self, low: np.ndarray, high: np.ndarray) -> None:
        """Take the action bounds ``[forward_m, left_m, yaw_rad]`` from an action space."""
        low, high = np.asarray(low, dtype=np.float64).ravel(), np.asarray(high, dtype=np.float64).ravel()
        if low.shape != (3,) or high.shape != (3,):
            raise ValueError(
                "the navigator needs a 3-dim action space [forward_m, left_m, yaw_rad], "
                f"got bounds of shape {low.shape}"
            )
        m = np.minimum(np.abs(low), np.abs(high))
        self.limits = Limits(float(high[0]), float(m[1]), float(m[2]))
        if self.limits.max_forward <= 0 or self.limits.max_turn <= 0:
            raise ValueError(
                f"the action space must allow forward motion and turning, got low={low.tolist()} high={high.tolist()}"
            )

    def reset(self, instruction: str) -> None:
        """Start an episode. An instruction that is not "go to the <category>" leaves no target: the
        navigator then only explores (building the memory), and says so in ``events``."""
        self.instruction = instruction
        try:
            self.target_category = parse_target(instruction) if instruction else None
        except ValueError:
            self.target_category = ""
        n = self._n
        self._scan_free = np.zeros((n, n), dtype=bool)
        self._visited = np.zeros((n, n), dtype=bool)
        self._bump = np.zeros((n, n), dtype=bool)
        self._suspect = np.zeros((n, n), dtype=bool)  # floor hidden below an obstacle at the bottom of a view
        self._fr_black = np.zeros((n, n), dtype=bool)  # frontier points not to pick again
        self._goal_black = np.zeros((n, n), dtype=bool)  # target goal cells that did not show the target
        self._bbox = None  # (r0, r1, c0, c1) in global cells of everything known
        self.phase = "explore"
        self.grid: OccupancyGrid | None = None
        self.goal: _Goal | None = None
        self.target = None  # the MemoryObject being approached
        self._t = 0
        self._turns_left = self.config.initial_turns
        self._history: list[np.ndarray] = []
        self._last_action = np.zeros(3)
        self._last_pose: np.ndarray | None = None
        self._since_plan = 0
        self._done_steps = 0
        self._approach = self.config.approach_m
        self._face_steps = 0
        self._last_clear = -(10**9)
        self._probe: dict | None = None  # pending probes after a bump
        self._goto_retry_at = 0  # no reachable goal near the target: when to look again
        self.events: list[tuple[int, str]] = []  # (step, what happened): replans, bumps, blacklists
        if self.target_category == "":
            self._event(f"no target in the instruction {instruction!r}: exploring only")

    # ---------------------------------------------------------------------------- the step
    def act(self, obs: Any, memory: Any, camera: str | None = None) -> np.ndarray:
        """One action ``[forward_m, left_m, yaw_rad]`` for the observation (memory already updated)."""
        if self.target_category is None:
            self.reset(str(getattr(obs, "instruction", "")))
        frame = obs.cameras[camera] if camera else next(iter(obs.cameras.values()))
        pose = np.asarray(obs.state, dtype=np.float64)[:3]
        self._t += 1
        if self._turns_left < 0:
            hfov = self._half_fovs(frame)[1] * 2
            self._turns_left = max(0, int(math.ceil((2 * math.pi - hfov) / self.limits.max_turn - 1e-6)))
        blocked = bool(obs.sensors.get("blocked", False))
        probe = None
        if self._probe is not None and not blocked:
            self._event("a probe got through")
            self._probe = None
        elif blocked and self._last_pose is not None:
            probe = self._on_bump(self._last_pose, pose)
        self._update_scan(frame)
        self._mark_visited(pose)
        self._history.append(pose.copy())
        self.target = self._find_target(memory)
        self.grid = self._build_grid(memory)
        action = probe if probe is not None else self._decide(pose, frame, blocked)
        self._last_pose = pose.copy()
        self._last_action = np.asarray(action, dtype=np.float64)
        return self._last_action.copy()

    def _decide(self, pose: np.ndarray, frame: Any, blocked: bool) -> np.ndarray:
        cfg = self.config
        if self.phase == "done":
            self._done_steps += 1
            if not cfg.resume_after_done or self._done_steps <= cfg.resume_after_done:
                return np.zeros(3)
            # the episode went on: our distance or visibility estimate was off; get closer elsewhere
            self._event(f"still running {self._done_steps} steps after done: approaching closer")
            self._approach = max(0.3, self._approach - 0.15)
            self._blacklist_goal_here(pose)
            self.phase, self.goal, self._done_steps = "goto", None, 0
        if self.target is not None and self._target_reached(pose, frame):
            self.phase = "done"
            self._done_steps = 0
            self._event("target visible and within reach: done")
            return np.zeros(3)
        if self.target is None and self._turns_left > 0:
            self._turns_left -= 1
            return np.array([0.0, 0.0, self.limits.max_turn])
        self._turns_left = 0
        if self._stuck():
            self._event("no progress: blacklisting the goal")
            self._abandon_goal()
        action = None
        if self.target is not None and (
            self._t >= self._goto_retry_at or (self.goal is not None and self.goal.kind == "target")
        ):
            action = self._goto(pose, frame, blocked)
            if action is None:
                self._goto_retry_at = self._t + cfg.replan_every
        if action is None:
            self.phase = "explore"
            action = self._explore(pose, blocked)
        if action is None:  # nothing left to explore: look around; now and then forget the blacklists
            if self._t - self._last_clear >= 24:
                self._event("no frontier left: clearing blacklists")
                self._last_clear = self._t
                self._fr_black[:] = False
                self._goal_black[:] = False
                self._approach = self.config.approach_m
            action = np.array([0.0, 0.0, self.limits.max_turn])
        return action

    # ---------------------------------------------------------------------------- perception layers
    def _half_fovs(self, frame: Any) -> tuple[float, float]:
        H, W = frame.depth.shape
        K = frame.K
        return math.atan2(H / 2, abs(K[1, 1])), math.atan2(W / 2, abs(K[0, 0]))

    def _gcell(self, xy: np.ndarray) -> np.ndarray:
        """Global cell (row, col) of world xy (...x2)."""
        xy = np.asarray(xy, dtype=np.float64)
        res = self.config.cell_m
        return np.stack(
            [np.floor((xy[..., 1] - self._origin) / res), np.floor((xy[..., 0] - self._origin) / res)], -1
        ).astype(np.int64)

    def _mark(self, layer: np.ndarray, rc: np.ndarray) -> None:
        rc = np.asarray(rc, dtype=np.int64).reshape(-1, 2)
        ok = (rc[:, 0] >= 0) & (rc[:, 0] < self._n) & (rc[:, 1] >= 0) & (rc[:, 1] < self._n)
        rc = rc[ok]
        if len(rc) == 0:
            return
        layer[rc[:, 0], rc[:, 1]] = True
        self._grow_bbox(rc[:, 0].min(), rc[:, 0].max(), rc[:, 1].min(), rc[:, 1].max())

    def _grow_bbox(self, r0: int, r1: int, c0: int, c1: int) -> None:
        b = self._bbox
        self._bbox = (
            (int(r0), int(r1), int(c0), int(c1))
            if b is None
            else (min(b[0], int(r0)), max(b[1], int(r1)), min(b[2], int(c0)), max(b[3], int(c1)))
        )

    def _disc(self, xy: np.ndarray, radius: float) -> np.ndarray:
        res = self.config.cell_m
        k = int(math.ceil(radius / res)) + 1
        c = self._gcell(np.asarray(xy)[:2])
        dr, dc = np.mgrid[-k : k + 1, -k : k + 1]
        rc = np.stack([c[0] + dr.ravel(), c[1] + dc.ravel()], -1)
        centres = np.stack([self._origin + (rc[:, 1] + 0.5) * res, self._origin + (rc[:, 0] + 0.5) * res], -1)
        return rc[np.hypot(*(centres - np.asarray(xy)[:2]).T) <= radius + 1e-9]

    def _update_scan(self, frame: Any) -> None:
        """Free-space rays of the depth image (see :func:`scan_rays`)."""
        free, suspect = scan_rays(frame, self.config)
        if len(free):
            self._mark(self._scan_free, self._gcell(free))
        if len(suspect):
            self._mark(self._suspect, self._gcell(suspect))

    def _mark_visited(self, pose: np.ndarray) -> None:
        self._mark(self._visited, self._disc(pose[:2], self.config.agent_radius_m))
        c = self._gcell(pose[:2])
        if 0 <= c[0] < self._n and 0 <= c[1] < self._n:
            self._bump[c[0], c[1]] = False  # we stand here: the centre may be here

    def _on_bump(self, prev: np.ndarray, pose: np.ndarray) -> np.ndarray | None:
        """A move was cut short. The base stopped just before a place its centre may not enter (the
        obstacle itself may lie ahead or to a side of it). A holonomic base first probes short moves
        fanning out around the blocked direction (threading gaps narrower than the map can tell);
        if none gets through, that place is forbidden and the path replanned. Returns the next probe."""
        cfg = self.config
        if self._probe is None:
            a = self._last_action
            c, s = math.cos(prev[2]), math.sin(prev[2])
            d = np.array([c * a[0] - s * a[1], s * a[0] + c * a[1]])
            norm = float(np.hypot(*d))
            if norm < 1e-9:
                return None
            if self.goal is not None:
                self.goal.bumps += 1
            self._event(f"bumped at {np.round(pose[:2], 2).tolist()}")
            point = pose[:2] + d / norm * (0.5 * cfg.cell_m + cfg.bump_radius_m)
            angles = [20.0, -20.0, 40.0, -40.0, 60.0, -60.0] if (cfg.probe_m > 0 and self.limits.holonomic) else []
            self._probe = {
                "point": point,
                "heading": math.atan2(d[1], d[0]),
                "angles": angles,
                "from": pose[:2].copy(),
                "tried": [],
            }
        probe = self._probe
        if probe["angles"]:
            ang = probe["heading"] + math.radians(probe["angles"].pop(0))
            probe["tried"].append(ang)
            c, s = math.cos(pose[2]), math.sin(pose[2])
            dx, dy = math.cos(ang) * cfg.probe_m, math.sin(ang) * cfg.probe_m
            local = np.array([c * dx + s * dy, -s * dx + c * dy])
            local *= min(
                1.0,
                self.limits.max_forward / max(abs(local[0]), 1e-12),
                self.limits.max_left / max(abs(local[1]), 1e-12),
            )
            return np.array([local[0], local[1], 0.0])
        # no probe got through: forbid where the base tried to go and every probed spot
        self._mark(self._bump, self._disc(probe["point"], cfg.bump_radius_m))
        for ang in probe["tried"]:
            q = probe["from"] + (cfg.probe_m + 0.5 * cfg.cell_m) * np.array([math.cos(ang), math.sin(ang)])
            self._mark(self._bump, self._disc(q, 0.5 * cfg.cell_m))
        self._probe = None
        return None

    def _find_target(self, memory: Any):
        if not self.target_category:
            return None
        best = None
        for o in memory.objects():
            if normalise_category(o.category) == self.target_category and o.n_points >= self.config.min_target_points:
                if best is None or o.n_points > best.n_points:
                    best = o
        return best

    def _build_grid(self, memory: Any) -> OccupancyGrid:
        cfg = self.config
        res = cfg.cell_m
        vox = memory.voxels
        n_vox = len(vox)
        args = ()
        if n_vox:
            args = (
                vox.field("ijk"),
                vox.field("hits"),
                vox.field("label"),
                float(vox.voxel_size),
                res,
                self._origin,
                cfg.floor_max_z_m,
                cfg.obstacle_band_m[0],
                cfg.obstacle_band_m[1],
                max(int(cfg.min_obstacle_hits), 1),
            )
            ext = _voxel_extent(*args, self._n)
            if ext[0] <= ext[1]:
                self._grow_bbox(*ext)
        pad = int(math.ceil(1.5 / res))
        b = self._bbox or tuple(int(x) for x in (self._gcell(np.zeros(2)).repeat(2)))
        r0, r1 = max(b[0] - pad, 0), min(b[1] + pad + 1, self._n)
        c0, c1 = max(b[2] - pad, 0), min(b[3] + pad + 1, self._n)
        H, W = r1 - r0, c1 - c0
        window = GridWindow(self._origin + c0 * res, self._origin + r0 * res, res, (H, W))
        obstacle = np.zeros((H, W), dtype=np.bool_)
        floor = np.zeros((H, W), dtype=np.bool_)
        height = np.full((H, W), -np.inf)
        if n_vox:
            skip = -1
            if self.target is not None:
                try:
                    skip = int(memory.registry.resolve(self.target.id))
                except (KeyError, ValueError, AttributeError):
                    skip = -1
            _rasterize_voxels(*args, r0, c0, skip, obstacle, floor, height)
        known = floor | self._scan_free[r0:r1, c0:c1] | self._visited[r0:r1, c0:c1] | obstacle
        suspect = self._suspect[r0:r1, c0:c1] & ~known
        cost, clearance = cost_map(obstacle, known, res, cfg, suspect)
        forbidden = self._bump[r0:r1, c0:c1]
        cost[forbidden] = np.inf
        return OccupancyGrid(window, obstacle, known, known & ~obstacle, clearance, cost, height, suspect, forbidden)

    # ---------------------------------------------------------------------------- planning helpers
    def _field(self, pose: np.ndarray, relaxed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
        """Dijkstra field from the agent; lethal cells near the agent (not obstacles) are made passable
        at a high cost so that it can always leave an inflated zone it ended up in. ``relaxed`` (1, 2):
        lethal cells at least ``agent_radius_m + relaxed_m[relaxed - 1]`` clear cost ``relaxed_cost``
        instead (a last resort when nothing is reachable: the lethal margin is conservative; a bump
        then forbids the spot, so repeated tries feel their way through a narrow gap)."""
        cfg = self.config
        grid = self.grid
        w = grid.window
        start = tuple(int(v) for v in w.world_to_cell(pose[:2]))
        cost = grid.cost
        if relaxed:
            cost = cost.copy()
            floor = cfg.agent_radius_m + cfg.relaxed_m[int(relaxed) - 1]
            squeeze = ~np.isfinite(cost) & (grid.clearance >= floor) & ~grid.forbidden
            # keep to the middle of the gap: the cost grows as the clearance shrinks
            lethal = cfg.agent_radius_m + cfg.lethal_margin_m
            depth = np.clip((lethal - grid.clearance[squeeze]) / max(lethal - floor, 1e-6), 0.0, 1.0)
            cost[squeeze] = cfg.relaxed_cost * int(relaxed) * (1.0 + 4.0 * depth)
        r = int(math.ceil(0.35 / w.res))
        r0, r1, c0, c1 = (
            max(start[0] - r, 0),
            min(start[0] + r + 1, w.shape[0]),
            max(start[1] - r, 0),
            min(start[1] + r + 1, w.shape[1]),
        )
        patch = cost[r0:r1, c0:c1]
        if not np.isfinite(patch).all():
            cost = cost.copy()
            sub = cost[r0:r1, c0:c1]
            # leave through cells at least as clear as the one we stand on (never closer than a radius)
            floor_clear = min(cfg.agent_radius_m, float(grid.clearance[start]) if w.inside(np.array(start)) else 0.0)
            clear = grid.clearance[r0:r1, c0:c1]
            escape = (
                ~np.isfinite(sub)
                & ~grid.obstacle[r0:r1, c0:c1]
                & ~grid.forbidden[r0:r1, c0:c1]
                & (clear >= floor_clear - 1e-9)
            )
            lethal = cfg.agent_radius_m + cfg.lethal_margin_m
            sub[escape] = 30.0 * (
                1.0 + 4.0 * np.clip((lethal - clear[escape]) / lethal, 0.0, 1.0)
            )  # out by the clearest way
        dist, parent = dijkstra(cost, start)
        return dist, parent, start

    def _set_path(self, goal: _Goal, parent: np.ndarray, cell: tuple[int, int]) -> None:
        w = self.grid.window
        cells = extract_path(parent, w.shape, cell)
        goal.path = [xy for xy in w.cell_to_world(cells[1:])]
        goal.cell_xy = w.cell_to_world(np.array(cell))
        self._since_plan = 0

    def _path_blocked(self, goal: _Goal) -> bool:
        if not goal.path:
            return False
        w = self.grid.window
        rc = w.world_to_cell(np.array(goal.path[: int(2.5 / w.res)]))
        ok = w.inside(rc)
        return bool(np.any(~np.isfinite(self.grid.cost[rc[ok, 0], rc[ok, 1]])))

    def _follow(self, pose: np.ndarray, goal: _Goal) -> np.ndarray | None:
        """Pure pursuit on the stored path: the farthest path point within ``lookahead_m`` reachable in a
        straight line over safe cells (or the path's own cells). None when the path is done."""
        cfg = self.config
        path = goal.path
        if not path:
            return None
        pos = pose[:2]
        pts = np.asarray(path)
        d = np.hypot(*(pts - pos).T)
        i = int(
            np.argmin(d[: int(math.ceil(1.5 / self.config.cell_m))])
        )  # nearest of the next 1.5 m (a path may loop back past a wall)
        del path[:i]  # progress: drop what lies behind the nearest point
        pts, d = pts[i:], d[i:]
        if len(pts) == 1 and d[0] <= cfg.goal_tolerance_m:
            path.clear()
            return None
        w = self.grid.window
        ok = np.isfinite(self.grid.cost) & (
            self.grid.clearance >= cfg.agent_radius_m + 0.5 * (cfg.lethal_margin_m + cfg.inflation_m)
        )
        prc = w.world_to_cell(pts)
        inside = w.inside(prc)
        ok = ok.copy()
        ok[prc[inside, 0], prc[inside, 1]] |= np.isfinite(self.grid.cost[prc[inside, 0], prc[inside, 1]])
        a = np.array([(pos[1] - w.y0) / w.res, (pos[0] - w.x0) / w.res])
        arc = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))]) + d[0]
        target = pts[0]
        for j in range(len(pts) - 1, -1, -1):
            if arc[j] > cfg.lookahead_m and j > 0:
                continue
            b = np.array([(pts[j, 1] - w.y0) / w.res, (pts[j, 0] - w.x0) / w.res])
            if j == 0 or segment_clear(ok, a, b):
                target = pts[j]
                break
        return drive_action(pose, target, self.limits, math.radians(cfg.turn_in_place_deg))

    def _stuck(self) -> bool:
        cfg = self.config
        n = cfg.stuck_steps
        if self.goal is None or len(self._history) <= n or self._t - self.goal.started < n:
            return False
        if self.goal.arrived:
            return False
        h = np.asarray(self._history[-n:])
        return (
            float(np.hypot(*(h[-1, :2] - h[0, :2]))) < cfg.stuck_distance_m
            and float(np.max(np.hypot(*(h[:, :2] - h[0, :2]).T))) < cfg.stuck_distance_m
        )

    def _abandon_goal(self) -> None:
        g = self.goal
        if g is None:
            return
        if g.kind == "frontier":
            self._mark(self._fr_black, self._disc(g.key_xy, self.config.blacklist_radius_m))
        elif g.kind == "target":
            self._mark(self._goal_black, self._disc(g.cell_xy, 0.35))
        self.goal = None

    def _blacklist_goal_here(self, pose: np.ndarray) -> None:
        self._mark(self._goal_black, self._disc(pose[:2], 0.35))

    def _event(self, text: str) -> None:
        self.events.append((self._t, text))

    # ---------------------------------------------------------------------------- GOTO
    def _target_points(self, obj) -> np.ndarray:
        c, s, yaw = np.asarray(obj.center), np.asarray(obj.size), float(obj.yaw)
        R = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
        local = [(0, 0, 0), (0, 0, 0.35)] + [(sx * 0.25, sy * 0.25, 0.35) for sx in (-1, 1) for sy in (-1, 1)]
        pts = []
        for lx, ly, lz in local:
            xy = c[:2] + R @ (np.array([lx, ly]) * s[:2])
            pts.append([xy[0], xy[1], c[2] + lz * s[2]])
        return np.array(pts)

    def _target_reached(self, pose: np.ndarray, frame: Any) -> bool:
        cfg = self.config
        obj = self.target
        if obj.instance_id is None or frame.instance is None:
            return False
        frac = float(np.count_nonzero(frame.instance == obj.instance_id)) / frame.instance.size
        dist = float(box_distance(pose[:2], obj.center, obj.size, obj.yaw))
        return frac >= cfg.min_visible_fraction and dist <= cfg.success_radius_m - 0.1

    def _target_goal(self, pose: np.ndarray, frame: Any, dist: np.ndarray) -> tuple[tuple[int, int], float] | None:
        """The cheapest reachable cell near the target that should see it (None: none reachable)."""
        cfg = self.config
        obj = self.target
        w = self.grid.window
        reach = self._approach + (cfg.approach_max_m - cfg.approach_m)  # both shrink after a false "done"
        c = w.world_to_cell(obj.center[:2])
        k = int(math.ceil((reach + float(np.hypot(*obj.size[:2])) / 2) / w.res)) + 1
        r0, r1 = max(c[0] - k, 0), min(c[0] + k + 1, w.shape[0])
        c0, c1 = max(c[1] - k, 0), min(c[1] + k + 1, w.shape[1])
        if r0 >= r1 or c0 >= c1:
            return None
        rr, cc = np.mgrid[r0:r1, c0:c1]
        rr, cc = rr.ravel(), cc.ravel()
        xy = w.cell_to_world(np.stack([rr, cc], -1))
        dbox = box_distance(xy, obj.center, obj.size, obj.yaw)
        d = dist[rr, cc]
        gblack = self._goal_black[self._gcell(xy)[:, 0], self._gcell(xy)[:, 1]]
        sel = np.isfinite(d) & (dbox <= reach) & ~gblack
        if not sel.any():
            return None
        rr, cc, dbox, d = rr[sel], cc[sel], dbox[sel], d[sel]
        cam_z = float(frame.T_world_cam[2, 3])
        half_v = self._half_fovs(frame)[0] - math.radians(cfg.fov_margin_deg)
        vis = visible_points(self.grid.height, w, np.stack([rr, cc], -1), cam_z, self._target_points(obj), half_v)
        score = d * w.res + 0.5 * dbox  # prefer near the object among equally cheap cells
        for limit, need in ((self._approach, 2), (reach, 2), (self._approach, 0)):
            m = (dbox <= limit) & (vis >= need)
            if m.any():
                j = int(np.flatnonzero(m)[np.argmin(score[m])])
                return (int(rr[j]), int(cc[j])), float(score[j])
        return None

    def _goto(self, pose: np.ndarray, frame: Any, blocked: bool) -> np.ndarray | None:
        cfg = self.config
        obj = self.target
        g = self.goal
        same = g is not None and g.kind == "target" and float(np.hypot(*(g.key_xy[:2] - obj.center[:2]))) < 0.25
        self._since_plan += 1
        replan = (
            not same
            or blocked
            or self._since_plan >= cfg.replan_every
            or self._path_blocked(g)
            or (not g.path and not g.arrived)
        )
        if same and g.arrived and not blocked:
            replan = False
        if replan:
            dist, parent, _ = self._field(pose)
            choice = self._target_goal(pose, frame, dist)
            for level in (1, 2):  # last resort: squeeze past obstacles closer than the lethal margin
                if choice is not None:
                    break
                dist, parent, _ = self._field(pose, relaxed=level)
                choice = self._target_goal(pose, frame, dist)
            if choice is None:
                if same:
                    self.goal = None
                return None
            cell, score = choice
            if not same:
                plen = dist[cell] * self.grid.window.res
                g = _Goal(
                    "target",
                    np.zeros(2),
                    obj.center[:2].copy(),
                    obj.center[:2].copy(),
                    self._t,
                    int(2 * plen / self.limits.max_forward) + 40,
                    score,
                )
                self._event(f"goto {obj.id} at {np.round(obj.center[:2], 2).tolist()}")
            g.key_xy, g.look_xy = obj.center[:2].copy(), obj.center[:2].copy()
            g.arrived = False
            self._set_path(g, parent, cell)
            self.goal = g
        self.phase = "goto"
        if self._t - g.started > g.budget or g.bumps > cfg.max_bumps:
            self._event("target goal over budget: blacklisting it")
            self._abandon_goal()
            return None
        a = None if g.arrived else self._follow(pose, g)
        if a is not None:
            return a
        g.arrived = True
        look = math.atan2(obj.center[1] - pose[1], obj.center[0] - pose[0])
        if abs(wrap(look - pose[2])) > math.radians(cfg.face_tolerance_deg):
            self._face_steps = 0
            return turn_action(pose[2], look, self.limits)
        # facing the target from the goal, and it is not in view (else we would be done): look elsewhere
        self._event("target not visible from the goal: trying another cell")
        self._blacklist_goal_here(pose)
        self.goal = None
        dist, parent, _ = self._field(pose)
        choice = self._target_goal(pose, frame, dist)
        if choice is None:
            return None
        plen = dist[choice[0]] * self.grid.window.res
        g = _Goal(
            "target",
            np.zeros(2),
            obj.center[:2].copy(),
            obj.center[:2].copy(),
            self._t,
            int(2 * plen / self.limits.max_forward) + 40,
            choice[1],
        )
        self._set_path(g, parent, choice[0])
        self.goal = g
        a = self._follow(pose, g)
        return a if a is not None else turn_action(pose[2], look, self.limits)

    # ---------------------------------------------------------------------------- EXPLORE
    def _explore(self, pose: np.ndarray, blocked: bool, depth: int = 0) -> np.ndarray | None:
        cfg = self.config
        g = self.goal if (self.goal is not None and self.goal.kind == "frontier") else None
        self._since_plan += 1
        if g is not None and g.arrived:
            look = math.atan2(g.look_xy[1] - pose[1], g.look_xy[0] - pose[0])
            if abs(wrap(look - pose[2])) > math.radians(cfg.face_tolerance_deg) and self._face_steps < 12:
                self._face_steps += 1
                return turn_action(pose[2], look, self.limits)
            self._event("frontier looked at")
            self._abandon_goal()
            g = None
        replan = g is None or blocked or self._since_plan >= cfg.replan_every or self._path_blocked(g) or not g.path
        if replan:
            choice, parent = self._choose_frontier(pose, g)
            if choice is None:
                self.goal = None
                return None
            w = self.grid.window
            point_xy = w.cell_to_world(np.array(choice.point))
            if g is None or float(np.hypot(*(g.key_xy - point_xy))) > cfg.blacklist_radius_m:
                dist_m = float(np.hypot(*(w.cell_to_world(np.array(choice.goal)) - pose[:2])))
                g = _Goal(
                    "frontier",
                    np.zeros(2),
                    self._look_point(point_xy),
                    point_xy,
                    self._t,
                    int(3 * dist_m / self.limits.max_forward) + 40,
                    choice.score,
                )
                self._event(f"frontier {np.round(point_xy, 2).tolist()} (size {choice.size}, score {choice.score:.2f})")
            else:
                g.key_xy, g.score = point_xy, choice.score
                g.look_xy = self._look_point(point_xy)
            self._set_path(g, parent, choice.goal)
            self.goal = g
        if self._t - g.started > g.budget or g.bumps > cfg.max_bumps:
            self._event("frontier over budget: blacklisting it")
            self._abandon_goal()
            return self._explore(pose, False, depth + 1) if depth < 2 else None
        a = self._follow(pose, g)
        if a is not None:
            return a
        g.arrived = True
        self._face_steps = 0
        look = math.atan2(g.look_xy[1] - pose[1], g.look_xy[0] - pose[0])
        return turn_action(pose[2], look, self.limits)

    def _look_point(self, point_xy: np.ndarray) -> np.ndarray:
        """Where to look from a frontier: the centroid of the unknown cells within 1.5 m of its point."""
        w = self.grid.window
        c = w.world_to_cell(point_xy)
        k = int(1.5 / w.res)
        r0, r1, c0, c1 = (
            max(c[0] - k, 0),
            min(c[0] + k + 1, w.shape[0]),
            max(c[1] - k, 0),
            min(c[1] + k + 1, w.shape[1]),
        )
        un = self.grid.unknown[r0:r1, c0:c1]
        if not un.any():
            return point_xy
        rr, cc = np.nonzero(un)
        return w.cell_to_world(np.array([rr.mean() + r0, cc.mean() + c0]))

    def _choose_frontier(
        self, pose: np.ndarray, current: _Goal | None
    ) -> tuple[FrontierChoice | None, np.ndarray | None]:
        for level in (0, 1, 2):  # last resort: squeeze past obstacles closer than the lethal margin
            choice, parent = self._rank(pose, current, relaxed=level)
            if choice is not None:
                break
        return choice, parent

    def _rank(
        self, pose: np.ndarray, current: _Goal | None, relaxed: int
    ) -> tuple[FrontierChoice | None, np.ndarray | None]:
        cfg = self.config
        grid = self.grid
        w = grid.window
        dist, parent, _ = self._field(pose, relaxed)
        res = w.res
        win = (
            slice(int(round((w.y0 - self._origin) / res)), None),
            slice(int(round((w.x0 - self._origin) / res)), None),
        )
        black = self._fr_black[win[0], win[1]][: w.shape[0], : w.shape[1]]
        # cells touching an obstacle are not frontiers: the unknown behind a wall's seen face is no news
        unknown = (
            grid.unknown & ~grid.suspect if grid.suspect is not None else grid.unknown
        )  # suspect floor: seen enough
        frontier = frontier_mask(grid.free, unknown) & ~black & (grid.clearance >= 2 * res - 1e-9)
        labels, n = frontier_clusters(frontier, cfg.min_frontier_cells)
        centres = w.centres()
        ang = np.arctan2(centres[..., 1] - pose[1], centres[..., 0] - pose[0]) - pose[2]
        ang = np.abs((ang + np.pi) % (2 * np.pi) - np.pi)
        extra = cfg.turn_cost_m * ang / np.pi
        if self.target is not None:  # target known but no goal reachable yet: explore towards it
            extra = extra + 0.5 * np.hypot(
                centres[..., 0] - self.target.center[0], centres[..., 1] - self.target.center[1]
            )
        ranked = rank_frontiers(dist, labels, n, res, cfg.frontier_reach_m, cfg.frontier_gain_m, extra)
        if not ranked:
            return None, None
        best = ranked[0]
        if current is not None:  # hysteresis: keep the current frontier unless another is clearly better
            for f in ranked:
                p = w.cell_to_world(np.array(f.point))
                if float(np.hypot(*(p - current.key_xy))) <= cfg.blacklist_radius_m:
                    if f.score <= best.score + cfg.switch_margin_m:
                        best = f
                    break
        return best, parent

    # ---------------------------------------------------------------------------- debugging
    def debug_image(self, scale: int = 2) -> np.ndarray:
        """RGB picture of the last grid: unknown grey, free white, lethal pink, obstacles black,
        frontiers blue, path green, goal red (rows flipped so that +y is up)."""
        g = self.grid
        if g is None:
            raise RuntimeError("act() has not run yet")
        img = np.full(g.window.shape + (3,), 128, dtype=np.uint8)
        img[g.free] = 255
        img[~np.isfinite(g.cost) & g.known] = (255, 200, 200)
        img[g.obstacle] = 0
        img[frontier_mask(g.free, g.unknown)] = (80, 80, 255)
        w = g.window
        if self.goal is not None:
            for xy in self.goal.path:
                rc = w.world_to_cell(xy)
                if w.inside(rc):
                    img[rc[0], rc[1]] = (0, 180, 0)
            rc = w.world_to_cell(self.goal.cell_xy)
            if w.inside(rc):
                img[max(rc[0] - 2, 0) : rc[0] + 3, max(rc[1] - 2, 0) : rc[1] + 3] = (255, 0, 0)
        if self.target is not None:
            rc = w.world_to_cell(self.target.center[:2])
            if w.inside(rc):
                img[max(rc[0] - 2, 0) : rc[0] + 3, max(rc[1] - 2, 0) : rc[1] + 3] = (255, 160, 0)
        if self._history:
            rc = w.world_to_cell(np.asarray(self._history)[:, :2])
            ok = w.inside(rc)
            img[rc[ok, 0], rc[ok, 1]] = (255, 0, 255)
        img = img[::-1]
        return np.repeat(np.repeat(img, scale, axis=0), scale, axis=1)


# ============================================================================== depth free-space rays
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
