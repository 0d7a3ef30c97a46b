"""``OmniGibsonEnv``: object navigation in one BEHAVIOR-1K scene, behind the :class:`VLAEnv` protocol.

The same episodes, actions, observations and success rule as ``env=house`` (docs/HOUSE.md), so an
agent or a policy of the apartments runs here unchanged: ``reset(options={"trial": k})`` (or
``"target"`` / ``"start"``), actions ``[forward_m, left_m, yaw_rad]`` (a 4th ``stop`` with
``stop_action=true``) applied kinematically on the scene's traversable map
(:mod:`envs.ground_nav.agent`), ``cameras["ego"]`` with RGB, depth (m), instance masks and labels, K
and ``T_world_cam`` in the odometry frame (origin at the start pose on the floor, x forward, z up),
``state`` the odometry pose, ``sensors["blocked"]``: the env core of :mod:`envs.ground_nav.env`. The
world frame is the scene's own (see :mod:`.scene`).

The camera agent has no body: a pose change is a new camera pose and a render, physics never steps.
With ``robot=<OmniGibson robot class>`` the robot is teleported to every pose and its first camera is
the ego camera (docs/omnigibson.md says what of this has been run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from envs.base import TaskInfo
from envs.control import BaseLimits
from envs.ground_nav.env import GroundNavEnv
from envs.ground_nav.task import Episode
from spatial_memory.frame import CameraFrame
from spatial_memory.topdown import LEVELS

from .config import OmniGibsonConfig, split_of
from .route import Route, plan_route
from .scene import OGScene
from .sim import OmniGibsonSim
from .task import make_episode, target_distance

INSTRUCTION = "go to the named object (the target is set per trial; read obs.instruction after reset)"


def gst_scene_name(scene: str, split: str | None = None) -> str:
    """The scene's stable name in GST question sets and map caches: ``omnigibson/<split>/<scene>``."""
    return f"omnigibson/{split_of(scene) or split or 'custom'}/{scene}"


def map_file(cache: str | Path, name: str, level: str) -> Path:
    """Where ``vla-gst generate`` keeps a scene's map (its ``out/maps``), the file name the env reads and writes."""
    return Path(cache) / f"{name.replace('/', '-')}_{level}.png"


class OmniGibsonEnv(GroundNavEnv):
    _SPEC_FAMILY = "omnigibson"

    def __init__(
        self,
        cfg: OmniGibsonConfig | dict | None = None,
        scene: str | None = None,
        task: TaskInfo | None = None,
        sim: OmniGibsonSim | None = None,
    ):
        cfg = cfg if isinstance(cfg, OmniGibsonConfig) else OmniGibsonConfig.from_dict(cfg)
        self.scene_name = scene or cfg.scene_names()[0]
        self.sim = sim if sim is not None else OmniGibsonSim(cfg, self.scene_name)
        try:
            og_scene = OGScene(cfg, self.scene_name, self.sim)
        except BaseException:
            self.sim.close()
            raise
        task = task or TaskInfo(0, f"omnigibson_{self.scene_name}", INSTRUCTION, cfg.max_steps, cfg.num_trials)
        super().__init__(cfg, og_scene, task)
        self.target = None
        self._maps: dict[str, np.ndarray] = {}  # maps read from map_cache

    @property
    def gst_name(self) -> str:
        return gst_scene_name(self.scene_name, self.cfg.split)

    def _new_episode(self, trial: int, target_id: str | None, start: Any) -> Episode:
        sc = self.scene
        target = None
        if target_id is not None:
            by_id = {o.id: o for o in sc.objects}
            if target_id not in by_id:
                raise ValueError(f"unknown target object {target_id!r}; objects: {sorted(by_id)[:40]} ...")
            target = by_id[target_id]
        episode = make_episode(
            self.scene_name,
            trial,
            sc.grid,
            sc.main_component,
            sc.planner.distance_field,
            sc.objects,
            self.cfg,
            target=target,
            start=start,
        )
        self.target = next(o for o in sc.objects if o.id == episode.target_id)
        return episode

    def _target_distance(self) -> float:
        return target_distance(self.target.box, self._pose)

    def _spec_info(self) -> dict[str, Any]:
        return {
            "frame": "odometry: origin at the start pose on the floor, x forward, z up",
            "scene": self.scene_name,
            "split": split_of(self.scene_name) or self.cfg.split,
            "robot": self.cfg.robot or "camera",
        }

    def close(self) -> None:
        self.sim.close()

    # ------------------------------------------------------------------------------------------ maps
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
