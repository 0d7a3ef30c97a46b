"""A deterministic exploration route through every room, and short clips of it.

The route is what GST calls the exploration video: the agent visits one or two viewpoints per room
(the free cell with the most clearance near the room's centre, or near the centres of its halves
for large rooms), in greedy nearest-first order of geodesic distance, driving between them with
the same controller as the expert (smooth turns, no bumps), and looks once around (360 degrees)
at each viewpoint. It is produced by the env's own kinematics, so replaying ``actions`` from
``poses[0]`` with ``env.step`` reproduces ``poses`` exactly.

Clips (GST's trajectory questions) are windows of the route that travel far enough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from envs.control import BaseLimits, follow, turn_towards
from envs.ground_nav.agent import step_pose

from .scene import HouseScene

LOOK_TURN_RAD = math.radians(30.0)


@dataclass(frozen=True, eq=False)
class ExplorationRoute:
    poses: np.ndarray  # Nx3 world [x, y, yaw]; poses[0] is the start
    actions: np.ndarray  # (N-1)x3; actions[i] takes poses[i] to poses[i+1]
    viewpoints: tuple[int, ...]  # pose index where each look-around starts
    rooms: tuple[str | None, ...]  # room of each pose

    def __len__(self) -> int:
        return len(self.poses)

    @property
    def length_m(self) -> float:
        return float(np.sum(np.hypot(*np.diff(self.poses[:, :2], axis=0).T)))


@dataclass(frozen=True, eq=False)
class Clip:
    start: int  # index into the route's poses
    end: int  # exclusive
    poses: np.ndarray  # (end - start)x3 world poses

    @property
    def length_m(self) -> float:
        return float(np.sum(np.hypot(*np.diff(self.poses[:, :2], axis=0).T)))


def viewpoints(scene: HouseScene) -> list[tuple[str, np.ndarray]]:
    """(room name, world xy) of one viewpoint per room (two along the long axis of rooms over 20 m^2)."""
    clearance = ndimage.distance_transform_edt(scene.main_component) * scene.grid.resolution
    out = []
    for room in scene.spec.rooms:
        x0, y0, x1, y1 = room.rect
        parts = [room.rect]
        if room.area > 20.0:
            if x1 - x0 >= y1 - y0:
                xm = (x0 + x1) / 2
                parts = [(x0, y0, xm, y1), (xm, y0, x1, y1)]
            else:
                ym = (y0 + y1) / 2
                parts = [(x0, y0, x1, ym), (x0, ym, x1, y1)]
        for r in parts:
            cells = scene.free_cells_in(r)
            if len(cells) == 0:
                continue
            xy = scene.grid.cell_to_world(cells)
            centre = np.array([(r[0] + r[2]) / 2, (r[1] + r[3]) / 2])
            score = np.minimum(clearance[cells[:, 0], cells[:, 1]], 1.0) - 0.35 * np.hypot(*(xy - centre).T)
            out.append((room.name, xy[int(np.argmax(score))]))
    return out


def _look_around(pose: np.ndarray, limits: BaseLimits) -> list[np.ndarray]:
    step = min(limits.max_turn, LOOK_TURN_RAD)
    n = int(math.ceil(2 * math.pi / step - 1e-9))
    return [np.array([0.0, 0.0, 2 * math.pi / n]) for _ in range(n)]


def plan_route(
    scene: HouseScene, start: np.ndarray, limits: BaseLimits, look_around: bool = True, max_steps: int = 5000
) -> ExplorationRoute:
    """The exploration route from a world start pose through every room of the scene."""
    pose = np.asarray(start, dtype=np.float64).reshape(3).copy()
    if not scene.grid.is_free(pose[:2]):
        raise ValueError(f"exploration start {np.round(pose, 3).tolist()} is not on a free cell of the navigable grid")
    poses = [pose.copy()]
    actions: list[np.ndarray] = []
    views: list[int] = []

    def apply(a: np.ndarray) -> None:
        nonlocal pose
        res = step_pose(scene.grid, pose, a)
        if res.blocked:  # cannot happen on planner-checked segments; fail loudly rather than record a bump
            raise RuntimeError(f"exploration route bumped at {pose.tolist()} with action {a.tolist()}")
        pose = res.pose
        poses.append(pose.copy())
        actions.append(np.asarray(a, dtype=np.float64))

    todo = viewpoints(scene)
    if look_around:
        views.append(0)
        for a in _look_around(pose, limits):
            apply(a)
    while todo and len(actions) < max_steps:
        # nearest viewpoint by geodesic distance from here
        here = scene.planner.cell_of(pose[:2])
        dist, _ = scene.planner.distance_field(np.array([here]))
        cells = [scene.planner.cell_of(xy) for _, xy in todo]
        d = [dist[c] for c in cells]
        k = int(np.argmin(d))
        room, goal_xy = todo.pop(k)
        if not np.isfinite(d[k]):
            continue
        path = scene.planner.plan(pose[:2], np.array([cells[k]]))
        if path is None:
            continue
        waypoints = [p for p in path[1:]]
        while len(actions) < max_steps:
            a = follow(pose, waypoints, limits)
            if a is None:
                break
            apply(a)
        if look_around:
            views.append(len(poses) - 1)
            # start the look-around facing the room's centre, for a nicer video
            centre = scene.spec.room(room).center
            target_yaw = (
                math.atan2(centre[1] - pose[1], centre[0] - pose[0])
                if np.hypot(*(centre - pose[:2])) > 0.3
                else pose[2]
            )
            for _ in range(8):
                a = turn_towards(pose, target_yaw, limits)
                if abs(a[2]) < 1e-9:
                    break
                apply(a)
            for a in _look_around(pose, limits):
                apply(a)
    P = np.array(poses)
    return ExplorationRoute(P, np.array(actions).reshape(-1, 3), tuple(views), tuple(scene.room_of(p[:2]) for p in P))


def sample_clips(
    route: ExplorationRoute, num: int, length: int = 16, min_travel_m: float = 1.5, seed: int = 0, overlap: bool = False
) -> list[Clip]:
    """Up to ``num`` windows of ``length`` poses that travel at least ``min_travel_m`` (deterministic per seed)."""
    if length < 2:
        raise ValueError(f"clip length must be >= 2, got {length}")
    n = len(route.poses)
    step = np.hypot(*np.diff(route.poses[:, :2], axis=0).T) if n > 1 else np.zeros(0)
    travel = np.concatenate([[0.0], np.cumsum(step)])
    starts = [s for s in range(0, n - length + 1) if travel[s + length - 1] - travel[s] >= min_travel_m]
    rng = np.random.default_rng([seed, 0xC11B])
    rng.shuffle(starts)
    taken: list[Clip] = []
    for s in starts:
        if len(taken) >= num:
            break
        if not overlap and any(s < c.end and c.start < s + length for c in taken):
            continue
        taken.append(Clip(s, s + length, route.poses[s : s + length].copy()))
    return sorted(taken, key=lambda c: c.start)
