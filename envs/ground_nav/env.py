"""The env core of every ground-navigation family (the apartments, OmniGibson scenes): one ObjectNav
episode of a kinematic base on a floor grid, behind the :class:`VLAEnv` protocol.

What it does for a family: the action and observation spaces, ``reset`` (options ``trial``,
``target``, ``start``) and ``step`` with the optional stop signal, the success predicate and episode
metrics, the observation, the env spec, the pose bookkeeping in world and odometry frames, the
scripted expert and its :class:`NavGoal`, and the video frame (ego view beside the easy map with the
route). A family builds its ``scene`` (``grid``, ``planner``, ``frame``, ``camera_frame(pose,
T_world_odom, step)``, ``scene_truth(pose, T_world_odom)``) and ``cfg`` (``stop_action``,
``success_radius_m``, ``min_visible_fraction``, ``height``, ``width``, ``split``, ``max_steps``, the
base limits, ``render_map``), calls ``GroundNavEnv.__init__(cfg, scene, task)`` and says what differs:
``_new_episode(trial, target_id, start)`` (draws with :func:`envs.ground_nav.task.make_episode`),
``_target_distance()``, ``topdown_map(level)``, ``close()``, ``_SPEC_FAMILY`` and ``_spec_info()``.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import gymnasium as gym
import numpy as np

from envs.base import SceneTruth, TaskInfo, VLAEnv, check_action
from envs.control import BaseLimits
from envs.observation import Observation
from envs.spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import wrap_angle
from spatial_memory.topdown import TopDownFrame

from .agent import T_world_base, pose_from_T, step_pose
from .draw import draw_route
from .expert import NavGoal, ObjectNavExpert
from .task import Episode

RESET_OPTIONS = ("start", "target", "trial")


def visible_fraction(instance: np.ndarray, instance_id: int) -> float:
    """The share of an instance mask's pixels that show ``instance_id``."""
    return float(np.count_nonzero(instance == instance_id)) / instance.size


