"""What the memory's top-down maps show, decided from voxels and objects (docs/ARCHITECTURE.md §4).

- Ceiling: every voxel whose centre is at or above ``ceiling_z`` is left out of every level.
- Wall (hard and medium): a map pixel covered by at least ``min_wall_voxels`` occupied voxels that
  belong to no object and whose centres lie in the height band ``wall_band`` (default 1.2-1.8 m: above
  tables, sofas and beds, below door lintels). Unlabelled tall furniture counts as wall, as it does
  for a robot that cannot tell the two apart.
- Object footprint (medium): ``"box"`` = each object's gravity-aligned box footprint, filled with the
  same polygon code the environments use for their ground truth; ``"voxels"`` = the map pixels
  under the object's own voxels.
- Easy: colour of the top-most observed voxel below the ceiling; white where nothing was seen.

Heights are in the memory's frame, floor at z = 0 (the odometry frame of a ground robot).
"""

from __future__ import annotations

from dataclasses import dataclass, asdict

import numpy as np
from scipy import ndimage

from .draw import polygon_mask
from .objects import ObjectRegistry
from .topdown import TopDownFrame
from .voxels import VoxelMap

FOOTPRINTS = ("box", "voxels")


@dataclass(frozen=True)
class MapConfig:
    ceiling_z: float = 2.2
    wall_band: tuple[float, float] = (1.2, 1.8)
    min_wall_voxels: int = 1
    wall_dilate_px: int = 0
    object_footprints: str = "box"
    min_hits: int = 1  # a voxel shows on the maps from this many hits (noisy depth: single stray hits do not)
    wall_ridge: bool = False  # walls thinned to the ridge of their voxel density (noisy depth widens them)

    def __post_init__(self) -> None:
        lo, hi = self.wall_band
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise ValueError(f"MapConfig.wall_band must be (low, high) with low < high, got {self.wall_band}")
        if self.object_footprints not in FOOTPRINTS:
            raise ValueError(f"MapConfig.object_footprints must be one of {FOOTPRINTS}, got {self.object_footprints!r}")
        if self.min_wall_voxels < 1 or self.wall_dilate_px < 0 or self.min_hits < 1:
            raise ValueError("MapConfig needs min_wall_voxels >= 1, wall_dilate_px >= 0 and min_hits >= 1")
        object.__setattr__(self, "wall_band", (float(lo), float(hi)))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["wall_band"] = list(self.wall_band)
        return d


def dilate(mask: np.ndarray, radius_px: int) -> np.ndarray:
    """Binary dilation by a (2r+1)-pixel square."""
    if radius_px <= 0:
        return mask
    out = mask.copy()
    H, W = mask.shape
    for dr in range(-radius_px, radius_px + 1):
        for dc in range(-radius_px, radius_px + 1):
            out[max(dr, 0) : H + min(dr, 0), max(dc, 0) : W + min(dc, 0)] |= mask[
                max(-dr, 0) : H + min(-dr, 0), max(-dc, 0) : W + min(-dc, 0)
            ]
    return out


@dataclass(frozen=True, eq=False)
class MapLayers:
    """Boolean ``walls`` and ``objects`` and the ``colour`` image of one map frame."""

    walls: np.ndarray
    objects: np.ndarray
    colour: np.ndarray
    top_z: np.ndarray


def ridge(count: np.ndarray, sigma_px: float) -> np.ndarray:
    """Pixels on the ridge of a density image: after a Gaussian blur, the local maxima across the ridge
    (along the direction of the strongest downward curvature, rounded to one of 8 neighbours)."""
    f = ndimage.gaussian_filter(count.astype(np.float64), sigma_px)
    fy, fx = np.gradient(f)
    fyy, fyx = np.gradient(fy)
    fxy, fxx = np.gradient(fx)
    # the eigenvector of the Hessian with the most negative eigenvalue: the ridge's normal
    theta = 0.5 * np.arctan2(2 * fxy, fxx - fyy)
    lam_a = 0.5 * (fxx + fyy) + np.hypot(0.5 * (fxx - fyy), fxy)  # along theta
    lam_b = 0.5 * (fxx + fyy) - np.hypot(0.5 * (fxx - fyy), fxy)  # along theta + 90 degrees
    normal = np.where(lam_b < lam_a, theta + np.pi / 2, theta)
    dc = np.rint(np.cos(normal)).astype(np.int64)
    dr = np.rint(np.sin(normal)).astype(np.int64)
    H, W = f.shape
    r, c = np.mgrid[0:H, 0:W]
    fa = f[np.clip(r + dr, 0, H - 1), np.clip(c + dc, 0, W - 1)]
    fb = f[np.clip(r - dr, 0, H - 1), np.clip(c - dc, 0, W - 1)]
    return (f >= fa) & (f >= fb) & (np.minimum(lam_a, lam_b) < 0)


def map_layers(voxels: VoxelMap, registry: ObjectRegistry, frame: TopDownFrame, cfg: MapConfig) -> MapLayers:
    raster = voxels.rasterize(frame, cfg.ceiling_z, cfg.wall_band, cfg.min_hits)
    walls = raster["wall_count"] >= cfg.min_wall_voxels
    if cfg.wall_ridge and walls.any():  # about one voxel of blur: a wall's band of noisy voxels -> its middle
        sigma = max(1.0, 0.75 * voxels.voxel_size / frame.metres_per_pixel)
        walls = ndimage.binary_dilation(walls, iterations=2) & ridge(raster["wall_count"] * walls, sigma)
    walls = dilate(walls, cfg.wall_dilate_px)
    if cfg.object_footprints == "voxels":
        objects = raster["object_count"] > 0
    else:
        objects = np.zeros((frame.height, frame.width), dtype=bool)
        ok = registry.confirmed()
        polys = [
            registry.view(o).footprint()
            for o in range(len(registry))
            if ok[o] and registry.a["center"][o, 2] - registry.a["size"][o, 2] / 2 < cfg.ceiling_z
        ]
        polygon_mask(frame, polys, out=objects)
    return MapLayers(walls=walls, objects=objects, colour=raster["top_rgb"], top_z=raster["top_z"])
