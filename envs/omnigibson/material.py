"""GST material of BEHAVIOR-1K scenes (privileged): offline explorations, episodes so far, TDS maps.

The same material as the apartments' (``envs/house/material.py``). One difference: a process holds
one OmniGibson scene at a time, so the TDS distractors (other scenes' maps) cannot be drawn by
loading those scenes mid-episode; they are read from ``map_cache`` -- the ``maps/`` folder that
``vla-gst generate`` writes for every scene of a split -- and a scene without cached maps is no
distractor (a TDS question is then filtered as "fewer than 3 other scenes").
"""

from __future__ import annotations

import numpy as np

from envs.material import SceneMaterial, sample_windows
from spatial_memory.frame import CameraFrame
from spatial_memory.topdown import LEVELS

from .config import SPLITS, split_of

OG_SUBTASKS = ("EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos", "Ori", "TDS-E", "TDS-M", "TDS-H", "Traj")


def og_material(env, name: str, stride: int = 2, num_clips: int = 8, seed: int = 0) -> SceneMaterial:
    """Offline material: the exploration route from the env's current pose, rendered as a video."""
    route = env.exploration_route()
    poses = np.asarray(route.poses, dtype=np.float64)
    truth = env.scene_truth()
    return SceneMaterial(
        name=name,
        truth=truth,
        T_world_odom=truth.T_world_odom,
        frames=env.route_frames(poses, stride=stride),
        poses_world=poses,
        topdown=env.topdown_frame(),
        maps={lvl: env.topdown_map(lvl) for lvl in LEVELS},
        render=lambda pose: env.render_pose(np.asarray(pose, dtype=np.float64)),
        clips=sample_windows(poses, num_clips, seed=seed),
        supported=OG_SUBTASKS,
    )


def og_live_material(
    env, name: str, frames: list[CameraFrame], maps: dict[str, np.ndarray], num_clips: int = 8
) -> SceneMaterial:
    """Mid-episode material: the video is the episode so far."""
    truth = env.scene_truth()
    poses = np.asarray(env.trajectory, dtype=np.float64)
    return SceneMaterial(
        name=name,
        truth=truth,
        T_world_odom=truth.T_world_odom,
        frames=frames,
        poses_world=poses,
        topdown=env.topdown_frame(),
        maps=maps,
        render=None,
        clips=sample_windows(poses, num_clips, seed=len(poses)),
        supported=OG_SUBTASKS,
    )


def cached_distractor_maps(env, n: int = 3) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Maps of up to ``n`` other scenes of the env's split found in ``map_cache`` (the split's last scenes first)."""
    import imageio.v2 as imageio

    from .env import gst_scene_name, map_file

    if env.cfg.map_cache is None:
        return []
    split = split_of(env.scene_name) or env.cfg.split
    out = []
    for scene in reversed(SPLITS.get(split, ())):
        if scene == env.scene_name or len(out) >= n:
            continue
        name = gst_scene_name(scene, split)
        files = {lvl: map_file(env.cfg.map_cache, name, lvl) for lvl in LEVELS}
        if all(f.exists() for f in files.values()):
            out.append((name, {lvl: np.asarray(imageio.imread(f))[..., :3] for lvl, f in files.items()}))
    return out
