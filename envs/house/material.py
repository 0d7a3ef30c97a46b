"""GST material of the embedded apartments (privileged): offline explorations, episodes so far, TDS maps."""

from __future__ import annotations

import numpy as np

from envs.material import SceneMaterial, sample_windows
from spatial_memory.frame import CameraFrame

HOUSE_SUBTASKS = ("EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos", "Ori", "TDS-E", "TDS-M", "TDS-H", "Traj")


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
        supported=HOUSE_SUBTASKS,
    )


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
        supported=HOUSE_SUBTASKS,
    )


_DISTRACTOR_CACHE: dict[tuple, dict[str, np.ndarray]] = {}


def house_distractor_maps(env, n: int = 3) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Maps of ``n`` other scenes of the env's split (the last seeds of the split's range), cached per process."""
    from .config import SPLITS, split_of
    from .env import HouseEnv

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