class GroundNavEnv(VLAEnv):
    metadata = {"render_modes": ["rgb_array"]}
    _SPEC_FAMILY = ""

    def __init__(self, cfg: Any, scene: Any, task: TaskInfo):
        super().__init__()
        self.cfg, self.scene, self.task = cfg, scene, task
        c = cfg
        self.max_episode_steps = c.max_steps
        self.render_mode = "rgb_array"
        low, high = [-c.max_forward_m, -c.max_left_m, -c.max_turn_rad], [c.max_forward_m, c.max_left_m, c.max_turn_rad]
        if c.stop_action:
            low, high = low + [0.0], high + [1.0]
        self.action_space = gym.spaces.Box(np.array(low, np.float32), np.array(high, np.float32), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "rgb": gym.spaces.Box(0, 255, (c.height, c.width, 3), np.uint8),
                "depth": gym.spaces.Box(0, np.inf, (c.height, c.width), np.float32),
                "instance": gym.spaces.Box(0, np.iinfo(np.int32).max, (c.height, c.width), np.int32),
                "state": gym.spaces.Box(-np.inf, np.inf, (3,), np.float64),
            }
        )
        self.episode: Episode | None = None
        self._episodes = 0  # resets so far: tells the expert that a new episode began
        self.instruction = ""
        self._pose = np.zeros(3)
        self.T_world_odom = np.eye(4)
        self._step = 0
        self._trajectory: list[np.ndarray] = []
        self._last_frame: CameraFrame | None = None
        self._last_info: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------ what differs
    def _new_episode(self, trial: int, target_id: str | None, start: Any) -> Episode:
        """The family's episode of ``trial`` (target by object id and/or start imposed when not None)."""
        raise NotImplementedError

    def _target_distance(self) -> float:  # metres from the base to the target
        raise NotImplementedError

    def _spec_info(self) -> dict[str, Any]:
        return {"frame": "odometry: origin at the start pose on the floor, x forward, z up", "split": self.cfg.split}

    def _visible_fraction(self, frame) -> float:  # fraction of the image showing the target
        return visible_fraction(frame.instance, self.episode.instance_id)

    # ------------------------------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; valid: {list(RESET_OPTIONS)}")
        trial = options.get("trial", 0)
        if isinstance(trial, bool) or not isinstance(trial, (int, np.integer)) or trial < 0:
            raise ValueError(f"reset option 'trial' must be a non-negative int, got {trial!r}")
        self.episode = self._new_episode(int(trial), options.get("target"), options.get("start"))
        self._episodes += 1
        self.instruction = self.episode.instruction
        self._pose = self.episode.start.copy()
        self.T_world_odom = T_world_base(self._pose)
        self._step = 0
        self._trajectory = [self._pose.copy()]
        self._reached, self._path_m = False, 0.0
        return self._observe(blocked=False, motion=np.zeros(3))

    def step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        a = check_action(action, self.action_space)
        stop = bool(self.cfg.stop_action and a[3] > 0.5)
        before = self._pose.copy()
        res = step_pose(self.scene.grid, self._pose, np.zeros(3) if stop else a[:3])  # stopping does not move
        self._pose = res.pose
        self._path_m += float(np.hypot(*(self._pose[:2] - before[:2])))
        self._step += 1
        self._trajectory.append(self._pose.copy())
        obs, info = self._observe(blocked=res.blocked, motion=base_motion(before, self._pose), stopped=stop)
        terminated = stop if self.cfg.stop_action else bool(info["success"])
        truncated = not terminated and self._step >= self.max_episode_steps
        return obs, float(info["success"]), terminated, truncated, info

    def _observe(self, blocked: bool, motion: np.ndarray, stopped: bool = False) -> tuple[Observation, dict[str, Any]]:
        frame = self.scene.camera_frame(self._pose, self.T_world_odom, step=self._step)
        self._last_frame = frame
        frac = self._visible_fraction(frame)
        dist = self._target_distance()
        at_goal = dist <= self.cfg.success_radius_m and frac >= self.cfg.min_visible_fraction
        self._reached = self._reached or at_goal
        if self._step == 0:  # whether the target was in view when the episode began
            self._visible_at_start = frac >= self.cfg.min_visible_fraction
        success = (stopped and at_goal) if self.cfg.stop_action else at_goal
        geo = self.episode.geodesic_m
        info = {
            "success": bool(success),
            "at_goal": bool(at_goal),
            "stopped": bool(stopped),
            "blocked": bool(blocked),
            "target": self.episode.target_id,
            "target_distance_m": dist,
            "target_visible_fraction": frac,
            "geodesic_start_m": geo,
            # per-episode numbers the evaluator keeps in each episode row (the final step's values)
            "episode_metrics": {
                "reached": bool(self._reached),  # the predicate held at some step ("passing by counts")
                "path_m": round(self._path_m, 4),
                "geodesic_m": round(float(geo), 4),
                "spl": float(success) * geo / max(self._path_m, geo, 1e-9),
                "visible_at_start": bool(self._visible_at_start),  # the target in view at step 0
            },
        }
        self._last_info = info
        obs = Observation(
            cameras={"ego": frame},
            state=self.odom_pose(),
            instruction=self.instruction,
            step=self._step,
            sensors={"blocked": bool(blocked), "motion": motion},
        )
        return obs, info

    @property
    def env_spec(self) -> EnvSpec:
        c = self.cfg
        return EnvSpec(
            family=self._SPEC_FAMILY,
            action=ActionSpec.from_space(
                self.action_space, ("forward_m", "left_m", "yaw_rad") + (("stop",) if c.stop_action else ())
            ),
            state=ArraySpec((3,), "float64", ("x_m", "y_m", "yaw_rad")),
            cameras=(CameraSpec("ego", c.height, c.width, depth=True, instance=True),),
            sensors={
                "blocked": ArraySpec((), "bool"),
                "motion": ArraySpec((3,), "float64", ("forward_m", "left_m", "yaw_rad")),
            },
            task=self.task.to_dict(),
            info=self._spec_info(),
        )

    # ------------------------------------------------------------------------------------------ poses
    def agent_pose(self) -> np.ndarray:
        """True world pose [x, y, yaw] of the base."""
        return self._pose.copy()

    def odom_pose(self, pose_world: np.ndarray | None = None) -> np.ndarray:
        """A world pose expressed in this episode's odometry frame (default: the agent's current pose)."""
        p = self._pose if pose_world is None else np.asarray(pose_world, dtype=np.float64)
        return pose_from_T(np.linalg.inv(self.T_world_odom) @ T_world_base(p))

    def world_pose(self, pose_odom: np.ndarray) -> np.ndarray:
        return pose_from_T(self.T_world_odom @ T_world_base(np.asarray(pose_odom, dtype=np.float64)))

    @property
    def trajectory(self) -> np.ndarray:
        """World poses of this episode so far (Nx3, the reset pose first)."""
        return np.array(self._trajectory)

    @property
    def last_info(self) -> dict[str, Any]:
        return dict(self._last_info)

    def heading_to(self, xy: np.ndarray) -> float:
        """Bearing (radians, left positive) of a world point from the agent's heading."""
        return wrap_angle(math.atan2(xy[1] - self._pose[1], xy[0] - self._pose[0]) - self._pose[2])

    # ------------------------------------------------------------------------------------------ video
    def render(self) -> np.ndarray:
        """Video frame: the ego view and (render_map) the easy top-down map with the trajectory, side by side."""
        if self._last_frame is None:
            raise RuntimeError("call reset() before render()")
        ego = self._last_frame.rgb
        if not self.cfg.render_map:
            return ego.copy()
        top = self.topdown_map("easy")
        draw_route(top, self.scene.frame, np.array(self._trajectory)[:, :2], agent_pose=self._pose)
        h = top.shape[0]
        w = int(round(ego.shape[1] * h / ego.shape[0]))
        ego_big = cv2.resize(
            ego, (w, h), interpolation=cv2.INTER_NEAREST if h % ego.shape[0] == 0 else cv2.INTER_LINEAR
        )
        return np.concatenate([ego_big, top], axis=1)

    def video_frame(self, episode: Any = None) -> np.ndarray:
        """Frame for the rollout's video writer (same as :meth:`render`)."""
        return self.render()

    def topdown_frame(self) -> TopDownFrame:
        return self.scene.frame

    def topdown_map(self, level: str) -> np.ndarray:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------ privileged access
    def scene_truth(self) -> SceneTruth:
        return self.scene.scene_truth(self._pose, self.T_world_odom)

    def expert(self) -> ObjectNavExpert:
        """The scripted expert on this env's scene truth and the current episode's :class:`NavGoal`."""
        return ObjectNavExpert(self.scene_truth, self.nav_goal, BaseLimits.from_config(self.cfg))

    def nav_goal(self) -> NavGoal:
        """The current episode's goal cells, target id and a planner on the navigable grid (privileged)."""
        ep = self.episode
        if ep is None:
            raise RuntimeError("reset the env before asking the expert for an action")
        return NavGoal(
            self._episodes,
            ep.target_id,
            ep.goal_cells,
            self.scene.planner.plan,
            at_goal=lambda: bool(self._last_info.get("at_goal")),
            stop_action=self.cfg.stop_action,
        )


def base_motion(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Wheel odometry of one step: how far the base moved, ``[forward_m, left_m, yaw_rad]`` in the frame
    of its pose before the step (what it achieved, not what it was told: a bump shortens it)."""
    d = np.asarray(after[:2], dtype=np.float64) - np.asarray(before[:2], dtype=np.float64)
    c, s = math.cos(before[2]), math.sin(before[2])
    return np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1], wrap_angle(after[2] - before[2])], dtype=np.float64)
