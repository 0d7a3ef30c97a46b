"""Object navigation episodes on a BEHAVIOR-1K scene: "go to the <category>" (as on the apartments).

Trial ``k`` of a scene is a pure function of (scene name, k): the target is drawn among the
furniture-sized objects whose category occurs once in the scene and that have goal cells; the start
is a free cell of the main component at least ``min_start_distance_m`` (geodesic) from every goal
cell, with a random heading. Goal cells are main-component cells within ``success_radius_m - 0.2``
of the target's box footprint. No line of sight is tested when choosing them (there is no ray caster
outside the renderer); success needs the target in view, measured on the rendered instance mask.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter

import numpy as np

from envs.house.ground_nav import GOAL_MARGIN_M, Episode, instruction_for
from envs.truth import Box, NavGrid, ObjectTruth

TASK_SALT = 0x06B1


def box_distance(xy: np.ndarray, box: Box) -> np.ndarray:
    """Horizontal distance from points (..., 2) to a box's footprint (its yaw taken from ``R``; 0 inside)."""
    xy = np.asarray(xy, dtype=np.float64)
    R = np.asarray(box.R)
    yaw = math.atan2(R[1, 0], R[0, 0])
    c, s = math.cos(yaw), math.sin(yaw)
    d = xy - np.asarray(box.center)[:2]
    local = np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], -1)
    half = np.asarray(box.size)[:2] / 2
    out = np.maximum(np.abs(local) - half, 0.0)
    return np.hypot(out[..., 0], out[..., 1])


def goal_cells(grid: NavGrid, main: np.ndarray, box: Box, reach: float) -> np.ndarray:
    rc = np.argwhere(main)
    return rc[box_distance(grid.cell_to_world(rc), box) <= reach]


def target_candidates(objects: tuple[ObjectTruth, ...], min_height_m: float, min_area_m2: float) -> list[ObjectTruth]:
    counts = Counter(o.category for o in objects)
    return [
        o
        for o in objects
        if counts[o.category] == 1 and o.box.size[2] >= min_height_m and o.box.size[0] * o.box.size[1] >= min_area_m2
    ]


def make_episode(
    scene_name: str,
    trial: int,
    grid: NavGrid,
    main: np.ndarray,
    distance_field,
    objects: tuple[ObjectTruth, ...],
    cfg,
    target: ObjectTruth | None = None,
    start: np.ndarray | None = None,
) -> Episode:
    """One episode (see the module doc); ``distance_field(cells) -> (HxW metres, pred)`` is the planner's."""
    rng = np.random.default_rng([zlib.crc32(scene_name.encode()), int(trial), TASK_SALT])
    reach = cfg.success_radius_m - GOAL_MARGIN_M
    if target is None:
        cands = target_candidates(objects, cfg.min_target_height_m, cfg.min_target_area_m2)
        cands = [o for o in cands if len(goal_cells(grid, main, o.box, reach))]
        if not cands:
            raise ValueError(
                f"{scene_name}: no navigation target (a furniture-sized object of a unique category within reach "
                "of the traversable area)"
            )
        target = cands[int(rng.integers(len(cands)))]
    goals = goal_cells(grid, main, target.box, reach)
    if len(goals) == 0:
        raise ValueError(f"{scene_name}: target {target.id!r} has no free cell within {reach:.2f} m of its box")
    dist, _ = distance_field(goals)
    if start is None:
        ok = main & np.isfinite(dist)
        far = ok & (dist >= cfg.min_start_distance_m)
        cells = np.argwhere(far if far.any() else ok)
        rc = cells[int(rng.integers(len(cells)))]
        xy = grid.cell_to_world(rc)
        start = np.array([xy[0], xy[1], rng.uniform(-math.pi, math.pi)])
    start = np.asarray(start, dtype=np.float64).reshape(3)
    if not grid.is_free(start[:2]):
        raise ValueError(f"start pose {start.tolist()} is not on a free cell of the navigable grid")
    geo = float(dist[tuple(grid.world_to_cell(start[:2]))])
    return Episode(
        trial=int(trial),
        target_id=target.id,
        category=target.category,
        instance_id=int(target.instance_id),
        instruction=instruction_for(target.category),
        start=start,
        goal_cells=goals,
        geodesic_m=geo,
    )
