"""Object navigation episodes: "go to the <category>".

A trial ``k`` of scene ``s`` is a pure function of ``(s, k)``: the target is drawn among the
categories that occur exactly once in the apartment (so the name is unambiguous) and that can be
seen from somewhere within reach; the start is a free cell at least ``min_start_distance_m``
(geodesic) from every goal cell, with a random heading.

Success: the agent's horizontal distance to the target's box is at most ``success_radius_m`` and
the target covers at least ``min_visible_fraction`` of the ego image (instance mask).

Goal cells (used by the expert, not by the success test): main-component free cells within
``success_radius_m - 0.2`` of the target's box from which at least two points of the target can be
seen by ray casting, with the camera turned towards it.
"""

from __future__ import annotations

import math

import numpy as np

from .ground_nav import GOAL_MARGIN_M, Episode, instruction_for
from .scene import HouseScene, rect_distance
from .spec import ItemSpec

TASK_SALT = 0x0B1EC7


def goal_cells(
    scene: HouseScene, item: ItemSpec, success_radius: float, stride: int = 1, first_only: bool = False
) -> np.ndarray:
    """Main-component cells within reach of ``item`` that see it (every ``stride``-th cell per axis)."""
    reach = success_radius - GOAL_MARGIN_M
    x0, y0, x1, y1 = item.rect()
    cells = scene.free_cells_in((x0 - reach, y0 - reach, x1 + reach, y1 + reach))
    if stride > 1:
        cells = cells[(cells[:, 0] % stride == 0) & (cells[:, 1] % stride == 0)]
    xy = scene.grid.cell_to_world(cells)
    near = rect_distance(xy, item.rect()) <= reach
    cells, xy = cells[near], xy[near]
    keep = []
    for k in range(len(cells)):
        if scene.visible_from(xy[k], item):
            keep.append(k)
            if first_only:
                break
    return cells[keep]


def target_candidates(scene: HouseScene, success_radius: float) -> list[ItemSpec]:
    """Items whose category is unique in the scene and that can be reached and seen (cached per scene)."""
    key = ("_targets", success_radius)
    cache = scene.__dict__.setdefault("_task_cache", {})
    if key not in cache:
        unique = set(scene.spec.unique_categories())
        cache[key] = [
            it
            for it in scene.spec.items
            if it.category in unique and len(goal_cells(scene, it, success_radius, stride=3, first_only=True))
        ]
    return cache[key]


def make_episode(
    scene: HouseScene, trial: int, target: ItemSpec | None = None, start: np.ndarray | None = None
) -> Episode:
    """The episode of ``trial`` in ``scene`` (target and/or start may be imposed)."""
    cfg = scene.cfg
    if trial < 0:
        raise ValueError(f"trial must be >= 0, got {trial}")
    rng = np.random.default_rng([scene.seed, int(trial), TASK_SALT])
    if target is None:
        cands = target_candidates(scene, cfg.success_radius_m)
        if not cands:
            raise RuntimeError(f"scene {scene.seed} has no reachable, visible object with a unique category")
        target = cands[int(rng.integers(len(cands)))]
    goals = goal_cells(scene, target, cfg.success_radius_m)
    if len(goals) == 0:
        raise ValueError(f"object {target.id!r} cannot be reached and seen in scene {scene.seed}")
    dist, _ = scene.planner.distance_field(goals)
    if start is None:
        ok = scene.main_component & np.isfinite(dist) & (dist >= cfg.min_start_distance_m)
        cells = np.argwhere(ok)
        if len(cells) == 0:  # tiny apartment: take the farthest cells
            finite = np.argwhere(scene.main_component & np.isfinite(dist))
            d = dist[finite[:, 0], finite[:, 1]]
            cells = finite[d >= np.quantile(d, 0.9)]
        rc = cells[int(rng.integers(len(cells)))]
        xy = scene.grid.cell_to_world(rc)
        start = np.array([xy[0], xy[1], float(rng.uniform(-math.pi, math.pi))])
    else:
        start = np.asarray(start, dtype=np.float64).reshape(3)
        if not scene.grid.is_free(start[:2]):
            raise ValueError(f"start pose {start.tolist()} is not on a free cell of the navigable grid")
    rc = scene.grid.world_to_cell(start[:2])
    if not np.isfinite(dist[rc[0], rc[1]]):
        raise ValueError(
            f"start pose {np.round(start, 3).tolist()} cannot reach object {target.id!r} "
            "(it is cut off from the goal region)"
        )
    return Episode(
        trial=int(trial),
        target_id=target.id,
        category=target.category,
        instance_id=target.instance_id,
        instruction=instruction_for(target.category),
        start=start,
        goal_cells=goals,
        geodesic_m=float(dist[rc[0], rc[1]]),
    )


def target_distance(item: ItemSpec, xy: np.ndarray) -> float:
    """Horizontal distance (metres) from xy to the item's box footprint."""
    return float(rect_distance(np.asarray(xy)[:2], item.rect()))
