"""``HouseEnv``: object navigation in one procedural apartment, behind the :class:`VLAEnv` protocol.

Episodes: ``reset(options={"trial": k})`` starts trial ``k`` of the scene (target category and
start pose are a function of the scene seed and ``k``; default trial 0). ``options`` may also impose
``"target"`` (an object id) and/or ``"start"`` (a world pose ``[x, y, yaw]``). The ``seed`` argument
only seeds gymnasium's ``np_random`` (unused by the env).

Actions ``[forward_m, left_m, yaw_rad]`` are validated by :func:`envs.base.check_action` (shape,
finiteness) and clipped to the configured limits; see :mod:`.agent` for the motion model.

Success. By default an episode ends the moment the agent is within ``success_radius_m`` of the
target's box with the target in view (passing by counts). With ``stop_action=true`` (the ObjectNav
protocol, as Habitat counts it) the action gains a 4th dimension ``stop`` in [0, 1]: ``stop > 0.5``
ends the episode without moving, and it is a success only if the agent is at the goal then.
``info["episode_metrics"]`` carries ``reached`` (the goal predicate held at some step: the first
protocol's success, so one run reports both), ``path_m``, ``geodesic_m``, ``spl`` and
``visible_at_start`` (the target was in view at the first step: results split by it).

Observations (:class:`Observation`): ``cameras["ego"]`` is a :class:`CameraFrame` (RGB, depth in
metres, instance ids with ``labels`` for the ids in view, K, and ``T_world_cam`` **in the odometry
frame**: origin at the agent's pose at reset on the floor, x forward, z up); ``state`` is the
odometry pose ``[x, y, yaw]``; ``sensors["blocked"]`` tells whether the last move bumped (a bump
sensor). Instance id 0 is everything structural (floors, walls, ceiling); only furniture and small
objects have ids. ``scene_truth()`` (world frame, privileged) gives ``T_world_odom``.

``info`` after every step: success, at_goal, stopped, blocked, target (object id),
target_distance_m (horizontal, to its box), target_visible_fraction, geodesic_start_m,
episode_metrics.
"""

from __future__ import annotations

from typing import Any

import cv2
import gymnasium as gym
import numpy as np

from envs.base import (
    Observation,
    SceneTruth,
    TaskInfo,
    VLAEnv,
)
from envs.control import BaseLimits
from spatial_memory.frame import CameraFrame
from spatial_memory.topdown import LEVELS, TopDownFrame

from .agent import T_world_base
from .config import HouseConfig
from .expert import NavGoal, ObjectNavExpert
from .ground_nav import Episode, GroundNavEpisode
from .exploration import Clip, ExplorationRoute, plan_route, sample_clips
from .spec import ItemSpec
from .scene import HouseScene
from .task import make_episode, target_distance
from .topdown import draw_route


