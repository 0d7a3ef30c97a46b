"""The base and its camera in the memory's frame.

The odometry drifts; a memory with drift correction registers every frame to its own map and keeps
the correction (``SpatialMemory.to_memory_frame``). Its map, objects and occupancy live in that
corrected frame, so the navigator plans with the corrected pose too: the odometry pose against a
corrected map puts the robot where the map is not (under the ``harsh`` profile tens of centimetres and
a few degrees after a room). Without drift correction the two frames are one and nothing changes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spatial_memory.geometry import invert_T, wrap_angle


class PosedView:
    """A camera frame seen at another pose: every attribute of ``frame`` but ``T_world_cam``."""

    def __init__(self, frame: Any, T_world_cam: np.ndarray) -> None:
        self._frame = frame
        self.T_world_cam = T_world_cam

    def __getattr__(self, name: str) -> Any:
        return getattr(self._frame, name)


def in_memory_frame(frame: Any, pose_odom: np.ndarray, memory: Any) -> tuple[Any, np.ndarray]:
    """(the frame at its pose in the memory's frame, the base pose ``[x, y, yaw]`` there), from the
    odometry pose of the frame and of the base (``obs.state``). The frame must be the one the memory
    fused last (its correction is the latest one)."""
    to_memory = getattr(memory, "to_memory_frame", None)
    if to_memory is None or getattr(memory, "n_frames", 0) == 0:
        return frame, pose_odom
    T_odom = np.asarray(frame.T_world_cam, dtype=np.float64)
    T = to_memory(T_odom)
    C = T @ invert_T(T_odom)  # the correction: a turn about z and a shift in the floor plane
    if np.abs(C - np.eye(4)).max() < 1e-12:
        return frame, pose_odom
    xy = C[:2, :2] @ pose_odom[:2] + C[:2, 3]
    yaw = wrap_angle(float(pose_odom[2]) + math.atan2(C[1, 0], C[0, 0]))
    return PosedView(frame, T), np.array([xy[0], xy[1], yaw])


def pose_sigma(memory: Any) -> float:
    """How far (metres, one sigma) the memory's latest pose may be off against its own map; 0 without
    drift correction."""
    fn = getattr(memory, "pose_uncertainty", None)
    return float(fn()[0]) if fn is not None else 0.0
