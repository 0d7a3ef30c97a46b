"""The kinematic mobile base of every ground-navigation env and the camera it carries.

A pose is ``[x, y, yaw]`` (world metres, yaw in radians from +x, counter-clockwise). An action
``[forward_m, left_m, yaw_rad]`` first translates the base by ``(forward, left)`` in its own frame
at the start of the step, then turns it by ``yaw``. The translation is traced through the
navigable grid: if it would enter a non-free cell the base stops just before that cell and the
step reports ``blocked`` (it is never pushed elsewhere). Turning is always possible (the base is a
disc).

The camera sits ``height`` metres above the base, looking forward, pitched down by ``pitch``
(OpenCV axes: x right, y down, z forward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from envs.base import NavGrid
from spatial_memory.geometry import wrap_angle

from .navgrid import free_fraction


@dataclass(frozen=True)
class StepResult:
    pose: np.ndarray  # new [x, y, yaw]
    blocked: bool  # the translation was cut short by an obstacle
    moved_m: float  # distance actually travelled


def step_pose(grid: NavGrid, pose: np.ndarray, action: np.ndarray) -> StepResult:
    """Apply one ``[forward_m, left_m, yaw_rad]`` action (already validated and clipped)."""
    x, y, yaw = (float(v) for v in pose)
    fwd, left, dyaw = (float(v) for v in action)
    c, s = math.cos(yaw), math.sin(yaw)
    d = np.array([c * fwd - s * left, s * fwd + c * left])
    a = np.array([x, y])
    length = float(np.hypot(*d))
    blocked = False
    if length > 0:
        t = free_fraction(grid, a, a + d)
        blocked = t < 1.0
        a = a + d * t
        length *= t
    return StepResult(np.array([a[0], a[1], wrap_angle(yaw + dyaw)]), blocked, length)


def T_world_base(pose: np.ndarray) -> np.ndarray:
    """4x4 pose of the base on the floor (x forward, y left, z up)."""
    x, y, yaw = (float(v) for v in pose)
    c, s = math.cos(yaw), math.sin(yaw)
    T = np.eye(4)
    T[:2, :2] = [[c, -s], [s, c]]
    T[0, 3], T[1, 3] = x, y
    return T


def T_base_cam(height: float, pitch_deg: float) -> np.ndarray:
    """Camera (OpenCV axes) in the base frame: at ``height``, looking along +x, pitched down by ``pitch_deg``."""
    p = math.radians(pitch_deg)
    forward = np.array([math.cos(p), 0.0, -math.sin(p)])
    right = np.array([0.0, -1.0, 0.0])
    down = np.cross(forward, right)  # z x x = y for a right-handed frame
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2] = right, down, forward
    T[2, 3] = height
    return T


def T_world_cam(pose: np.ndarray, height: float, pitch_deg: float) -> np.ndarray:
    return T_world_base(pose) @ T_base_cam(height, pitch_deg)


def pose_from_T(T: np.ndarray) -> np.ndarray:
    """[x, y, yaw] of a base pose matrix."""
    return np.array([T[0, 3], T[1, 3], math.atan2(T[1, 0], T[0, 0])])
