"""OmniGibson's outputs in our contracts: pure functions of arrays (numpy; torch tensors are accepted).

Target version: **OmniGibson 1.1.1** (``omnigibson.__version__ == "1.1.1"``; Isaac Sim 4.1.0; read at
OmniGibson's og-develop commit 255a4e4f of 2024-10-12, which carries that version). The facts each
function relies on, with the file of that version that states them:

* Quaternions are ``(x, y, z, w)`` (``omnigibson/utils/transform_utils.py``: "convention for quaternions
  is (x, y, z, w)"; ``XFormPrim.get_position_orientation`` returns ``(position, (x, y, z, w))``).
* A ``VisionSensor`` is a ``UsdGeom.Camera`` prim (``sensors/vision_sensor.py``, ``_load``): USD camera
  axes, x right, **y up, looking down -z** (Isaac Sim's conventions page: camera "Up +Y, Forward -Z";
  "to convert from Isaac Sim camera coordinates to ROS camera coordinates, rotate 180 degrees about the
  X-axis"). OmniGibson's own ``tests/test_sensors.py`` puts the viewer camera at the identity orientation
  1.5 m above a table and sees the table: the identity looks straight down world -z. Image row 0 is
  the top of the picture (Isaac Sim synthetic data: "(0,0) top left").
* Observations on the CPU are torch tensors: ``rgb`` (H, W, 4) uint8 RGBA; ``depth_linear`` (H, W)
  float32 metres along the optical axis (Replicator's ``distance_to_image_plane``; the space is
  [0, inf]); ``seg_instance`` (H, W) int32 (uint32 cast by ``_preprocess_cpu_obs``), ids of the
  process-wide ``VisionSensor.INSTANCE_REGISTRY``, and ``info["seg_instance"]`` maps each id in the
  image to the object's ``name`` in the scene's object registry, or ``"background"``,
  ``"unlabelled"``, ``"groundPlane"`` or a particle system's name (``_remap_instance_segmentation``).
  Those ids are assigned in first-seen order, so they differ between runs: we remap them.
* Intrinsics (``VisionSensor.intrinsic_matrix``): ``hfov = 2 atan(horizontal_aperture / (2 focal_length))``,
  ``fx = (W / 2) / tan(hfov / 2) = W focal_length / horizontal_aperture``, principal point ``(W/2, H/2)``
  with pixel edges at integers. For non-square images that property takes ``vfov = hfov H / W``, which
  is not a square-pixel camera; the adapter sets the USD ``verticalAperture`` to
  ``horizontal_aperture H / W`` so the render has square pixels, and ``fy = fx`` here.
* Traversable maps (``maps/map_base.py``, ``maps/traversable_map.py``): ``floor_map[f]`` is an S x S
  uint8 image, 255 traversable, 0 not; ``map_to_world((row, col)) = ((col - S/2) res, (row - S/2) res)``
  (rows along world +y, columns along +x, origin at the map centre; ``world_to_map`` truncates, so
  cell (row, col) spans ``[(col - S/2) res, (col + 1 - S/2) res)`` in x). The dataset's
  ``layout/floor_trav_{f}.png`` and ``floor_trav_no_obj_{f}.png`` are 0.01 m per pixel; the map
  resizes them to ``int(S * 0.01 / res)`` pixels with ``cv2.resize`` and sets every value below 255 to 0.
* ``BaseObject.get_base_aligned_bbox(xy_aligned=True)`` returns the box centre (world), its
  orientation (x, y, z, w, world; a yaw about world z) and its extents; ``EntityPrim.aabb`` returns
  ``(lo, hi)`` world corners. ``Scene.pose`` is the 4x4 world-from-scene transform.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from scipy import ndimage

from envs.truth import Box, NavGrid

DATASET_MAP_RESOLUTION = 0.01  # metres per pixel of the dataset's layout images (TraversableMap.map_default_resolution)
USD_FROM_CV = np.diag([1.0, -1.0, -1.0])  # p_usdcam = USD_FROM_CV @ p_cvcam (a half turn about x; its own inverse)


def to_numpy(x: Any, dtype=None) -> np.ndarray:
    """A numpy array from a numpy array, a list or a torch tensor (any device)."""
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().numpy()
    return np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)


# ----------------------------------------------------------------------------------- rotations
def quat_xyzw_to_matrix(q_xyzw: Any) -> np.ndarray:
    """3x3 rotation of a unit quaternion ``(x, y, z, w)`` (normalised here; a zero or non-finite one is an error)."""
    q = to_numpy(q_xyzw, np.float64).reshape(-1)
    n = float(np.linalg.norm(q)) if q.shape == (4,) else 0.0
    if q.shape != (4,) or not np.all(np.isfinite(q)) or n < 1e-9:
        raise ValueError(f"a quaternion must be 4 finite numbers (x, y, z, w), not all zero; got {q_xyzw!r}")
    x, y, z, w = q / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat_xyzw(R: Any) -> np.ndarray:
    """Unit quaternion ``(x, y, z, w)`` with ``w >= 0`` of a 3x3 rotation matrix."""
    R = to_numpy(R, np.float64)
    if R.shape != (3, 3) or not np.allclose(R.T @ R, np.eye(3), atol=1e-5) or abs(np.linalg.det(R) - 1) > 1e-5:
        raise ValueError(f"not a rotation matrix: {R.tolist()}")
    t = np.trace(R)
    if t > 0:
        s = 2.0 * math.sqrt(t + 1.0)
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 1e-300))
        q = [0.0, 0.0, 0.0, (R[k, j] - R[j, k]) / s]
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def pose_to_T(position: Any, q_xyzw: Any) -> np.ndarray:
    """4x4 transform of an OmniGibson pose (position, quaternion x, y, z, w)."""
    p = to_numpy(position, np.float64).reshape(-1)
    if p.shape != (3,) or not np.all(np.isfinite(p)):
        raise ValueError(f"a position must be 3 finite numbers, got {position!r}")
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = quat_xyzw_to_matrix(q_xyzw), p
    return T


def T_to_pose(T: Any) -> tuple[np.ndarray, np.ndarray]:
    """(position, quaternion x, y, z, w) of a 4x4 rigid transform."""
    T = to_numpy(T, np.float64)
    return T[:3, 3].copy(), matrix_to_quat_xyzw(T[:3, :3])


# ----------------------------------------------------------------------------------- cameras
def cv_camera_from_usd(T_world_usdcam: np.ndarray) -> np.ndarray:
    """T_world_cam in OpenCV axes (x right, y down, z forward) of a USD camera pose (x right, y up, -z forward)."""
    T = np.array(T_world_usdcam, dtype=np.float64)
    T[:3, :3] = T[:3, :3] @ USD_FROM_CV
    return T


def usd_camera_from_cv(T_world_cvcam: np.ndarray) -> np.ndarray:
    """The inverse of :func:`cv_camera_from_usd` (the same half turn about the camera's x axis)."""
    return cv_camera_from_usd(T_world_cvcam)


def intrinsics(focal_length: float, horizontal_aperture: float, width: int, height: int) -> np.ndarray:
    """K of a USD pinhole camera with square pixels, in our pixel convention (pixel centres at integers:
    the image centre is ``((W - 1) / 2, (H - 1) / 2)``, OmniGibson's ``(W / 2, H / 2)`` with edges at integers)."""
    f_mm, ap = float(focal_length), float(horizontal_aperture)
    if not (f_mm > 0 and ap > 0 and math.isfinite(f_mm) and math.isfinite(ap)):
        raise ValueError(
            f"focal_length and horizontal_aperture must be positive, got {focal_length}, {horizontal_aperture}"
        )
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    f = width * f_mm / ap
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def focal_length_for_hfov(hfov_deg: float, horizontal_aperture: float) -> float:
    """The USD ``focalLength`` that gives a horizontal field of view of ``hfov_deg`` with this aperture."""
    if not 0 < hfov_deg < 180:
        raise ValueError(f"hfov must be in (0, 180) degrees, got {hfov_deg}")
    return float(horizontal_aperture) / (2.0 * math.tan(math.radians(hfov_deg) / 2.0))


def vertical_aperture_for(horizontal_aperture: float, width: int, height: int) -> float:
    """The USD ``verticalAperture`` of square pixels for a width x height render."""
    return float(horizontal_aperture) * height / width


# ----------------------------------------------------------------------------------- images
def rgb_from_og(rgba: Any) -> np.ndarray:
    """uint8 HxWx3 from the sensor's ``rgb`` (HxWx4 RGBA uint8; HxWx3 accepted)."""
    a = to_numpy(rgba)
    if a.ndim != 3 or a.shape[2] not in (3, 4) or a.dtype != np.uint8:
        raise ValueError(f"OmniGibson rgb must be uint8 HxWx4 (RGBA), got {a.dtype} {a.shape}")
    return np.ascontiguousarray(a[..., :3])


def depth_from_og(depth: Any, max_depth_m: float | None = None) -> np.ndarray:
    """float32 HxW metres from ``depth_linear``; non-finite, non-positive and (optionally) too-far values -> 0."""
    d = to_numpy(depth)
    if d.ndim == 3 and d.shape[2] == 1:
        d = d[..., 0]
    if d.ndim != 2 or d.dtype.kind != "f":
        raise ValueError(f"OmniGibson depth_linear must be float HxW metres, got {d.dtype} {d.shape}")
    d = d.astype(np.float32, copy=True)
    bad = ~np.isfinite(d) | (d <= 0)
    if max_depth_m is not None:
        bad |= d > max_depth_m
    d[bad] = 0.0
    return d


def instance_from_og(
    seg: Any, info: Mapping[Any, str], ids_by_name: Mapping[str, int], categories: Mapping[int, str]
) -> tuple[np.ndarray, dict[int, str]]:
    """Our int32 instance image and its labels from ``seg_instance`` and ``info["seg_instance"]``.

    ``ids_by_name``: object name (the object registry's ``name``) -> our stable instance id (> 0);
    ``categories``: our id -> category. Everything else -- background, unlabelled, structure (floors,
    walls, ...), particle systems, ids missing from ``info`` -- becomes 0. ``info`` keys may be ints
    or strings (Replicator's raw ``idToLabels`` has strings; OmniGibson's remapped one has ints).
    """
    s = to_numpy(seg)
    if s.ndim != 2 or s.dtype.kind not in "iu":
        raise ValueError(f"OmniGibson seg_instance must be an integer HxW image, got {s.dtype} {s.shape}")
    names = {int(k): str(v) for k, v in info.items()}
    values, inverse = np.unique(s, return_inverse=True)
    ours = np.array([ids_by_name.get(names.get(int(v), ""), 0) for v in values], dtype=np.int32)
    inst = ours[inverse.reshape(s.shape)]
    labels = {int(i): categories[int(i)] for i in np.unique(ours) if i > 0}
    return inst, labels


# ----------------------------------------------------------------------------------- objects
def box_from_bbox(center: Any, q_xyzw: Any, extent: Any) -> Box:
    """:class:`Box` of ``get_base_aligned_bbox``'s centre, orientation (x, y, z, w) and full extents (world)."""
    c, e = to_numpy(center, np.float64).reshape(-1), to_numpy(extent, np.float64).reshape(-1)
    if c.shape != (3,) or e.shape != (3,) or not np.all(np.isfinite(c)) or not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError(f"a box needs a finite centre and non-negative extents, got {center!r}, {extent!r}")
    return Box(center=c, size=e, R=quat_xyzw_to_matrix(q_xyzw))


def box_from_aabb(lo: Any, hi: Any) -> Box:
    """Axis-aligned :class:`Box` of ``aabb``'s (lo, hi) corners."""
    lo, hi = to_numpy(lo, np.float64).reshape(-1), to_numpy(hi, np.float64).reshape(-1)
    if lo.shape != (3,) or hi.shape != (3,) or not np.all(np.isfinite(lo + hi)) or np.any(hi < lo):
        raise ValueError(f"an aabb needs finite corners with lo <= hi, got {lo.tolist()}, {hi.tolist()}")
    return Box(center=(lo + hi) / 2, size=hi - lo)


def box_in_frame(T_frame_world: np.ndarray, box: Box) -> Box:
    """The same box expressed in another frame (``T_frame_world`` maps world points into it)."""
    R, t = T_frame_world[:3, :3], T_frame_world[:3, 3]
    return Box(center=R @ box.center + t, size=np.asarray(box.size).copy(), R=R @ np.asarray(box.R))


# ----------------------------------------------------------------------------------- maps
def traversable(trav: Any) -> np.ndarray:
    """Boolean SxS traversable mask of a map image (OmniGibson: 255 traversable, anything below is not)."""
    t = to_numpy(trav)
    if t.ndim == 3:
        t = t[..., 0]
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.size == 0:
        raise ValueError(f"a traversable map must be a square image (OmniGibson asserts it), got shape {t.shape}")
    return t >= 255


def resize_dataset_map(image: Any, resolution: float) -> np.ndarray:
    """A dataset layout image (0.01 m per pixel) at ``resolution``, as ``TraversableMap._load_map`` does it:
    ``cv2.resize`` to ``int(S * 0.01 / resolution)`` pixels, then every value below 255 set to 0."""
    import cv2

    img = to_numpy(image)
    if img.ndim == 3:
        img = img[..., 0]
    if img.ndim != 2 or img.shape[0] != img.shape[1]:
        raise ValueError(f"a layout image must be square, got shape {img.shape}")
    size = int(img.shape[0] * DATASET_MAP_RESOLUTION / resolution)
    out = cv2.resize(np.ascontiguousarray(img, dtype=np.uint8), (size, size))
    out[out < 255] = 0
    return out


def map_origin(size: int, resolution: float) -> float:
    """World x (and y) of the lower edge of cell 0 of an S x S OmniGibson map: ``-S/2 * res``."""
    return -size / 2.0 * resolution


def navgrid_from_trav_map(trav: Any, resolution: float, agent_radius: float) -> NavGrid:
    """Our :class:`NavGrid` (cells where a disc of ``agent_radius`` fits) of an OmniGibson traversable map.

    The lattice is the map's own (rows along +y, columns along +x, ``x0 = y0 = -S/2 res``), so no
    pixel moves. A cell is free when its centre is at least ``agent_radius + resolution * sqrt(2)``
    from every untraversable cell's centre -- the house grid's conservative rule, which bounds the
    clearance of every point of the cell by ``agent_radius`` (OmniGibson's own erosion uses a square
    kernel ``ceil(r / res)`` wide, i.e. about half the radius).
    """
    ok = traversable(trav)
    if not resolution > 0:
        raise ValueError(f"resolution must be > 0, got {resolution}")
    clearance = ndimage.distance_transform_edt(ok) * resolution
    free = clearance >= agent_radius + resolution * math.sqrt(2)
    x0 = map_origin(ok.shape[0], resolution)
    return NavGrid(free=free, x0=x0, y0=x0, resolution=float(resolution), agent_radius=float(agent_radius))


def wall_cells(trav_no_obj: Any, resolution: float, thickness_m: float) -> np.ndarray:
    """Boolean SxS wall layer: untraversable cells within ``thickness_m`` of the object-free traversable
    area (``floor_trav_no_obj``: the building without furniture, so what blocks it is walls)."""
    ok = traversable(trav_no_obj)
    dist = (
        ndimage.distance_transform_edt(~ok) * resolution
    )  # for blocked cells: distance to the nearest traversable one
    return ~ok & (dist <= thickness_m)


def frame_to_scene(T_world_scene: np.ndarray, T_world_x: np.ndarray) -> np.ndarray:
    """A world pose in the scene's own frame (the frame of its traversable map and of our env's world)."""
    return np.linalg.inv(np.asarray(T_world_scene, dtype=np.float64)) @ np.asarray(T_world_x, dtype=np.float64)


def scene_to_world(T_world_scene: np.ndarray, T_scene_x: np.ndarray) -> np.ndarray:
    return np.asarray(T_world_scene, dtype=np.float64) @ np.asarray(T_scene_x, dtype=np.float64)
