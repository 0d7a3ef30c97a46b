"""``OmniGibsonEnv``: object navigation in one BEHAVIOR-1K scene, behind the :class:`VLAEnv` protocol.

The same episodes, actions, observations and success rule as ``env=house`` (docs/HOUSE.md), so an
agent or a policy of the apartments runs here unchanged: ``reset(options={"trial": k})`` (or
``"target"`` / ``"start"``), actions ``[forward_m, left_m, yaw_rad]`` (a 4th ``stop`` with
``stop_action=true``) applied kinematically on the scene's traversable map (:mod:`envs.house.agent`),
``cameras["ego"]`` with RGB, depth (m), instance masks and labels, K and ``T_world_cam`` in the
odometry frame (origin at the start pose on the floor, x forward, z up), ``state`` the odometry
pose, ``sensors["blocked"]``. The world frame is the scene's own (see :mod:`.scene`).

The camera agent has no body: a pose change is a new camera pose and a render, physics never steps.
With ``robot=<OmniGibson robot class>`` the robot is teleported to every pose and its first camera is
the ego camera (docs/omnigibson.md says what of this has been run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from envs.base import (
    SceneTruth,
    TaskInfo,
    VLAEnv,
)
from envs.control import BaseLimits
from envs.house.agent import T_world_base
from envs.house.expert import NavGoal, ObjectNavExpert
from envs.house.ground_nav import GroundNavEpisode
from envs.house.topdown import draw_route
from spatial_memory.frame import CameraFrame
from spatial_memory.topdown import LEVELS, TopDownFrame

from .config import OmniGibsonConfig, split_of
from .route import Route, plan_route
from .scene import OGScene
from .sim import OmniGibsonSim
from .task import Episode, box_distance, make_episode

INSTRUCTION = "go to the named object (the target is set per trial; read obs.instruction after reset)"


def gst_scene_name(scene: str, split: str | None = None) -> str:
    """The scene's stable name in GST question sets and map caches: ``omnigibson/<split>/<scene>``."""
    return f"omnigibson/{split_of(scene) or split or 'custom'}/{scene}"


def map_file(cache: str | Path, name: str, level: str) -> Path:
    """Where ``vla-gst generate`` keeps a scene's map (its ``out/maps``), the file name the env reads and writes."""
    return Path(cache) / f"{name.replace('/', '-')}_{level}.png"


