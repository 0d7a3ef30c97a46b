"""Top-down maps on one shared pixel frame (docs/ARCHITECTURE.md §4).

``TopDownFrame`` fixes how world xy maps to the 640x512 map image and to GST's ``[0, 999]`` point
grid. The environments draw their ground-truth maps and the memory draws its own maps on the same
frame with the same functions below, so the two align pixel for pixel.

Conventions: image x (columns) = world +x, image y (rows) = world -y (north up, not mirrored).
Continuous pixel coordinates put the top-left corner of the image at (0, 0); pixel (col, row)
covers [col, col+1) x [row, row+1). The point grid is ``floor(u / width * 1000)`` clipped to
[0, 999] (and the same for rows), decoded to the bin centre. Map headings: 0 = image up (world +y),
left (counter-clockwise) positive, (-180, 180].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .geometry import wrap_deg

LEVELS = ("easy", "medium", "hard")


@dataclass(frozen=True)
class TopDownFrame:
    """World box [xmin, xmax] x [ymin, ymax] fitted (uniform scale, centred) into width x height pixels.

    The box is grown along one axis to match the image's aspect ratio, so metres per pixel are the
    same in x and y; ``bounds`` gives the box actually shown.
    """

    xmin: float
    ymin: float
    xmax: float
    ymax: float
    width: int = 640
    height: int = 512

    def __post_init__(self) -> None:
        if not (self.xmax > self.xmin and self.ymax > self.ymin):
            raise ValueError(f"TopDownFrame needs xmax > xmin and ymax > ymin, got {self}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"TopDownFrame needs a positive image size, got {self.width}x{self.height}")

    @property
    def metres_per_pixel(self) -> float:
        return max((self.xmax - self.xmin) / self.width, (self.ymax - self.ymin) / self.height)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of the world area the image shows."""
        s = self.metres_per_pixel
        cx, cy = (self.xmin + self.xmax) / 2, (self.ymin + self.ymax) / 2
        hw, hh = s * self.width / 2, s * self.height / 2
        return cx - hw, cy - hh, cx + hw, cy + hh

    # world <-> pixel -------------------------------------------------------------------------
    def world_to_pixel(self, xy: np.ndarray) -> np.ndarray:
        """Nx2 (or 2,) world xy -> continuous pixel (u, v)."""
        xy = np.asarray(xy, dtype=np.float64)
        x0, _, _, y1 = self.bounds
        s = self.metres_per_pixel
        return np.stack([(xy[..., 0] - x0) / s, (y1 - xy[..., 1]) / s], axis=-1)

    def pixel_to_world(self, uv: np.ndarray) -> np.ndarray:
        uv = np.asarray(uv, dtype=np.float64)
        x0, _, _, y1 = self.bounds
        s = self.metres_per_pixel
        return np.stack([x0 + uv[..., 0] * s, y1 - uv[..., 1] * s], axis=-1)

    # pixel <-> point grid --------------------------------------------------------------------
    def pixel_to_grid(self, uv: np.ndarray) -> np.ndarray:
        uv = np.asarray(uv, dtype=np.float64)
        g = np.stack([uv[..., 0] / self.width * 1000.0, uv[..., 1] / self.height * 1000.0], axis=-1)
        return np.clip(np.floor(g), 0, 999).astype(np.int64)

    def grid_to_pixel(self, g: np.ndarray) -> np.ndarray:
        g = np.asarray(g, dtype=np.float64)
        return np.stack([(g[..., 0] + 0.5) / 1000.0 * self.width, (g[..., 1] + 0.5) / 1000.0 * self.height], axis=-1)

    def world_to_grid(self, xy: np.ndarray) -> np.ndarray:
        return self.pixel_to_grid(self.world_to_pixel(xy))

    def grid_to_world(self, g: np.ndarray) -> np.ndarray:
        return self.pixel_to_world(self.grid_to_pixel(g))

    # headings ----------------------------------------------------------------------------------
    @staticmethod
    def yaw_to_map_heading(yaw_rad: float) -> float:
        """World yaw (radians from +x, CCW) -> map heading in degrees (0 = image up, left positive)."""
        return wrap_deg(np.degrees(yaw_rad) - 90.0)

    @staticmethod
    def map_heading_to_yaw(heading_deg: float) -> float:
        return float(np.radians(wrap_deg(heading_deg + 90.0)))

    def pixel_centres_world(self) -> np.ndarray:
        """HxWx2 world xy of every pixel centre."""
        v, u = np.mgrid[0 : self.height, 0 : self.width].astype(np.float64)
        return self.pixel_to_world(np.stack([u + 0.5, v + 0.5], axis=-1))
