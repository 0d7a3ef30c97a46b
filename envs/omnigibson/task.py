"""Object navigation episodes on a BEHAVIOR-1K scene: "go to the <category>" (as on the apartments; the
draw itself is :func:`envs.ground_nav.task.make_episode`).

Trial ``k`` of a scene is a pure function of (scene name, k): the target is drawn among the
furniture-sized objects whose category occurs once in the scene and that have goal cells; the start
is a free cell of the main component at least ``min_start_distance_m`` (geodesic) from every goal
cell, with a random heading. Goal cells are main-component cells within ``success_radius_m - 0.2``
of the target's box footprint. No line of sight is tested when choosing them (there is no ray caster
outside the renderer); success needs the target in view, measured on the rendered instance mask.
"""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np

from envs.ground_nav import task as ground_nav
from envs.ground_nav.task import GOAL_MARGIN_M, Episode
from envs.truth import Box, NavGrid, ObjectTruth
from spatial_memory.geometry import box_distance, yaw_of_rotation

TASK_SALT = 0x06B1


def target_distance(box: Box, xy: np.ndarray) -> float:
    """Horizontal distance (metres) from xy to the box's footprint (its yaw taken from ``R``)."""
    return float(box_distance(np.asarray(xy)[:2], box.center, box.size, yaw_of_rotation(box.R)))


def goal_cells(grid: NavGrid, main: np.ndarray, box: Box, reach: float) -> np.ndarray:
    return ground_nav.goal_cells(grid, main, box.center, box.size, yaw_of_rotation(box.R), reach)


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
    reach = cfg.success_radius_m - GOAL_MARGIN_M

    def candidates() -> list[ObjectTruth]:
        cands = target_candidates(objects, cfg.min_target_height_m, cfg.min_target_area_m2)
        return [o for o in cands if len(goal_cells(grid, main, o.box, reach))]

    return ground_nav.make_episode(
        scene_name,
        trial,
        (zlib.crc32(scene_name.encode()), TASK_SALT),
        grid,
        main,
        distance_field,
        candidates,
        lambda o: goal_cells(grid, main, o.box, reach),
        cfg.min_start_distance_m,
        target=target,
        start=start,
    )
