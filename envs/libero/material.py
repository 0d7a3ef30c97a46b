"""Mid-episode GST material for LIBERO tabletop scenes (privileged).

The current view is the wrist camera (the agentview camera sees the whole table, so nothing is ever
out of its view). Supported subtasks, and why the others are not (docs/GST.md):

* EDv, EDs, EDistv, EDists: direction and distance, from the wrist camera, of an object it does not
  see now but saw earlier in the episode;
* GPv, GPs: object positions on a top-down map of the table (medium level: footprints);
* Pos: the wrist camera's position on that map.
* Not Ori: the wrist camera looks down, so its heading on a map is ill-defined.
* Not TDS-E: LIBERO's models have no orthographic camera for a photo-like top-down render; not
  TDS-M / TDS-H: distractors would need other tasks' simulators mid-episode, and a table has no
  walls (a hard map would be blank).
* Not Traj: the arm moves centimetres; the subtask is about routes through rooms.
"""

from __future__ import annotations

import numpy as np

from spatial_memory.draw import box_footprint, compose_level, polygon_mask
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import camera_yaw
from spatial_memory.topdown import TopDownFrame

from envs.material import SceneMaterial

LIBERO_SUBTASKS = ("EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos")


def table_map(truth, frame: TopDownFrame) -> np.ndarray:
    """Medium-level map of a tabletop scene: object footprints black on white (no walls)."""
    objects = polygon_mask(frame, [box_footprint(o.box.center, o.box.size, o.box.R) for o in truth.objects])
    return compose_level("medium", np.zeros_like(objects), objects)


def libero_live_material(env, name: str, frames: list[CameraFrame]) -> SceneMaterial:
    truth = env.scene_truth()
    x0, y0, x1, y1 = truth.bounds
    tdf = TopDownFrame(x0, y0, x1, y1)
    poses = np.array([[f.T_world_cam[0, 3], f.T_world_cam[1, 3], camera_yaw(f.T_world_cam)] for f in frames])
    return SceneMaterial(
        name=name,
        truth=truth,
        T_world_odom=np.eye(4),  # the arm's base is fixed: its frame is the world of the table
        frames=frames,
        poses_world=poses,
        topdown=tdf,
        maps={"medium": table_map(truth, tdf)},
        render=None,
        supported=LIBERO_SUBTASKS,
        min_target_distance_m=0.1,  # table scale: the wrist camera is never 0.5 m from anything on the table
    )
