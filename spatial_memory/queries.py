"""What a planner reads from the memory: top-down occupancy on a cell lattice, objects by category.

:meth:`SpatialMemory.occupancy2d` and :meth:`SpatialMemory.occupancy_extent` call these on the
memory's voxels; they never change the memory, so they work on a :meth:`SpatialMemory.snapshot`
read in another thread.

Occupancy of the voxel columns (:class:`OccupancyBands` says which heights count): a cell of the
lattice is **floor** when an occupied voxel (``hits > 0``) has its centre below ``floor_max_z``,
an **obstacle** when an occupied voxel with at least ``min_hits`` has its centre in
``obstacle_z = [lo, hi)``; its **height** is the highest such obstacle voxel centre (-inf where
none), optionally leaving out the voxels of one object (a target must not hide itself). A voxel
belongs to the cell holding its centre: cell ``(row, col)`` of a lattice (:mod:`.lattice`) spans
``x0 + [col, col + 1) * resolution`` by ``y0 + [row, row + 1) * resolution``. One numba pass over
the voxels, no Python loop.

Categories match after :func:`normalise_category` (case, ``_``, ``-`` and runs of spaces do not
count): ``"Teddy-Bear"`` finds objects of category ``teddy_bear``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numba
import numpy as np

from .lattice import CellLattice
from .voxels import VoxelMap


def normalise_category(name: str) -> str:
    """Lower case, words separated by single spaces: ``"Teddy_bear"`` -> ``"teddy bear"``."""
    return re.sub(r"[\s_\-]+", " ", str(name).strip().lower())


@dataclass(frozen=True)
class OccupancyBands:
    """Which voxel centres count as floor (``z < floor_max_z``) and as obstacles
    (``obstacle_z[0] <= z < obstacle_z[1]``, with at least ``min_hits``), metres above the floor."""

    floor_max_z: float = 0.05
    obstacle_z: tuple[float, float] = (0.1, 2.3)
    min_hits: int = 1

    def __post_init__(self) -> None:
        lo, hi = (float(v) for v in self.obstacle_z)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi and self.floor_max_z <= lo):
            raise ValueError(
                "OccupancyBands needs floor_max_z <= obstacle_z[0] < obstacle_z[1], "
                f"got floor_max_z={self.floor_max_z}, obstacle_z={self.obstacle_z}"
            )
        object.__setattr__(self, "obstacle_z", (lo, hi))
        object.__setattr__(self, "min_hits", max(int(self.min_hits), 1))


@dataclass(frozen=True, eq=False)
class Occupancy2D:
    """Layers on a window of a lattice (all HxW): ``obstacle`` and ``floor`` (bool), ``height``
    (float64, the top obstacle voxel centre, -inf where there is none)."""

    obstacle: np.ndarray
    floor: np.ndarray
    height: np.ndarray


@numba.njit(cache=True)
def _extent_kernel(ijk, hits, v, x0, y0, res, floor_z, lo, hi, min_hits, n_rows, n_cols):  # pragma: no cover
    r0, r1, c0, c1 = n_rows, -1, n_cols, -1
    for i in range(ijk.shape[0]):
        h = hits[i]
        if h <= 0:
            continue
        z = (ijk[i, 2] + 0.5) * v
        if not (z < floor_z or (z >= lo and z < hi and h >= min_hits)):
            continue
        c = int(math.floor(((ijk[i, 0] + 0.5) * v - x0) / res))
        r = int(math.floor(((ijk[i, 1] + 0.5) * v - y0) / res))
        if r < 0 or r >= n_rows or c < 0 or c >= n_cols:
            continue
        r0, r1, c0, c1 = min(r0, r), max(r1, r), min(c0, c), max(c1, c)
    return r0, r1, c0, c1


@numba.njit(cache=True)
def _rasterize_kernel(
    ijk, hits, label, v, x0, y0, res, floor_z, lo, hi, min_hits, r0, c0, skip_label, obstacle, floor, height
):  # pragma: no cover - compiled
    H, W = obstacle.shape
    for i in range(ijk.shape[0]):
        h = hits[i]
        if h <= 0:
            continue
        z = (ijk[i, 2] + 0.5) * v
        c = int(math.floor(((ijk[i, 0] + 0.5) * v - x0) / res)) - c0
        r = int(math.floor(((ijk[i, 1] + 0.5) * v - y0) / res)) - r0
        if r < 0 or r >= H or c < 0 or c >= W:
            continue
        if z < floor_z:
            floor[r, c] = True
        elif z >= lo and z < hi and h >= min_hits:
            obstacle[r, c] = True
            if label[i] != skip_label or skip_label < 0:
                if z > height[r, c]:
                    height[r, c] = z


def _voxel_args(voxels: VoxelMap, lattice: CellLattice, bands: OccupancyBands) -> tuple:
    return (
        voxels.field("ijk"),
        voxels.field("hits"),
        float(voxels.voxel_size),
        float(lattice.x0),
        float(lattice.y0),
        float(lattice.resolution),
        float(bands.floor_max_z),
        bands.obstacle_z[0],
        bands.obstacle_z[1],
        bands.min_hits,
    )


def _check_shape(shape: tuple[int, int], what: str) -> tuple[int, int]:
    try:
        h, w = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be (rows, cols), got {shape!r}") from None
    if h < 0 or w < 0:
        raise ValueError(f"{what} must be non-negative, got {shape!r}")
    return h, w


def occupancy_extent(
    voxels: VoxelMap, lattice: CellLattice, shape: tuple[int, int], bands: OccupancyBands
) -> tuple[int, int, int, int] | None:
    """``(row_min, row_max, col_min, col_max)`` (inclusive) of the lattice cells in ``[0, shape)``
    that hold a floor or obstacle voxel; None when there is none (voxels outside are ignored)."""
    n_rows, n_cols = _check_shape(shape, "occupancy_extent: shape")
    if len(voxels) == 0:
        return None
    r0, r1, c0, c1 = _extent_kernel(*_voxel_args(voxels, lattice, bands), n_rows, n_cols)
    return None if r0 > r1 else (int(r0), int(r1), int(c0), int(c1))


def occupancy2d(
    voxels: VoxelMap,
    lattice: CellLattice,
    shape: tuple[int, int],
    bands: OccupancyBands,
    offset: tuple[int, int] = (0, 0),
    skip_label: int = -1,
) -> Occupancy2D:
    """:class:`Occupancy2D` of the cells ``(offset[0] + i, offset[1] + j)`` of ``lattice`` for
    ``i < shape[0]``, ``j < shape[1]``; voxels labelled ``skip_label`` (an object index, -1: none)
    count for obstacle and floor but not for the height."""
    H, W = _check_shape(shape, "occupancy2d: shape")
    out = Occupancy2D(np.zeros((H, W), dtype=np.bool_), np.zeros((H, W), dtype=np.bool_), np.full((H, W), -np.inf))
    if len(voxels) and H and W:
        ijk, hits, *rest = _voxel_args(voxels, lattice, bands)
        _rasterize_kernel(
            ijk,
            hits,
            voxels.field("label"),
            *rest,
            int(offset[0]),
            int(offset[1]),
            int(skip_label),
            out.obstacle,
            out.floor,
            out.height,
        )
    return out
