"""The memory's configuration: every knob of :class:`.memory.SpatialMemory`, saved with it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .drift import DriftConfig
from .maps import MapConfig
from .objects import ASSOCIATIONS
from vla_common.strict import from_dict


@dataclass(frozen=True)
class MemoryConfig:
    """Every knob of the memory (saved with it).

    voxel_size: metres. min_depth/max_depth: depth readings used, metres. pixel_stride: use every
    n-th row and column. association: ``"instance"`` (stable mask ids) or ``"proximity"``
    (detector mode). assoc_distance: metres, the least radius within which an observation joins an
    object of its category in proximity mode. min_support / min_observations: detector mode, what
    confirms an object (:mod:`.objects`: detections per chance to be detected, detections).
    max_points / points_per_frame: object sample bounds.
    carve_every: carve voxels every n frames (0 = never; object samples are carved every frame).
    carve_margin: (metres, fraction of depth) beyond a point before depth counts as seeing through
    it. structure_categories: labels that are scene structure, not objects. map: what the
    top-down maps show. drift: register every frame to the map before fusing it and correct the
    odometry (:class:`.drift.DriftConfig`; None = trust the poses as given).
    """

    voxel_size: float = 0.05
    min_depth: float = 0.05
    max_depth: float = 20.0
    pixel_stride: int = 1
    association: str = "instance"
    assoc_distance: float = 0.3
    min_support: float = 0.0
    min_observations: int = 1
    max_points: int = 256
    points_per_frame: int = 32
    carve_every: int = 4
    carve_margin: tuple[float, float] = (0.1, 0.03)
    structure_categories: tuple[str, ...] = ("wall", "floor", "ceiling", "background")
    colour_weight_max: float = 64.0
    seed: int = 0
    map: MapConfig = field(default_factory=MapConfig)
    drift: DriftConfig | None = None  # drift correction (frame-to-model registration, :mod:`.drift`); None = off

    def __post_init__(self) -> None:
        if not (np.isfinite(self.voxel_size) and self.voxel_size > 0):
            raise ValueError(f"MemoryConfig.voxel_size must be a positive number of metres, got {self.voxel_size!r}")
        if not (0 <= self.min_depth < self.max_depth and np.isfinite(self.max_depth)):
            raise ValueError(
                f"MemoryConfig needs 0 <= min_depth < max_depth < inf, got {self.min_depth}, {self.max_depth}"
            )
        if int(self.pixel_stride) < 1 or int(self.carve_every) < 0:
            raise ValueError("MemoryConfig needs pixel_stride >= 1 and carve_every >= 0")
        if self.association not in ASSOCIATIONS:
            raise ValueError(f"MemoryConfig.association must be one of {ASSOCIATIONS}, got {self.association!r}")
        if isinstance(self.drift, dict):
            object.__setattr__(self, "drift", DriftConfig.from_dict(self.drift))
        if isinstance(self.map, dict):
            map_cfg = {**self.map, "wall_band": tuple(self.map.get("wall_band", (1.2, 1.8)))}
            object.__setattr__(self, "map", from_dict(MapConfig, map_cfg, "memory map"))
        object.__setattr__(self, "carve_margin", tuple(float(m) for m in self.carve_margin))
        object.__setattr__(self, "structure_categories", tuple(self.structure_categories))

    @classmethod
    def tabletop(cls, **overrides) -> "MemoryConfig":
        """Defaults for LIBERO-scale scenes (about 1 m): 1 cm voxels, depth up to 3 m, 2 cm carve margin."""
        base = dict(voxel_size=0.01, min_depth=0.02, max_depth=3.0, assoc_distance=0.03, carve_margin=(0.02, 0.02))
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict:
        d = asdict(self)
        d["map"] = self.map.to_dict()
        d["drift"] = None if self.drift is None else self.drift.to_dict()
        d["carve_margin"] = list(self.carve_margin)
        d["structure_categories"] = list(self.structure_categories)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "MemoryConfig":
        d = dict(d)
        d["carve_margin"] = tuple(d.get("carve_margin", (0.1, 0.03)))
        d["structure_categories"] = tuple(d.get("structure_categories", ()))
        return from_dict(cls, d, "memory")
