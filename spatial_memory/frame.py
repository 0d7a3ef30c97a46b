"""``CameraFrame``: one RGB-D view with its intrinsics and pose (docs/ARCHITECTURE.md §3).

Everything the memory integrates arrives as a ``CameraFrame``; it is validated once, here, so the
fusion code can trust its inputs. Bad input raises ``ValueError`` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .geometry import as_pose

_ROT_TOL = 1e-4


@dataclass(frozen=True, eq=False)
class CameraFrame:
    """An RGB-D frame.

    rgb: uint8 HxWx3. depth: float32 HxW metres along the optical axis (0, inf or NaN = invalid).
    K: 3x3 intrinsics (``fx`` may be negative for a horizontally mirrored image, as LIBERO's
    protocol rotation produces; back-projection stays exact). T_world_cam: 4x4 world-from-camera,
    OpenCV camera axes (x right, y down, z forward), world z up. instance: optional int32 HxW ids,
    ``labels`` maps ids to category names (0 = background, need not be labelled). step: the
    episode step at which the frame was taken.
    """

    rgb: np.ndarray
    depth: np.ndarray
    K: np.ndarray
    T_world_cam: np.ndarray
    instance: np.ndarray | None = None
    labels: dict[int, str] = field(default_factory=dict)
    step: int = 0

    def __post_init__(self) -> None:
        rgb, depth = self.rgb, self.depth
        if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"CameraFrame.rgb must be an HxWx3 array, got shape {getattr(rgb, 'shape', type(rgb))}")
        if rgb.dtype != np.uint8:
            raise ValueError(f"CameraFrame.rgb must be uint8, got {rgb.dtype}")
        if not isinstance(depth, np.ndarray) or depth.shape != rgb.shape[:2]:
            raise ValueError(
                f"CameraFrame.depth must be HxW = {rgb.shape[:2]}, got {getattr(depth, 'shape', type(depth))}"
            )
        if depth.dtype != np.float32:
            raise ValueError(f"CameraFrame.depth must be float32 metres, got {depth.dtype}")
        K = np.asarray(self.K, dtype=np.float64)
        if K.shape != (3, 3) or not np.all(np.isfinite(K)):
            raise ValueError(f"CameraFrame.K must be a finite 3x3 matrix, got {K.shape}")
        if K[0, 0] == 0 or K[1, 1] == 0 or not np.allclose(K[2], [0, 0, 1]) or K[0, 1] != 0 or K[1, 0] != 0:
            raise ValueError(f"CameraFrame.K must be [[fx,0,cx],[0,fy,cy],[0,0,1]] with fx, fy != 0, got {K.tolist()}")
        T = as_pose(self.T_world_cam, "CameraFrame.T_world_cam", _ROT_TOL)
        if self.instance is not None:
            inst = self.instance
            if not isinstance(inst, np.ndarray) or inst.shape != rgb.shape[:2]:
                raise ValueError(
                    f"CameraFrame.instance must be HxW = {rgb.shape[:2]}, got {getattr(inst, 'shape', type(inst))}"
                )
            if inst.dtype != np.int32:
                raise ValueError(f"CameraFrame.instance must be int32, got {inst.dtype}")
        if not isinstance(self.labels, dict) or not all(
            isinstance(k, (int, np.integer)) and isinstance(v, str) for k, v in self.labels.items()
        ):
            raise ValueError("CameraFrame.labels must map int instance ids to str categories")
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "T_world_cam", T)
        object.__setattr__(self, "step", int(self.step))

    @property
    def height(self) -> int:
        return self.rgb.shape[0]

    @property
    def width(self) -> int:
        return self.rgb.shape[1]

    @property
    def valid_depth(self) -> np.ndarray:
        d = self.depth
        return np.isfinite(d) & (d > 0)
