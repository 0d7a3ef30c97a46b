"""``HouseEnv``: object navigation in one procedural apartment, behind the :class:`VLAEnv` protocol.

Episodes: ``reset(options={"trial": k})`` starts trial ``k`` of the scene (target category and
start pose are a function of the scene seed and ``k``; default trial 0). ``options`` may also impose
``"target"`` (an object id) and/or ``"start"`` (a world pose ``[x, y, yaw]``). The ``seed`` argument
only seeds gymnasium's ``np_random`` (unused by the env).

Actions ``[forward_m, left_m, yaw_rad]`` are validated by :func:`envs.base.check_action` (shape,
finiteness) and clipped to the configured limits; see :mod:`envs.ground_nav.agent` for the motion model.

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
sensor), ``sensors["motion"]`` what the last step achieved (wheel odometry, ``[forward_m, left_m,
yaw_rad]`` in the previous pose's frame). Instance id 0 is everything structural (floors, walls,
ceiling); only furniture and small objects have ids. ``scene_truth()`` (world frame, privileged) gives ``T_world_odom``.

``info`` after every step: success, at_goal, stopped, blocked, target (object id),
target_distance_m (horizontal, to its box), target_visible_fraction, geodesic_start_m,
episode_metrics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.base import TaskInfo
from envs.control import BaseLimits
from envs.ground_nav.env import GroundNavEnv
from envs.ground_nav.task import Episode
from spatial_memory.frame import CameraFrame
from spatial_memory.topdown import LEVELS

from .config import HouseConfig
from .exploration import Clip, ExplorationRoute, plan_route, sample_clips
from .scene import HouseScene
from .spec import ItemSpec
from .task import make_episode, target_distance


class HouseEnv(GroundNavEnv):
    _SPEC_FAMILY = "house"

    def __init__(
        self, cfg: HouseConfig | dict | None = None, scene_seed: int | None = None, task: TaskInfo | None = None
    ):
        cfg = cfg if isinstance(cfg, HouseConfig) else HouseConfig.from_dict(cfg)
        seed = scene_seed if scene_seed is not None else cfg.scene_seeds()[0]
        task = task or TaskInfo(
            0,
            f"house_{seed}",
            "go to the named object (the target is set per trial; see env.instruction)",
            cfg.max_steps,
            cfg.num_trials,
        )
        super().__init__(cfg, HouseScene(seed, cfg), task)
        self.target_item: ItemSpec | None = None

    def _new_episode(self, trial: int, target_id: str | None, start: Any) -> Episode:
        target = None
        if target_id is not None:
            try:
                target = self.scene.spec.item(target_id)
            except KeyError:
                raise ValueError(
                    f"unknown target object {target_id!r}; objects: {sorted(it.id for it in self.scene.spec.items)}"
                ) from None
        episode = make_episode(self.scene, trial, target=target, start=start)
        self.target_item = self.scene.spec.item(episode.target_id)
        return episode

    def _target_distance(self) -> float:
        return target_distance(self.target_item, self._pose)

    def close(self) -> None:
        self.scene.close()

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


def exploration_frames(seed: int, stride: int = 1) -> list[CameraFrame]:
    """Ego frames every ``stride``-th pose along the exploration route of the apartment ``seed``, from its
    first trial's start, in that episode's odometry frame (the benchmarks' and analyses' material)."""
    env = HouseEnv(HouseConfig(seed=seed))
    try:
        env.reset(options={"trial": 0})
        return env.route_frames(env.exploration_route(), stride=stride)
    finally:
        env.close()
