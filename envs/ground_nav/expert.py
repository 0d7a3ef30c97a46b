"""The scripted object-navigation expert (privileged: it plans on the scene truth).

It plans a shortest path on the navigable grid to the nearest goal cell (within reach of the
target and with a line of sight to it), drives along it with :mod:`envs.control`, then turns to
face the target. If the target still does not count as visible there (a sliver behind a chair,
say), it drops the goal cells around that spot and goes to the next-nearest ones. It is the
demonstration source for training, so its motions are the smooth ones of the controller.

What it reads: :class:`~envs.truth.SceneTruth` (the agent's true pose, the navigable grid, the
target's box) and a :class:`NavGoal` (the episode's goal cells, target id and a planner), each
from a callable so that it always sees the current state; the bump flag comes from the
observation. ``GroundNavEnv.expert()`` (:mod:`.env`) wires them; nothing here knows the env.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from envs.control import BaseLimits, follow, turn_towards
from envs.observation import Observation
from envs.truth import SceneTruth

from .agent import pose_from_T

FACE_TOL_RAD = math.radians(4.0)
DROP_RADIUS_M = 0.6


@dataclass(frozen=True, eq=False)
class NavGoal:
    """The privileged part of one episode beyond :class:`SceneTruth`: ``episode`` (changes with every
    reset), the target's object id, the goal cells (Nx2 row, col of ``SceneTruth.navigable``) and
    ``plan(start_xy, goal_cells)``: a world-xy path to the nearest of them (None when unreachable)."""

    episode: int
    target_id: str
    goal_cells: np.ndarray
    plan: Callable[[np.ndarray, np.ndarray], np.ndarray | None]
    at_goal: Callable[[], bool] = lambda: False  # the env's success predicate now (for the stop signal)
    stop_action: bool = False  # actions carry a 4th `stop` dimension


class ObjectNavExpert:
    def __init__(self, truth: Callable[[], SceneTruth], goal: Callable[[], NavGoal], limits: BaseLimits):
        self._truth, self._goal = truth, goal
        self.limits = limits
        self._goals: np.ndarray | None = None
        self._waypoints: list[np.ndarray] = []
        self._facing_steps = 0
        self._episode: int | None = None

    def reset(self) -> None:
        goal = self._goal()
        self._episode = goal.episode
        self._goals = goal.goal_cells.copy()
        self._waypoints = []
        self._facing_steps = 0
        self._plan(goal, self._pose(self._truth()))

    @staticmethod
    def _pose(truth: SceneTruth) -> np.ndarray:
        return pose_from_T(truth.T_world_agent)

    def _plan(self, goal: NavGoal, pose: np.ndarray) -> None:
        if self._goals is None or len(self._goals) == 0:
            self._goals = goal.goal_cells.copy()  # all dropped: start over with every goal cell
        path = goal.plan(pose[:2], self._goals)
        self._waypoints = [] if path is None else [p for p in path[1:]]

    def _at_goal(self, truth: SceneTruth, pose: np.ndarray) -> bool:
        rc = truth.navigable.world_to_cell(pose[:2])
        return bool(np.any(np.all(self._goals == rc, axis=1))) and not self._waypoints

    def act(self, obs: Observation) -> np.ndarray:
        goal = self._goal()
        if not goal.stop_action:
            return self._move(obs, goal)
        if goal.at_goal():  # the ObjectNav protocol: signal stop where the predicate holds
            return np.array([0.0, 0.0, 0.0, 1.0])
        return np.append(self._move(obs, goal), 0.0)

    def _move(self, obs: Observation, goal: NavGoal) -> np.ndarray:
        if self._episode != goal.episode:
            self.reset()
        truth = self._truth()
        grid = truth.navigable
        pose = self._pose(truth)
        if obs.sensors.get("blocked"):  # should not happen on checked segments; recover via the cell centre
            centre = grid.cell_to_world(grid.world_to_cell(pose[:2]))
            self._plan(goal, pose)
            self._waypoints.insert(0, centre)
        a = follow(pose, self._waypoints, self.limits)
        if a is not None:
            return a
        if not self._at_goal(truth, pose):
            self._plan(goal, pose)
            a = follow(pose, self._waypoints, self.limits)
            if a is not None:
                return a
        # at a goal cell: face the target
        centre = truth.object(goal.target_id).box.center
        yaw = math.atan2(centre[1] - pose[1], centre[0] - pose[0])
        a = turn_towards(pose, yaw, self.limits)
        if abs(a[2]) > FACE_TOL_RAD / 2:
            self._facing_steps = 0
            return a
        self._facing_steps += 1
        if self._facing_steps >= 2:  # facing it and still no success: try goal cells elsewhere
            xy = grid.cell_to_world(self._goals)
            self._goals = self._goals[np.hypot(*(xy - pose[:2]).T) > DROP_RADIUS_M]
            self._facing_steps = 0
            self._plan(goal, pose)
            a = follow(pose, self._waypoints, self.limits)
            if a is not None:
                return a
        return a
