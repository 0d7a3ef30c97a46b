"""Object navigation episodes in an apartment: "go to the <category>" (the draw itself is
:func:`envs.ground_nav.task.make_episode`).

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

import numpy as np

from envs.ground_nav import task as ground_nav
from envs.ground_nav.task import GOAL_MARGIN_M, Episode
from spatial_memory.geometry import box_distance

from .scene import HouseScene
from .spec import ItemSpec

TASK_SALT = 0x0B1EC7


def footprint_box(item: ItemSpec) -> tuple[np.ndarray, np.ndarray]:
    """(centre xy, side lengths) of the item's axis-aligned footprint (its yaw is a multiple of pi/2)."""
    x0, y0, x1, y1 = item.rect()
    return np.array([(x0 + x1) / 2, (y0 + y1) / 2]), np.array([x1 - x0, y1 - y0])


def goal_cells(
    scene: HouseScene, item: ItemSpec, success_radius: float, stride: int = 1, first_only: bool = False
) -> np.ndarray:
    """Main-component cells within reach of ``item`` that see it (every ``stride``-th cell per axis)."""
    center, size = footprint_box(item)
    return ground_nav.goal_cells(
        scene.grid,
        scene.main_component,
        center,
        size,
        0.0,
        success_radius - GOAL_MARGIN_M,
        sees=lambda xy: scene.visible_from(xy, item),
        stride=stride,
        first_only=first_only,
    )


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
    return ground_nav.make_episode(
        f"house scene {scene.seed}",
        trial,
        (scene.seed, TASK_SALT),
        scene.grid,
        scene.main_component,
        scene.planner.distance_field,
        lambda: target_candidates(scene, cfg.success_radius_m),
        lambda item: goal_cells(scene, item, cfg.success_radius_m),
        cfg.min_start_distance_m,
        target=target,
        start=start,
    )


def target_distance(item: ItemSpec, xy: np.ndarray) -> float:
    """Horizontal distance (metres) from xy to the item's box footprint."""
    return float(box_distance(np.asarray(xy)[:2], *footprint_box(item)))