class OmniGibsonEnv(GroundNavEpisode, VLAEnv):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        cfg: OmniGibsonConfig | dict | None = None,
        scene: str | None = None,
        task: TaskInfo | None = None,
        sim: OmniGibsonSim | None = None,
    ):
        super().__init__()
        self.cfg = cfg if isinstance(cfg, OmniGibsonConfig) else OmniGibsonConfig.from_dict(cfg)
        self.scene_name = scene or self.cfg.scene_names()[0]
        self.sim = sim if sim is not None else OmniGibsonSim(self.cfg, self.scene_name)
        try:
            self.scene = OGScene(self.cfg, self.scene_name, self.sim)
        except BaseException:
            self.sim.close()
            raise
        c = self.cfg
        self.task = task or TaskInfo(0, f"omnigibson_{self.scene_name}", INSTRUCTION, c.max_steps, c.num_trials)
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
        self._episodes = 0
        self.instruction = ""
        self._pose = np.zeros(3)
        self.T_world_odom = np.eye(4)
        self._step = 0
        self._trajectory: list[np.ndarray] = []
        self._last_frame: CameraFrame | None = None
        self._last_info: dict[str, Any] = {}
        self._maps: dict[str, np.ndarray] = {}  # maps read from map_cache

    @property
    def gst_name(self) -> str:
        return gst_scene_name(self.scene_name, self.cfg.split)

    # ------------------------------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"trial", "target", "start"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; valid: ['start', 'target', 'trial']")
        trial = options.get("trial", 0)
        if isinstance(trial, bool) or not isinstance(trial, (int, np.integer)) or trial < 0:
            raise ValueError(f"reset option 'trial' must be a non-negative int, got {trial!r}")
        target = None
        if options.get("target") is not None:
            by_id = {o.id: o for o in self.scene.objects}
            if options["target"] not in by_id:
                raise ValueError(f"unknown target object {options['target']!r}; objects: {sorted(by_id)[:40]} ...")
            target = by_id[options["target"]]
        sc = self.scene
        self.episode = make_episode(
            self.scene_name,
            int(trial),
            sc.grid,
            sc.main_component,
            sc.planner.distance_field,
            sc.objects,
            self.cfg,
            target=target,
            start=options.get("start"),
        )
        self._episodes += 1
        self.target = next(o for o in sc.objects if o.id == self.episode.target_id)
        self.instruction = self.episode.instruction
        self._pose = self.episode.start.copy()
        self.T_world_odom = T_world_base(self._pose)
        self._step = 0
        self._trajectory = [self._pose.copy()]
        self._reached, self._path_m = False, 0.0
        return self._observe(blocked=False)

    _SPEC_FAMILY = "omnigibson"

    def _target_distance(self) -> float:
        return float(box_distance(self._pose[:2], self.target.box))

    def _spec_info(self) -> dict[str, Any]:
        return {
            "frame": "odometry: origin at the start pose on the floor, x forward, z up",
            "scene": self.scene_name,
            "split": split_of(self.scene_name) or self.cfg.split,
            "robot": self.cfg.robot or "camera",
        }

    def render(self) -> np.ndarray:
        """Video frame: the ego view and (render_map) the easy map with the trajectory, side by side."""
        if self._last_frame is None:
            raise RuntimeError("call reset() before render()")
        import cv2

        ego = self._last_frame.rgb
        if not self.cfg.render_map:
            return ego.copy()
        top = self.topdown_map("easy")
        draw_route(top, self.scene.frame, np.array(self._trajectory)[:, :2], agent_pose=self._pose)
        h = top.shape[0]
        ego_big = cv2.resize(ego, (int(round(ego.shape[1] * h / ego.shape[0])), h), interpolation=cv2.INTER_LINEAR)
        return np.concatenate([ego_big, top], axis=1)

    def video_frame(self, episode: Any = None) -> np.ndarray:
        return self.render()

    def close(self) -> None:
        self.sim.close()

    # ------------------------------------------------------------------------------------------ privileged access
    def scene_truth(self) -> SceneTruth:
        return self.scene.scene_truth(self._pose, self.T_world_odom)

    def expert(self) -> ObjectNavExpert:
        return ObjectNavExpert(self.scene_truth, self.nav_goal, BaseLimits.from_config(self.cfg))

    def nav_goal(self) -> NavGoal:
        if self.episode is None:
            raise RuntimeError("reset the env before asking the expert for an action")
        return NavGoal(
            self._episodes,
            self.episode.target_id,
            self.episode.goal_cells,
            self.scene.planner.plan,
            at_goal=lambda: bool(self._last_info.get("at_goal")),
            stop_action=self.cfg.stop_action,
        )

    def topdown_frame(self) -> TopDownFrame:
        return self.scene.frame

    def topdown_map(self, level: str) -> np.ndarray:
        """GT map of ``level`` on :meth:`topdown_frame`; read from / written to ``map_cache`` when it is set."""
        if level not in LEVELS:
            raise ValueError(f"unknown top-down level {level!r}; expected one of {LEVELS}")
        if self.cfg.map_cache is None or level in self._maps:
            return self._maps[level].copy() if level in self._maps else self.scene.topdown_map(level)
        import imageio.v2 as imageio

        path = map_file(self.cfg.map_cache, self.gst_name, level)
        img = np.asarray(imageio.imread(path))[..., :3] if path.exists() else None
        if img is None or img.shape != (self.scene.frame.height, self.scene.frame.width, 3):
            img = self.scene.topdown_map(level)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.png")
            imageio.imwrite(tmp, img)
            tmp.replace(path)
        self._maps[level] = img
        return img.copy()

    # ------------------------------------------------------------------------------------------ GST material
    def exploration_route(self, start: np.ndarray | None = None, look_around: bool = True) -> Route:
        sc = self.scene
        return plan_route(
            sc.grid,
            sc.planner,
            sc.main_component,
            self._pose if start is None else np.asarray(start, dtype=np.float64),
            BaseLimits.from_config(self.cfg),
            look_around=look_around,
        )

    def render_pose(self, pose_world: np.ndarray, step: int = 0) -> CameraFrame:
        """The ego frame at any world pose, in this episode's odometry frame (the agent does not move)."""
        return self.scene.camera_frame(np.asarray(pose_world, dtype=np.float64), self.T_world_odom, step=step)

    def route_frames(self, poses: np.ndarray, stride: int = 1, first: int = 0) -> list[CameraFrame]:
        return [self.render_pose(p, step=first + k) for k, p in enumerate(poses) if k % stride == 0]
