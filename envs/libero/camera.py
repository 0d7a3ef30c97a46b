"""LIBERO camera geometry: metric depth, intrinsics, OpenCV extrinsics, protocol orientation.

robosuite returns OpenGL buffers: row 0 is the *bottom* of the image, depth is the normalised
z-buffer. We convert once per frame:

* ``upright``: rows flipped (``raw[::-1]``) — the true pinhole image;
* ``rot180`` (the LIBERO evaluation protocol, ``raw[::-1, ::-1]``): the upright image mirrored
  left-right. It is still an exact pinhole image with ``fx < 0`` in ``K``, so back-projection with
  ``K`` and ``T_world_cam`` stays exact (tests check it against object boxes);
* ``opengl``: the buffer as robosuite returns it (``fy < 0``), the convention the official LIBERO
  datasets store (``macros_image_convention = "opengl"``).

``K`` uses pixel-index coordinates (pixel centres at integers, principal point at the centre).
"""

from __future__ import annotations

import numpy as np

from ..orientation import reorient_K


def depth_to_metres(depth_buffer: np.ndarray, model) -> np.ndarray:
    """OpenGL [0, 1] depth buffer -> z-depth in metres (float32), as MuJoCo's near/far planes define."""
    extent = model.stat.extent
    near = model.vis.map.znear * extent
    far = model.vis.map.zfar * extent
    d = depth_buffer.astype(np.float64)
    return (near / (1.0 - d * (1.0 - near / far))).astype(np.float32)


def intrinsics(model, cam_id: int, height: int, width: int, orientation: str) -> np.ndarray:
    f = 0.5 * height / np.tan(np.deg2rad(model.cam_fovy[cam_id]) / 2)
    K = np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])
    return reorient_K(K, (height, width), "upright", orientation)


def T_world_cam(data, cam_id: int) -> np.ndarray:
    """World-from-camera with OpenCV axes (MuJoCo cameras look down their -z with y up)."""
    T = np.eye(4)
    T[:3, :3] = data.cam_xmat[cam_id].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
    T[:3, 3] = data.cam_xpos[cam_id]
    return T
