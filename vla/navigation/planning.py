"""Planning kernels on the navigator's grid (numba): a cost-weighted Dijkstra field from the base
(which ranks every goal at once), paths out of it, straight-segment tests and 2.5D visibility
through a height map.
"""

from __future__ import annotations

import heapq
import math

import numba
import numpy as np

from .config import NavigatorConfig
from .grid import GridWindow, OccupancyGrid


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


def cost_field(
    grid: OccupancyGrid, pose: np.ndarray, cfg: NavigatorConfig, relaxed: int = 0
) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Dijkstra field (distances, parents, start cell) from the base at ``pose``; lethal cells near the
    base (not obstacles) are made passable at a high cost so that it can always leave an inflated
    zone it ended up in. ``relaxed`` (1, 2): lethal cells at least ``agent_radius_m +
    relaxed_m[relaxed - 1]`` clear cost ``relaxed_cost`` instead (a last resort when nothing is
    reachable: the lethal margin is conservative; a bump then forbids the spot, so repeated tries
    feel their way through a narrow gap)."""
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


def pursuit_point(grid: OccupancyGrid, pos: np.ndarray, pts: np.ndarray, d0: float, cfg: NavigatorConfig) -> np.ndarray:
    """Pure pursuit's point on a path: the farthest of ``pts`` (world xy, the path ahead, ``d0`` metres
    from the base at ``pos`` to its first point) within ``lookahead_m`` of path length that the base
    reaches in a straight line over safe cells (or the path's own cells); the first point otherwise."""
    w = grid.window
    ok = np.isfinite(grid.cost) & (grid.clearance >= cfg.agent_radius_m + 0.5 * (cfg.lethal_margin_m + cfg.inflation_m))
    prc = w.world_to_cell(pts)
    inside = w.inside(prc)
    ok = ok.copy()
    ok[prc[inside, 0], prc[inside, 1]] |= np.isfinite(grid.cost[prc[inside, 0], prc[inside, 1]])
    a = np.array([(pos[1] - w.y0) / w.res, (pos[0] - w.x0) / w.res])
    arc = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))]) + d0
    for j in range(len(pts) - 1, -1, -1):
        if arc[j] > cfg.lookahead_m and j > 0:
            continue
        b = np.array([(pts[j, 1] - w.y0) / w.res, (pts[j, 0] - w.x0) / w.res])
        if j == 0 or segment_clear(ok, a, b):
            return pts[j]
    return pts[0]
