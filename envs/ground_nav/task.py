"""Object-navigation episodes on a floor grid, for every ground-navigation family: "go to the <category>".

A family says which objects may be targets (its own rule: the apartments take categories that occur
once and can be seen by ray casting; OmniGibson furniture-sized objects of a unique category) and
seeds the draw with its scene and the trial; the rest is the same everywhere:

* goal cells (used by the expert, not by the success test): main-component cells within
  ``success_radius_m - GOAL_MARGIN_M`` of the target's box footprint, optionally only those from
  which the family can see the target (:func:`goal_cells`);
* the start: a main-component cell at least ``min_start_distance_m`` (geodesic) from every goal
  cell (in a scene too small for that, one of the farthest tenth), with a random heading;
* the episode's geodesic length: start -> nearest goal cell on the 8-connected grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from envs.base import NoEpisode
from envs.truth import NavGrid
from spatial_memory.geometry import box_distance

GOAL_MARGIN_M = 0.2  # goal cells lie this much inside the success radius


class Target(Protocol):
    id: str
    category: str
    instance_id: int


def instruction_for(category: str) -> str:
    return f"go to the {category.replace('_', ' ')}"


@dataclass(frozen=True, eq=False)
class Episode:
    trial: int
    target_id: str
    category: str
    instance_id: int
    instruction: str
    start: np.ndarray  # world [x, y, yaw]
    goal_cells: np.ndarray  # Nx2 (row, col) of the navigable grid
    geodesic_m: float  # start -> nearest goal cell on the 8-connected grid (>= the true shortest path)


def goal_cells(
    grid: NavGrid,
    main: np.ndarray,
    center: np.ndarray,
    size: np.ndarray,
    yaw: float,
    reach: float,
    sees: Callable[[np.ndarray], bool] | None = None,
    stride: int = 1,
    first_only: bool = False,
) -> np.ndarray:
    """Nx2 (row, col) main-component cells within ``reach`` metres of a box's footprint (see
    :func:`spatial_memory.geometry.box_distance`), every ``stride``-th per axis, in row-major order;
    with ``sees(xy)``, only cells from which the target can be seen (``first_only``: the first one)."""
    rc = np.argwhere(main)
    xy = grid.cell_to_world(rc)
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    half = np.array([c * size[0] + s * size[1], s * size[0] + c * size[1]]) / 2 + reach + 1e-9
    near = np.all(np.abs(xy - np.asarray(center, dtype=np.float64)[:2]) <= half, axis=1)  # the bounding square
    rc, xy = rc[near], xy[near]
    if stride > 1:
        keep = (rc[:, 0] % stride == 0) & (rc[:, 1] % stride == 0)
        rc, xy = rc[keep], xy[keep]
    near = box_distance(xy, center, size, yaw) <= reach
    rc, xy = rc[near], xy[near]
    if sees is None:
        return rc
    keep = []
    for k in range(len(rc)):
        if sees(xy[k]):
            keep.append(k)
            if first_only:
                break
    return rc[keep]


def make_episode(
    scene: str,
    trial: int,
    seed: tuple[int, int],
    grid: NavGrid,
    main: np.ndarray,
    distance_field: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    candidates: Callable[[], Sequence[Target]],
    goals_of: Callable[[Target], np.ndarray],
    min_start_distance_m: float,
    target: Target | None = None,
    start: np.ndarray | None = None,
) -> Episode:
    """The episode of ``trial`` (see the module doc); ``target`` and/or ``start`` (a world pose) may be imposed.

    ``seed`` is the family's ``(scene key, salt)``: the draw uses ``default_rng([key, trial, salt])``;
    ``candidates()`` gives the targets it allows (each with goal cells), ``goals_of(target)`` their goal
    cells, ``distance_field(cells)`` the planner's geodesic distance field; ``scene`` names the scene
    in errors. A scene without any target raises :class:`envs.base.NoEpisode`; bad input ``ValueError``.
    """
    if isinstance(trial, bool) or not isinstance(trial, (int, np.integer)) or trial < 0:
        raise ValueError(f"trial must be a non-negative int, got {trial!r}")
    rng = np.random.default_rng([int(seed[0]), int(trial), int(seed[1])])
    if target is None:
        cands = candidates()
        if not cands:  # a property of the scene, not bad input: callers may skip the scene (vla-gst generate)
            raise NoEpisode(
                f"{scene}: no navigation target (an object of a unique category that can be reached and seen)"
            )
        target = cands[int(rng.integers(len(cands)))]
    goals = goals_of(target)
    if len(goals) == 0:
        raise ValueError(f"{scene}: object {target.id!r} cannot be reached and seen (no goal cell)")
    dist, _ = distance_field(goals)
    if start is None:
        ok = main & np.isfinite(dist)
        cells = np.argwhere(ok & (dist >= min_start_distance_m))
        if len(cells) == 0:  # a small scene: take one of the farthest cells
            finite = np.argwhere(ok)
            d = dist[finite[:, 0], finite[:, 1]]
            cells = finite[d >= np.quantile(d, 0.9)]
        rc = cells[int(rng.integers(len(cells)))]
        xy = grid.cell_to_world(rc)
        start = np.array([xy[0], xy[1], float(rng.uniform(-math.pi, math.pi))])
    else:
        start = np.asarray(start, dtype=np.float64).reshape(3)
        if not grid.is_free(start[:2]):
            raise ValueError(f"start pose {start.tolist()} is not on a free cell of the navigable grid")
    rc = grid.world_to_cell(start[:2])
    if not np.isfinite(dist[rc[0], rc[1]]):
        raise ValueError(
            f"start pose {np.round(start, 3).tolist()} cannot reach object {target.id!r} "
            "(it is cut off from the goal region)"
        )
    return Episode(
        trial=int(trial),
        target_id=target.id,
        category=target.category,
        instance_id=int(target.instance_id),
        instruction=instruction_for(target.category),
        start=start,
        goal_cells=goals,
        geodesic_m=float(dist[rc[0], rc[1]]),
    )