class HouseEnv(GroundNavEpisode, VLAEnv):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self, cfg: HouseConfig | dict | None = None, scene_seed: int | None = None, task: TaskInfo | None = None
    ):
        super().__init__()
        self.cfg = cfg if isinstance(cfg, HouseConfig) else HouseConfig.from_dict(cfg)
        seed = scene_seed if scene_seed is not None else self.cfg.scene_seeds()[0]
        self.scene = HouseScene(seed, self.cfg)
        self.task = task or TaskInfo(
            0,
            f"house_{seed}",
            "go to the named object (the target is set per trial; see env.instruction)",
            self.cfg.max_steps,
            self.cfg.num_trials,
        )
        self.max_episode_steps = self.cfg.max_steps
        self.render_mode = "rgb_array"
        c = self.cfg
        low, high = [-c.max_forward_m, -c.max_left_m, -c.max_turn_rad], [c.max_forward_m, c.max_left_m, c.max_turn_rad]
        if c.stop_action:
            low, high = low + [0.0], high + [1.0]
        self.action_space = gym.spaces.Box(
            low=np.array(low, dtype=np.float32), high=np.array(high, dtype=np.float32), dtype=np.float32
        )
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
        self.target_item: ItemSpec | None = None
        self.instruction = ""
        self._pose = np.zeros(3)
        self.T_world_odom = np.eye(4)
        self._step = 0
        self._trajectory: list[np.ndarray] = []
        self._last_frame: CameraFrame | None = None
        self._last_info: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------
    # gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"trial", "target", "start"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; valid: ['start', 'target', 'trial']")
        trial = options.get("trial", 0)
        if not isinstance(trial, (int, np.integer)) or trial < 0:
            raise ValueError(f"reset option 'trial' must be a non-negative int, got {trial!r}")
        target = None
        if options.get("target") is not None:
            try:
                target = self.scene.spec.item(options["target"])
            except KeyError:
                raise ValueError(
                    f"unknown target object {options['target']!r}; "
                    f"objects: {sorted(it.id for it in self.scene.spec.items)}"
                ) from None
        self.episode = make_episode(self.scene, int(trial), target=target, start=options.get("start"))
        self._episodes += 1
        self.target_item = self.scene.spec.item(self.episode.target_id)
        self.instruction = self.episode.instruction
        self._pose = self.episode.start.copy()
        self.T_world_odom = T_world_base(self._pose)
        self._step = 0
        self._trajectory = [self._pose.copy()]
        self._reached, self._path_m = False, 0.0
        obs, info = self._observe(blocked=False)
        return obs, info

    _SPEC_FAMILY = "house"

    def _target_distance(self) -> float:
        return target_distance(self.target_item, self._pose)

    def render(self) -> np.ndarray:
        """Video frame: the ego view and (render_map) the easy top-down map with the trajectory, side by side."""
        if self._last_frame is None:
            raise RuntimeError("call reset() before render()")
        ego = self._last_frame.rgb
        if not self.cfg.render_map:
            return ego.copy()
        top = self.scene.topdown_map("easy")
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

    def close(self) -> None:
        self.scene.close()

    # ------------------------------------------------------------------------------------------
    # privileged access
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

    def topdown_frame(self) -> TopDownFrame:
        return self.scene.frame

    def topdown_map(self, level: str) -> np.ndarray:
        """GT map of ``level`` (easy / medium / hard), uint8 HxWx3 on :meth:`topdown_frame`."""
        if level not in LEVELS:
            raise ValueError(f"unknown top-down level {level!r}; expected one of {LEVELS}")
        return self.scene.topdown_map(level)

    # ------------------------------------------------------------------------------------------
    # GST question generation
    def exploration_route(self, start: np.ndarray | None = None, look_around: bool = True) -> ExplorationRoute:
        """Coverage route through every room from ``start`` (world pose; default the agent's current pose)."""
        return plan_route(
            self.scene,
            self._pose if start is None else np.asarray(start, dtype=np.float64),
            BaseLimits.from_config(self.cfg),
            look_around,
        )

    def render_pose(self, pose_world: np.ndarray, step: int = 0) -> CameraFrame:
        """The ego frame at any world pose, its pose in this episode's odometry frame (the agent does not move)."""
        pose_world = np.asarray(pose_world, dtype=np.float64)
        frame = self.scene.camera_frame(pose_world, self.T_world_odom, step=step)
        self.scene.set_agent(self._pose)
        return frame

    def route_frames(self, route: ExplorationRoute | Clip, stride: int = 1) -> list[CameraFrame]:
        """Ego frames along a route or clip (every ``stride``-th pose), ``step`` = pose index."""
        first = route.start if isinstance(route, Clip) else 0
        return [self.render_pose(p, step=first + k) for k, p in enumerate(route.poses) if k % stride == 0]

    def clips(
        self, route: ExplorationRoute, num: int, length: int = 16, min_travel_m: float = 1.5, seed: int = 0
    ) -> list[Clip]:
        return sample_clips(route, num, length, min_travel_m, seed)
