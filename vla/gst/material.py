"""What question generation needs to know about one scene (privileged: never shown to an agent).

A :class:`SceneMaterial` holds the scene truth (world frame), the recorded frames (the exploration
video offline, the episode so far mid-episode) with their poses in the robot's odometry frame, the
world poses along the recording, the shared top-down frame and ground-truth maps, and a renderer for
views at arbitrary poses. Builders exist per environment family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from envs.base import SceneTruth
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import camera_yaw
from spatial_memory.topdown import TopDownFrame


@dataclass
class SceneMaterial:
    name: str
    truth: SceneTruth
    T_world_odom: np.ndarray
    frames: list[CameraFrame]  # the video; T_world_cam in the odometry frame
    poses_world: np.ndarray  # Nx3 [x, y, yaw] of every recorded step (frames are a subset, frame.step indexes here)
    topdown: TopDownFrame
    maps: dict[str, np.ndarray]  # level -> ground-truth map image
    render: Callable[[np.ndarray], CameraFrame] | None = None  # world pose [x, y, yaw] -> frame (odometry pose)
    clips: list[tuple[int, int]] = field(default_factory=list)  # (start, end) step ranges for Traj
    supported: tuple[str, ...] = ()  # subtask codes this scene can generate
    min_target_distance_m: float | None = None  # targets nearer are degenerate (None: GenConfig's, room scale)

    def T_world_cam(self, frame: CameraFrame) -> np.ndarray:
        return self.T_world_odom @ frame.T_world_cam

    def camera_xy_yaw_world(self, frame: CameraFrame) -> tuple[np.ndarray, float]:
        T = self.T_world_cam(frame)
        return T[:2, 3].copy(), camera_yaw(T)


def house_material(
    env, name: str, stride: int = 2, map_levels=("easy", "medium", "hard"), num_clips: int = 8, seed: int = 0
) -> SceneMaterial:
    """Offline material of a house scene: the coverage route from the env's current pose, as a video."""
    route = env.exploration_route()
    frames = env.route_frames(route, stride=stride)
    truth = env.scene_truth()
    clips = [(c.start, c.end) for c in env.clips(route, num=num_clips, length=16, min_travel_m=1.5, seed=seed)]
    return SceneMaterial(
        name=name,
        truth=truth,
        T_world_odom=truth.T_world_odom,
        frames=frames,
        poses_world=np.asarray(route.poses, dtype=np.float64),
        topdown=env.topdown_frame(),
        maps={lvl: env.topdown_map(lvl) for lvl in map_levels},
        render=lambda pose: env.render_pose(np.asarray(pose, dtype=np.float64)),
        clips=clips,
        supported=("EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos", "Ori", "TDS-E", "TDS-M", "TDS-H", "Traj"),
    )


def sample_windows(
    poses_world: np.ndarray, num: int, length: int = 16, min_travel_m: float = 1.5, seed: int = 0
) -> list[tuple[int, int]]:
    """Up to ``num`` non-overlapping (start, end) windows of ``length`` steps that travel >= ``min_travel_m``."""
    rng = np.random.default_rng(seed)
    n = len(poses_world)
    step_len = np.hypot(*np.diff(poses_world[:, :2], axis=0).T) if n > 1 else np.zeros(0)
    starts = [s for s in range(0, max(n - length, 0) + 1) if step_len[s : s + length - 1].sum() >= min_travel_m]
    rng.shuffle(starts)
    chosen: list[tuple[int, int]] = []
    for s in starts:
        if len(chosen) >= num:
            break
        if all(s + length <= a or s >= b for a, b in chosen):
            chosen.append((s, s + length))
    return sorted(chosen)


def house_live_material(
    env,
    name: str,
    frames: list[CameraFrame],
    map_levels=("easy", "medium", "hard"),
    maps: dict | None = None,
    num_clips: int = 8,
) -> SceneMaterial:
    """Mid-episode material of a house episode: the video is the episode so far."""
    truth = env.scene_truth()
    poses = np.asarray(env.trajectory, dtype=np.float64)
    return SceneMaterial(
        name=name,
        truth=truth,
        T_world_odom=truth.T_world_odom,
        frames=frames,
        poses_world=poses,
        topdown=env.topdown_frame(),
        maps=maps if maps is not None else {lvl: env.topdown_map(lvl) for lvl in map_levels},
        render=None,
        clips=sample_windows(poses, num_clips, seed=len(poses)),
        supported=("EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos", "Ori", "TDS-E", "TDS-M", "TDS-H", "Traj"),
    )


_DISTRACTOR_CACHE: dict[tuple, dict[str, np.ndarray]] = {}


def house_distractor_maps(env, n: int = 3) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Maps of ``n`` other scenes of the env's split (the last seeds of the split's range), cached per process."""
    from envs.house.config import SPLITS, split_of

    from envs.house.env import HouseEnv

    own = int(env.scene.seed)
    split = split_of(own) or env.cfg.split
    lo, hi = SPLITS[split]
    seeds = [s for s in range(hi - 1, lo - 1, -1) if s != own][:n]
    out = []
    for s in seeds:
        key = (tuple(sorted(env.cfg.to_dict().items())), s)
        if key not in _DISTRACTOR_CACHE:
            other = HouseEnv(env.cfg, scene_seed=s)
            try:
                _DISTRACTOR_CACHE[key] = {lvl: other.topdown_map(lvl) for lvl in ("easy", "medium", "hard")}
            finally:
                other.close()
        out.append((f"house/{split}/{s}", _DISTRACTOR_CACHE[key]))
    return out
