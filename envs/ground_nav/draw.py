"""The GST route overlay on a top-down map: a trajectory in red, its start as a blue dot, the agent as a
green arrow (the question renders of ``Traj`` and the video frames of every ground-navigation env)."""

from __future__ import annotations

import numpy as np

from spatial_memory.draw import BLUE, GREEN, RED, draw_arrow, draw_disk, draw_polyline
from spatial_memory.topdown import TopDownFrame


def draw_route(
    img: np.ndarray,
    frame: TopDownFrame,
    poses_xy: np.ndarray,
    agent_pose: np.ndarray | None = None,
    thickness_px: float = 3.0,
    colour=RED,
    start_colour=BLUE,
) -> np.ndarray:
    """GST overlay: trajectory in red, its start as a blue dot, the agent as a green arrow (in place)."""
    poses_xy = np.asarray(poses_xy, dtype=np.float64).reshape(-1, poses_xy.shape[-1] if np.ndim(poses_xy) > 1 else 2)
    if len(poses_xy):
        draw_polyline(img, frame, poses_xy[:, :2], colour=colour, thickness_px=thickness_px)
        draw_disk(img, frame, poses_xy[0, :2], radius_px=thickness_px * 2, colour=start_colour)
    if agent_pose is not None:
        draw_arrow(img, frame, agent_pose[:2], float(agent_pose[2]), colour=GREEN)
    return img
