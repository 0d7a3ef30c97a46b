"""Ground-truth top-down maps of a BEHAVIOR-1K scene on the shared :class:`TopDownFrame` (pure functions).

* easy: a photo-like view from above without ceilings. OmniGibson 1.1.1's ``VisionSensor`` exposes no
  orthographic projection (only ``focal_length`` / ``horizontal_aperture`` of a perspective
  ``UsdGeom.Camera``), so the adapter renders straight-down perspective views on a grid of tiles,
  back-projects every pixel with its depth and keeps, per map pixel, the colour of the highest
  surface (:func:`splat`): an orthographic picture of the top-most surfaces, exact where any tile
  saw them, white where none did.
* medium: walls and object footprints black on white; hard: walls only. Walls are the untraversable
  band along the scene's object-free traversable map (``layout/floor_trav_no_obj_0.png``; see
  :func:`.convert.wall_cells`), footprints the objects' boxes, drawn with ``spatial_memory.draw`` --
  the code that draws the memory's maps.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from envs.truth import Box
from spatial_memory.draw import box_footprint, compose_level, polygon_mask
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import backproject, make_T, transform_points
from spatial_memory.lattice import CellLattice
from spatial_memory.topdown import TopDownFrame

MARGIN_M = 0.5
GROUND = frozenset({"floors", "lawn", "driveway", "carpet"})  # OmniGibson 1.1.1 GROUND_CATEGORIES: not obstacles


def scene_frame(
    free: np.ndarray, lattice: CellLattice, width: int = 640, height: int = 512, margin: float = MARGIN_M
) -> TopDownFrame:
    """The frame that fits the traversable area (cells where ``free``) plus ``margin`` metres."""
    rc = np.argwhere(free)
    if len(rc) == 0:
        raise ValueError("the traversable map has no traversable cell: no top-down frame")
    xy = lattice.cell_to_world(rc)
    half = lattice.resolution / 2
    lo, hi = xy.min(axis=0) - half - margin, xy.max(axis=0) + half + margin
    return TopDownFrame(float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]), width, height)


def cells_on_map(layer: np.ndarray, lattice: CellLattice, frame: TopDownFrame) -> np.ndarray:
    """Boolean HxW map image of a lattice layer: each map pixel takes the cell under its centre (off-grid: False)."""
    rc = lattice.world_to_cell(frame.pixel_centres_world())
    h, w = layer.shape
    ok = (rc[..., 0] >= 0) & (rc[..., 0] < h) & (rc[..., 1] >= 0) & (rc[..., 1] < w)
    out = np.zeros(rc.shape[:2], dtype=bool)
    out[ok] = layer[rc[..., 0][ok], rc[..., 1][ok]]
    return out


def footprint_mask(boxes: list[Box], frame: TopDownFrame) -> np.ndarray:
    return polygon_mask(frame, [box_footprint(b.center, b.size, b.R) for b in boxes])


def geometry_map(level: str, walls: np.ndarray, boxes: list[Box], frame: TopDownFrame) -> np.ndarray:
    """medium (walls + footprints of ``boxes``) or hard (walls) map, uint8 HxWx3; ``walls`` on the map's pixels."""
    if level not in ("medium", "hard"):
        raise ValueError(f"geometry_map draws 'medium' or 'hard'; got {level!r} (easy is rendered: splat)")
    return compose_level(level, walls, footprint_mask(boxes, frame) if level == "medium" else None)


# ----------------------------------------------------------------------------------- easy
def T_world_down(x: float, y: float, z: float) -> np.ndarray:
    """An OpenCV camera at (x, y, z) looking straight down, image up = world +y (north up, not mirrored)."""
    R = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])  # columns: x_cam, y_cam, z_cam in world
    return make_T(R, np.array([x, y, z], dtype=np.float64))


def down_tiles(frame: TopDownFrame, altitude_m: float, hfov_deg: float, floor_z: float = 0.0) -> list[np.ndarray]:
    """Camera positions above the map's area so that straight-down views overlap by half (every floor point is
    seen by at least one view from no more than half the field of view off its axis)."""
    half = altitude_m * math.tan(math.radians(hfov_deg) / 2)  # half the footprint of one view on the floor
    step = max(half, 1e-3)
    x0, y0, x1, y1 = frame.bounds
    xs = np.arange(x0 + step / 2, x1 + step / 2, step)
    ys = np.arange(y0 + step / 2, y1 + step / 2, step)
    return [np.array([x, y, floor_z + altitude_m]) for y in ys for x in xs]


def splat(
    img: np.ndarray, zbuf: np.ndarray, frame: TopDownFrame, view: CameraFrame, T_world_cam: np.ndarray, stride: int = 1
) -> None:
    """Paint a view's back-projected pixels onto the map, keeping per map pixel the highest point (in place).

    ``img`` HxWx3 uint8 and ``zbuf`` HxW float (start at -inf) are the map and the height of what it shows.
    """
    d = view.depth[::stride, ::stride]
    K = view.K.copy()
    K[:2] /= stride
    p_cam = backproject(d, K).reshape(-1, 3)
    colours = view.rgb[::stride, ::stride].reshape(-1, 3)
    ok = np.isfinite(p_cam).all(axis=1) & (d.reshape(-1) > 0)
    p = transform_points(T_world_cam, p_cam[ok])
    colours = colours[ok]
    uv = np.floor(frame.world_to_pixel(p[:, :2])).astype(np.int64)
    inside = (uv[:, 0] >= 0) & (uv[:, 0] < frame.width) & (uv[:, 1] >= 0) & (uv[:, 1] < frame.height)
    uv, z, colours = uv[inside], p[inside, 2], colours[inside]
    lin = uv[:, 1] * frame.width + uv[:, 0]
    flat_z = zbuf.reshape(-1)
    np.maximum.at(flat_z, lin, z)
    top = z >= flat_z[lin]
    img.reshape(-1, 3)[lin[top]] = colours[top]


def fill_gaps(img: np.ndarray, zbuf: np.ndarray, max_px: float) -> None:
    """Give map pixels that no back-projected point hit the colour of the nearest one hit, up to ``max_px``
    away (the spacing of the views' pixels on the map), in place; farther ones stay white."""
    empty = ~np.isfinite(zbuf)
    if not empty.any() or empty.all():
        return
    dist, (rows, cols) = ndimage.distance_transform_edt(empty, return_indices=True)
    fill = empty & (dist <= max_px)
    img[fill] = img[rows[fill], cols[fill]]
    zbuf[fill] = zbuf[rows[fill], cols[fill]]


def point_spacing_px(frame: TopDownFrame, altitude_m: float, hfov_deg: float, width_px: int) -> float:
    """How far apart (map pixels) a straight-down view's pixels land on the floor."""
    return 2 * altitude_m * math.tan(math.radians(hfov_deg) / 2) / width_px / frame.metres_per_pixel


def empty_easy(frame: TopDownFrame) -> tuple[np.ndarray, np.ndarray]:
    """A white map and an empty height buffer for :func:`splat`."""
    return np.full((frame.height, frame.width, 3), 255, dtype=np.uint8), np.full(
        (frame.height, frame.width), -np.inf, dtype=np.float64
    )
