"""Rigid transforms and pinhole maths, one function per transform.

Frames are named in variable names: ``T_world_cam`` maps points from the camera frame to the world
frame (``p_world = T_world_cam @ p_cam``). Cameras use OpenCV axes (x right, y down, z forward);
the world has z up. Angles follow docs/ARCHITECTURE.md §4: degrees, left (counter-clockwise seen from above)
positive, wrapped to (-180, 180].
"""

from __future__ import annotations

import math

import numpy as np


def make_T(R: np.ndarray, t: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = t
    return T


def as_pose(T, what: str = "pose", tol: float = 1e-4) -> np.ndarray:
    """``T`` as a float64 4x4 rigid transform, or ``ValueError`` naming ``what`` and the defect."""
    try:
        T = np.asarray(T, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a finite 4x4 matrix, got {T!r}") from exc
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise ValueError(f"{what} must be a finite 4x4 matrix")
    if not np.allclose(T[3], [0, 0, 0, 1]):
        raise ValueError(f"{what} bottom row must be [0,0,0,1], got {T[3].tolist()}")
    R = T[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=tol) or abs(np.linalg.det(R) - 1) > tol:
        raise ValueError(f"{what} rotation is not a proper rotation (orthonormal, det +1)")
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


def rot_x(angle_rad: float) -> np.ndarray:
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(angle_rad: float) -> np.ndarray:
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(yaw_rad: float) -> np.ndarray:
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def look_at(eye_world: np.ndarray, target_world: np.ndarray, up_world: np.ndarray = (0.0, 0.0, 1.0)) -> np.ndarray:
    """T_world_cam of an OpenCV camera at ``eye_world`` looking at ``target_world`` (image up ~ ``up_world``)."""
    eye, target = np.asarray(eye_world, dtype=np.float64), np.asarray(target_world, dtype=np.float64)
    z_cam = target - eye
    if np.linalg.norm(z_cam) < 1e-12:
        raise ValueError("look_at needs target != eye")
    z_cam /= np.linalg.norm(z_cam)
    x_cam = np.cross(z_cam, np.asarray(up_world, dtype=np.float64))
    if np.linalg.norm(x_cam) < 1e-9:  # looking along up: any right vector will do
        x_cam = np.cross(z_cam, [0.0, 1.0, 0.0]) if abs(z_cam[1]) < 0.9 else np.cross(z_cam, [1.0, 0.0, 0.0])
    x_cam /= np.linalg.norm(x_cam)
    y_cam = np.cross(z_cam, x_cam)
    return make_T(np.stack([x_cam, y_cam, z_cam], axis=1), eye)


def pose_from_xy_yaw(x: float, y: float, yaw_rad: float, height: float, pitch_down_rad: float = 0.0) -> np.ndarray:
    """T_world_cam of a camera at (x, y, height) whose viewing direction has world yaw ``yaw_rad`` and
    is tilted down by ``pitch_down_rad`` (no roll): the usual head camera of a mobile robot."""
    forward = np.array(
        [np.cos(yaw_rad) * np.cos(pitch_down_rad), np.sin(yaw_rad) * np.cos(pitch_down_rad), -np.sin(pitch_down_rad)]
    )
    eye = np.array([x, y, height], dtype=np.float64)
    return look_at(eye, eye + forward)


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
    """Wrap degrees to (-180, 180] (the project's one range for angles: left turns positive)."""
    a = np.mod(np.asarray(angle, dtype=np.float64) + 180.0, 360.0) - 180.0
    a = np.where(a == -180.0, 180.0, a)
    return float(a) if np.ndim(a) == 0 else a


def wrap_angle(angle: np.ndarray | float) -> np.ndarray | float:
    """Wrap radians to (-pi, pi], the same half-open range as :func:`wrap_deg` (pi stays pi, -pi becomes pi)."""
    if isinstance(angle, (float, int)):  # the scalar fast path (control loops call this every step)
        a = float(angle)
        if -math.pi < a <= math.pi:
            return a
        a = math.fmod(a + math.pi, 2 * math.pi)
        a = a + 2 * math.pi if a <= 0 else a
        return a - math.pi
    x = np.asarray(angle, dtype=np.float64)
    a = np.mod(x + np.pi, 2 * np.pi) - np.pi
    a = np.where(a <= -np.pi, a + 2 * np.pi, a)
    a = np.where((x > -np.pi) & (x <= np.pi), x, a)  # in range: exactly unchanged
    return float(a) if np.ndim(a) == 0 else a


def box_distance(xy: np.ndarray, center: np.ndarray, size: np.ndarray, yaw: float = 0.0) -> np.ndarray | float:
    """Horizontal distance (metres) from points (..., 2) to a box's footprint: centre (first two of
    ``center``), side lengths (first two of ``size``) along its own axes, turned by ``yaw`` (0 inside)."""
    xy = np.asarray(xy, dtype=np.float64)
    c, s = math.cos(yaw), math.sin(yaw)
    d = xy - np.asarray(center, dtype=np.float64)[:2]
    local = np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)
    out = np.maximum(np.abs(local) - np.asarray(size, dtype=np.float64)[:2] / 2, 0.0)
    return np.hypot(out[..., 0], out[..., 1])


def camera_yaw(T_world_cam: np.ndarray) -> float:
    """World yaw (radians, from +x, counter-clockwise) of the camera's viewing direction.

    The viewing direction is the optical axis projected on the floor; for a camera looking (almost)
    straight down, where that projection vanishes, the image's up direction (-y_cam) is used instead.
    """
    forward = T_world_cam[:3, 2]
    if np.hypot(forward[0], forward[1]) < 1e-6:
        forward = -T_world_cam[:3, 1]
    return float(np.arctan2(forward[1], forward[0]))


def egocentric_bearing(T_world_cam: np.ndarray, p_world: np.ndarray) -> tuple[float, float]:
    """(direction_deg, horizontal distance_m) of a world point seen from a camera pose.

    Direction: 0 = straight ahead, left positive, (-180, 180].
    """
    d = np.asarray(p_world, dtype=np.float64)[:2] - T_world_cam[:2, 3]
    bearing = np.degrees(np.arctan2(d[1], d[0]) - camera_yaw(T_world_cam))
    return wrap_deg(bearing), float(np.hypot(d[0], d[1]))


def vst_box_to_camera(box9: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(center_cam, size, R_cam_box) of a Visual-Spatial-Tuning / Qwen-VL 3D box.

    ``box9 = [x, y, z, x_size, y_size, z_size, pitch, yaw, roll]`` in the OpenCV camera frame, angles
    in degrees divided by 180. A box-frame point is rotated about x by pitch, then about y by yaw,
    then about z by roll (the Qwen-VL 3D-grounding convention): ``R_cam_box = Rz(roll) Ry(yaw) Rx(pitch)``.
    """
    b = np.asarray(box9, dtype=np.float64).reshape(-1)
    if b.shape != (9,) or not np.all(np.isfinite(b)):
        raise ValueError(
            f"a VST box needs 9 finite numbers [x, y, z, x_size, y_size, z_size, pitch, yaw, roll], got {box9!r}"
        )
    if np.any(b[3:6] < 0):
        raise ValueError(f"a VST box needs non-negative sizes, got {b[3:6].tolist()}")
    pitch, yaw, roll = np.radians(b[6:9] * 180.0)
    return b[:3].copy(), b[3:6].copy(), rot_z(roll) @ rot_y(yaw) @ rot_x(pitch)


def camera_box_to_vst(center_cam: np.ndarray, size: np.ndarray, R_cam_box: np.ndarray) -> np.ndarray:
    """Inverse of :func:`vst_box_to_camera` (angles returned in (-1, 1], pitch in [-0.5, 0.5])."""
    R = np.asarray(R_cam_box, dtype=np.float64)
    # R = Rz(roll) Ry(yaw) Rx(pitch): R[2,0] = -sin(yaw), R[2,1] = cos(yaw) sin(pitch), R[1,0] = sin(roll) cos(yaw)
    yaw = np.arcsin(np.clip(-R[2, 0], -1.0, 1.0))
    if abs(np.cos(yaw)) > 1e-9:
        pitch = np.arctan2(R[2, 1], R[2, 2])
        roll = np.arctan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: put everything in roll
        pitch = 0.0
        roll = np.arctan2(-R[0, 1], R[1, 1])
    angles = np.array([wrap_deg(np.degrees(a)) for a in (pitch, yaw, roll)]) / 180.0
    return np.concatenate([np.asarray(center_cam, dtype=np.float64), np.asarray(size, dtype=np.float64), angles])


def yaw_of_rotation(R_world_box: np.ndarray) -> float:
    """World yaw (radians) of a box's x axis projected on the floor (its y axis if x is vertical)."""
    R = np.asarray(R_world_box, dtype=np.float64)
    axis = R[:, 0] if np.hypot(R[0, 0], R[1, 0]) > 1e-6 else R[:, 1]
    return float(np.arctan2(axis[1], axis[0]))
