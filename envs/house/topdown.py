"""Ground-truth top-down maps of an apartment on the shared :class:`TopDownFrame` (docs/ARCHITECTURE.md §4).

* easy: MuJoCo's orthographic render of the scene without the ceiling (see :mod:`.render`);
* medium: walls and furniture/object footprints black on white;
* hard: walls only.

medium and hard are drawn from geometry with ``spatial_memory.draw`` — the same code that draws the
memory's maps — so a GT map and a memory map of the same scene align pixel for pixel.
:func:`alignment_iou` checks that the orthographic render lands where the geometry says.
"""

from __future__ import annotations

import numpy as np

from spatial_memory.draw import box_footprint, compose_level, polygon_mask
from spatial_memory.topdown import LEVELS, TopDownFrame

from .spec import HouseSpec

MARGIN_M = 0.5


def scene_frame(spec: HouseSpec, width: int = 640, height: int = 512, margin: float = MARGIN_M) -> TopDownFrame:
    """The apartment's footprint plus ``margin`` metres, fitted into the map image."""
    x0, y0, x1, y1 = spec.bounds
    return TopDownFrame(x0 - margin, y0 - margin, x1 + margin, y1 + margin, width, height)


def wall_mask(spec: HouseSpec, frame: TopDownFrame) -> np.ndarray:
    return polygon_mask(frame, [box_footprint(w.center, w.size) for w in spec.walls])


def item_mask(spec: HouseSpec, frame: TopDownFrame, kinds: tuple[str, ...] = ("furniture", "object")) -> np.ndarray:
    items = [it for it in spec.items if it.kind in kinds]
    return polygon_mask(frame, [box_footprint(b.center, b.size, b.R) for b in (it.box() for it in items)])


def geometry_map(level: str, spec: HouseSpec, frame: TopDownFrame) -> np.ndarray:
    """medium or hard map (uint8 HxWx3) from the scene's geometry."""
    if level not in ("medium", "hard"):
        raise ValueError(
            f"geometry_map draws 'medium' or 'hard'; got {level!r} (easy is a render: HouseScene.topdown_map)"
        )
    walls = wall_mask(spec, frame)
    objects = item_mask(spec, frame) if level == "medium" else None
    return compose_level(level, walls, objects)


def alignment_iou(
    spec: HouseSpec, frame: TopDownFrame, geom_ids: np.ndarray, geom_instance: np.ndarray, wall_geoms: np.ndarray
) -> dict[str, float]:
    """IoU of geometry footprints vs. the orthographic segmentation (geom ids per pixel, -1 = none).

    walls: wall footprints vs. pixels showing a wall; items: furniture+object footprints vs. pixels
    showing an item (meshes do not fill their boxes, so this one is lower by nature).
    """
    valid = geom_ids >= 0
    inst = np.zeros(geom_ids.shape, dtype=np.int64)
    inst[valid] = geom_instance[geom_ids[valid]]
    seen_wall = np.zeros(geom_ids.shape, dtype=bool)
    seen_wall[valid] = np.isin(geom_ids[valid], wall_geoms)
    seen_item = inst > 0

    def iou(a: np.ndarray, b: np.ndarray) -> float:
        union = np.count_nonzero(a | b)
        return float(np.count_nonzero(a & b) / union) if union else 1.0

    return {"walls": iou(wall_mask(spec, frame), seen_wall), "items": iou(item_mask(spec, frame), seen_item)}


__all__ = ["LEVELS", "MARGIN_M", "scene_frame", "wall_mask", "item_mask", "geometry_map", "alignment_iou"]
