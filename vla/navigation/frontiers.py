"""Frontiers: clusters of known free cells next to unknown ones, ranked by the path cost to reach
them, a gain for long clusters and any extra per-cell cost (e.g. for turning round).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage


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


def look_point(grid, point_xy: np.ndarray) -> np.ndarray:
    """Where to look from a frontier: the centroid of the unknown cells of ``grid`` (an
    :class:`~.grid.OccupancyGrid`) within 1.5 m of its point (the point itself when there are none)."""
    w = grid.window
    c = w.world_to_cell(point_xy)
    k = int(1.5 / w.res)
    r0, r1, c0, c1 = (
        max(c[0] - k, 0),
        min(c[0] + k + 1, w.shape[0]),
        max(c[1] - k, 0),
        min(c[1] + k + 1, w.shape[1]),
    )
    un = grid.unknown[r0:r1, c0:c1]
    if not un.any():
        return point_xy
    rr, cc = np.nonzero(un)
    return w.cell_to_world(np.array([rr.mean() + r0, cc.mean() + c0]))
