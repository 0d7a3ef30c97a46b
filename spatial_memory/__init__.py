"""spatial_memory: an online global map of an episode, fused from RGB-D frames (docs/ARCHITECTURE.md §2-§4).

Pure geometry: numpy and numba, nothing from a simulator or a model. Modules, one concept each:
``geometry`` (rigid transforms, pinhole maths, angles), ``frame`` (``CameraFrame``), ``voxels``
(sparse voxel hash), ``objects`` (object registry), ``memory`` (``SpatialMemory``), ``topdown``
(``TopDownFrame``: world <-> map pixels <-> point grid), ``maps`` (what the memory's maps show),
``draw`` (map drawing shared with the environments), ``pose`` (what a camera pose answers),
``lattice`` (world xy <-> 2D grid cells), ``queries`` (occupancy and category lookups for planners),
``localize`` (pose of a view that comes without one), ``register`` (the memory's map against a given
top-down image), ``serialization`` (file format), ``synthetic`` (box scenes and a ray caster),
``perception`` (the sensor models of a perception profile), ``profiles`` (the profiles whole: sensors,
memory and localisation settings). Beside the geometry, at the bottom of the layout so that every
package can use it: ``strict`` (config dataclasses from plain data, unknown keys refused).
"""

from .draw import box_footprint, compose_level, draw_arrow, draw_disk, draw_polyline, polygon_mask
from .frame import CameraFrame
from .geometry import (
    camera_box_to_vst,
    camera_yaw,
    egocentric_bearing,
    intrinsics_from_fovy,
    invert_T,
    look_at,
    make_T,
    pose_from_xy_yaw,
    transform_points,
    vst_box_to_camera,
    wrap_deg,
)
from .localize import LocalizeConfig, Localization
from .maps import MapConfig, MapLayers
from .memory import MemoryConfig, Pose, SpatialMemory
from .objects import MemoryObject
from .queries import Occupancy2D, OccupancyBands, normalise_category
from .register import RegisterConfig, TopDownRegistration
from .topdown import LEVELS, TopDownFrame

__all__ = [
    "CameraFrame",
    "SpatialMemory",
    "MemoryConfig",
    "MapConfig",
    "MapLayers",
    "MemoryObject",
    "Occupancy2D",
    "OccupancyBands",
    "normalise_category",
    "Pose",
    "TopDownFrame",
    "LEVELS",
    "Localization",
    "LocalizeConfig",
    "TopDownRegistration",
    "RegisterConfig",
    "box_footprint",
    "compose_level",
    "draw_arrow",
    "draw_disk",
    "draw_polyline",
    "polygon_mask",
    "camera_box_to_vst",
    "camera_yaw",
    "egocentric_bearing",
    "intrinsics_from_fovy",
    "invert_T",
    "look_at",
    "make_T",
    "pose_from_xy_yaw",
    "transform_points",
    "vst_box_to_camera",
    "wrap_deg",
]
