"""The scripted object-navigation expert (privileged: it plans on the scene truth).

It plans a shortest path on the navigable grid to the nearest goal cell (within reach of the
target and with a line of sight to it), drives along it with :mod:`.control`, then turns to face
the target. If the target still does not count as visible there (a sliver behind a chair, say), it
drops the goal cells around that spot and goes to the next-nearest ones. It is the demonstration
source for training, so its motions are the smooth ones of the controller.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from envs.base import Observation

from .control import Limits, follow, turn_towards

if TYPE_CHECKING:
    from .env import HouseEnv

FACE_TOL_RAD = math.radians(4.0)
DROP_RADIUS_M = 0.6


class ObjectNavExpert:
    def __init__(self, env: "HouseEnv"):
        self.env = env
        self.limits = Limits.from_config(env.cfg)
        self._goals: np.ndarray | None = None
        self._waypoints: list[np.ndarray] = []
        self._facing_steps = 0
        self._episode_key = None

    def reset(self) -> None:
        ep = self.env.episode
        if ep is None:
            raise RuntimeError("reset the env before the expert")
        self._episode_key = (id(ep), ep.trial)
        self._goals = ep.goal_cells.copy()
        self._waypoints = []
        self._facing_steps = 0
        self._plan()

    def _plan(self) -> None:
        scene = self.env.scene
        pose = self.env.agent_pose()
        if self._goals is None or len(self._goals) == 0:
            self._goals = self.env.episode.goal_cells.copy()  # all dropped: start over with every goal cell
        path = scene.planner.plan(pose[:2], self._goals)
        self._waypoints = [] if path is None else [p for p in path[1:]]

    def _at_goal(self, pose: np.ndarray) -> bool:
        rc = self.env.scene.grid.world_to_cell(pose[:2])
        return bool(np.any(np.all(self._goals == rc, axis=1))) and not self._waypoints

    def act(self, obs: Observation) -> np.ndarray:
        env = self.env
        ep = env.episode
        if ep is None:
            raise RuntimeError("reset the env before asking the expert for an action")
        if self._episode_key != (id(ep), ep.trial):
            self.reset()
        pose = env.agent_pose()
        if env.last_info.get("blocked"):  # should not happen on checked segments; recover via the cell centre
            centre = env.scene.grid.cell_to_world(env.scene.grid.world_to_cell(pose[:2]))
            self._plan()
            self._waypoints.insert(0, centre)
        a = follow(pose, self._waypoints, self.limits)
        if a is not None:
            return a
        if not self._at_goal(pose):
            self._plan()
            a = follow(pose, self._waypoints, self.limits)
            if a is not None:
                return a
        # at a goal cell: face the target
        centre = env.target_item.box().center
        yaw = math.atan2(centre[1] - pose[1], centre[0] - pose[0])
        a = turn_towards(pose, yaw, self.limits)
        if abs(a[2]) > FACE_TOL_RAD / 2:
            self._facing_steps = 0
            return a
        self._facing_steps += 1
        if self._facing_steps >= 2:  # facing it and still no success: try goal cells elsewhere
            xy = env.scene.grid.cell_to_world(self._goals)
            self._goals = self._goals[np.hypot(*(xy - pose[:2]).T) > DROP_RADIUS_M]
            self._facing_steps = 0
            self._plan()
            a = follow(pose, self._waypoints, self.limits)
            if a is not None:
                return a
        return a
