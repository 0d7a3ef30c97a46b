"""Rigid transforms and pinhole maths, one function per transform.

Frames are named in variable names: ``T_world_cam`` maps points from the camera frame to the world
frame (``p_world = T_world_cam @ p_cam``). Cameras use OpenCV axes (x right, y down, z forward);
the world has z up. Angles follow DESIGN §4: degrees, left (counter-clockwise seen from above)
positive, wrapped to (-180, 180].
"""

from __future__ import annotations

import numpy as np


def make_T(R: np.ndarray, t: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = t
    return T


def invert_T(T: np.ndarray) -> np.ndarray:
    R, t = T[:3, :3], T[:3, 3]
    Ti = np.eye(4)
    Ti[:3, :3] = R.T
    Ti[:3, 3] = -R.T @ t
    return Ti


def transform_points(T_b_a: np.ndarray, p_a: np.ndarray) -> np.ndarray:
    """Map Nx3 points from frame a to frame b."""
    return p_a @ T_b_a[:3, :3].T + T_b_a[:3, 3]


def rot_z(yaw_rad: float) -> np.ndarray:
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def intrinsics_from_fovy(fovy_deg: float, width: int, height: int) -> np.ndarray:
    """Pinhole K for square pixels, principal point at the image centre (pixel centres at integers)."""
    f = 0.5 * height / np.tan(np.deg2rad(fovy_deg) / 2)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def pixel_rays(K: np.ndarray, height: int, width: int) -> np.ndarray:
    """HxWx2 array of (x/z, y/z) for every pixel centre (u, v) = (col, row)."""
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    return np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1]], axis=-1)


def backproject(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """HxWx3 camera-frame points from a z-depth image (invalid depth gives non-finite points)."""
    rays = pixel_rays(K, *depth.shape)
    z = depth.astype(np.float64)
    return np.concatenate([rays * z[..., None], z[..., None]], axis=-1)


def project(K: np.ndarray, p_cam: np.ndarray) -> np.ndarray:
    """Nx2 pixel coordinates (u, v) of Nx3 camera-frame points (z must be > 0)."""
    z = p_cam[:, 2]
    return np.stack([K[0, 0] * p_cam[:, 0] / z + K[0, 2], K[1, 1] * p_cam[:, 1] / z + K[1, 2]], axis=-1)


def wrap_deg(angle: np.ndarray | float) -> np.ndarray | float:
    """Wrap degrees to (-180, 180]."""
    a = np.mod(np.asarray(angle, dtype=np.float64) + 180.0, 360.0) - 180.0
    a = np.where(a == -180.0, 180.0, a)
    return float(a) if np.ndim(a) == 0 else a


def camera_yaw(T_world_cam: np.ndarray) -> float:
    """World yaw (radians, from +x, counter-clockwise) of the camera's viewing direction."""
    forward = T_world_cam[:3, 2]
    return float(np.arctan2(forward[1], forward[0]))


def egocentric_bearing(T_world_cam: np.ndarray, p_world: np.ndarray) -> tuple[float, float]:
    """(direction_deg, horizontal distance_m) of a world point seen from a camera pose.

    Direction: 0 = straight ahead, left positive, (-180, 180].
    """
    d = np.asarray(p_world, dtype=np.float64)[:2] - T_world_cam[:2, 3]
    bearing = np.degrees(np.arctan2(d[1], d[0]) - camera_yaw(T_world_cam))
    return wrap_deg(bearing), float(np.hypot(d[0], d[1]))
