"""``CellLattice``: world xy <-> (row, col) on a lattice of square cells.

Shared by the environments' navigable grids and the navigator's occupancy grids, so that every 2D
grid in the project agrees on where a cell is: rows run along world y, columns along world x, and
cell (row, col) is centred at ``(x0 + (col + 0.5) * resolution, y0 + (row + 0.5) * resolution)``.
"""

from __future__ import annotations

import numpy as np


class CellLattice:
    """Mixin: subclasses provide ``x0``, ``y0`` and ``resolution`` (metres)."""

    x0: float
    y0: float
    resolution: float

    def world_to_cell(self, xy: np.ndarray) -> np.ndarray:
        """Integer (row, col) of the cells holding world points (...x2)."""
        xy = np.asarray(xy, dtype=np.float64)
        rows = np.floor((xy[..., 1] - self.y0) / self.resolution)
        cols = np.floor((xy[..., 0] - self.x0) / self.resolution)
        return np.stack([rows, cols], -1).astype(np.int64)

    def cell_to_world(self, rc: np.ndarray) -> np.ndarray:
        """World xy of cell centres (...x2 row, col; fractional cells allowed)."""
        rc = np.asarray(rc, dtype=np.float64)
        return np.stack(
            [self.x0 + (rc[..., 1] + 0.5) * self.resolution, self.y0 + (rc[..., 0] + 0.5) * self.resolution], -1
        )
