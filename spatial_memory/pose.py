"""What any camera pose answers: position, yaw and heading on a north-up map (docs/ARCHITECTURE.md §4)."""

from __future__ import annotations

import numpy as np

from .geometry import camera_yaw
from .topdown import TopDownFrame


class CameraPose:
    """Mixin for anything holding a 4x4 ``T_world_cam`` (trajectory poses, localisations)."""

    T_world_cam: np.ndarray

    @property
    def position(self) -> np.ndarray:
        return self.T_world_cam[:3, 3].copy()

    @property
    def yaw(self) -> float:
        """World yaw of the viewing direction, radians from +x, counter-clockwise."""
        return camera_yaw(self.T_world_cam)

    @property
    def heading_deg(self) -> float:
        """Heading on the top-down map: 0 = image up (world +y), left positive, (-180, 180]."""
        return TopDownFrame.yaw_to_map_heading(self.yaw)
