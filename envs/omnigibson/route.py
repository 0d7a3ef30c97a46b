"""A deterministic exploration route through a BEHAVIOR-1K scene (GST's exploration video).

There are no room rectangles to visit as on the apartments, so viewpoints cover the traversable area
instead: repeatedly, among the main-component cells farther than ``spacing_m`` from every viewpoint
so far, the one with the most clearance (capped at 1 m; ties go to the lowest row, then column)
becomes the next viewpoint. The agent visits them nearest-first by geodesic distance, driving with
:mod:`envs.control` (the expert's controller) on the kinematic base of :mod:`envs.ground_nav.agent`, and
looks once around (360 degrees) at each. Replaying ``actions`` from ``poses[0]`` with ``env.step``
reproduces ``poses``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from envs.control import BaseLimits, follow
from envs.ground_nav.agent import step_pose
from envs.ground_nav.navgrid import Planner
from envs.truth import NavGrid

LOOK_TURN_RAD = math.radians(30.0)


@dataclass(frozen=True, eq=False)
class Route:
    poses: np.ndarray  # Nx3 world [x, y, yaw]; poses[0] is the start
    actions: np.ndarray  # (N-1)x3
    viewpoints: tuple[int, ...]  # pose index where each look-around starts

    def __len__(self) -> int:
        return len(self.poses)


def viewpoints(grid: NavGrid, main: np.ndarray, spacing_m: float = 2.5) -> np.ndarray:
    """Mx2 world xy of viewpoints covering the main component (see the module doc)."""
    clearance = np.minimum(ndimage.distance_transform_edt(main) * grid.resolution, 1.0)
    rc = np.argwhere(main)
    if len(rc) == 0:
        return np.zeros((0, 2))
    xy = grid.cell_to_world(rc)
    score = clearance[rc[:, 0], rc[:, 1]]
    uncovered = np.ones(len(rc), dtype=bool)
    out = []
    while uncovered.any():
        k = int(np.flatnonzero(uncovered)[np.argmax(score[uncovered])])
        out.append(xy[k])
        uncovered &= np.hypot(*(xy - xy[k]).T) > spacing_m
    return np.array(out)


def plan_route(
    grid: NavGrid,
    planner: Planner,
    main: np.ndarray,
    start: np.ndarray,
    limits: BaseLimits,
    spacing_m: float = 2.5,
    look_around: bool = True,
    max_steps: int = 5000,
) -> Route:
    """The exploration route from a world start pose through every viewpoint."""
    pose = np.asarray(start, dtype=np.float64).reshape(3).copy()
    if not grid.is_free(pose[:2]):
        raise ValueError(f"exploration start {np.round(pose, 3).tolist()} is not on a free cell of the navigable grid")
    poses, actions, views = [pose.copy()], [], []

    def apply(a: np.ndarray) -> None:
        nonlocal pose
        res = step_pose(grid, pose, a)
        if res.blocked:  # cannot happen on planner-checked segments; fail loudly rather than record a bump
            raise RuntimeError(f"exploration route bumped at {pose.tolist()} with action {a.tolist()}")
        pose = res.pose
        poses.append(pose.copy())
        actions.append(np.asarray(a, dtype=np.float64))

    def look() -> None:
        views.append(len(poses) - 1)
        n = int(math.ceil(2 * math.pi / min(limits.max_turn, LOOK_TURN_RAD) - 1e-9))
        for _ in range(n):
            apply(np.array([0.0, 0.0, 2 * math.pi / n]))

    todo = [p for p in viewpoints(grid, main, spacing_m)]
    if look_around:
        look()
    while todo and len(actions) < max_steps:
        dist, _ = planner.distance_field(np.array([planner.cell_of(pose[:2])]))
        d = [dist[planner.cell_of(xy)] for xy in todo]
        k = int(np.argmin(d))
        goal = todo.pop(k)
        if not np.isfinite(d[k]):
            continue
        path = planner.plan(pose[:2], np.array([planner.cell_of(goal)]))
        if path is None:
            continue
        waypoints = list(path[1:])
        while len(actions) < max_steps:
            a = follow(pose, waypoints, limits)
            if a is None:
                break
            apply(a)
        if look_around:
            look()
    return Route(np.array(poses), np.array(actions).reshape(-1, 3), tuple(views))
