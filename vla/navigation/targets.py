"""The target object: the category named by the instruction, distances to its box, the points of it
a camera should see, the own "reached" test, and the choice of the cell to approach it from.

GOTO goal cells are reachable cells within ``approach_m`` (else ``approach_max_m``) of the target's
box footprint from which at least two of six points of the box (centre, upper centre, upper
corners pulled in) lie inside the vertical field of view and are not hidden along a 2.5D ray
through the height map; the cheapest wins (path cost + 0.5 x distance to the box).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from spatial_memory.geometry import box_distance
from spatial_memory.queries import normalise_category

from .config import NavigatorConfig
from .grid import OccupancyGrid, half_fovs
from .planning import visible_points


def parse_target(instruction: str) -> str:
    """The target category of "go to the <category>" (normalised: lower case, words separated by spaces)."""
    text = normalise_category(instruction).rstrip(".!?")
    m = re.match(r"^(?:please )?(?:go|navigate|walk|move|drive) (?:to|towards|toward) (?:the |a |an )?(.+)$", text)
    if not m:
        raise ValueError(f"cannot parse a target from the instruction {instruction!r}; expected 'go to the <category>'")
    return m.group(1).strip()


def find_target(
    memory: Any,
    category: str | None,
    cfg: NavigatorConfig,
    skip: Callable[[Any], bool] | None = None,
    confusions: Any = None,
):
    """The memory object of ``category`` with the most sample points (at least ``min_target_points``),
    leaving out those ``skip`` names (given up); None while there is none (or no category). With
    ``confusions`` (a :class:`~.confusion.ConfusionModel`), when no object of ``category`` is left: the
    object under another label most likely to be of ``category`` (P(category | label) at least
    ``cfg.confusion_min_p``; ties: the most sample points)."""
    if not category:
        return None

    def ok(o: Any) -> bool:
        return o.n_points >= cfg.min_target_points and not (skip is not None and skip(o))

    best = None
    for o in memory.objects_by_category(category):
        if ok(o) and (best is None or o.n_points > best.n_points):
            best = o
    if best is not None or confusions is None:
        return best
    for label, _p in confusions.labels_for(category, cfg.confusion_min_p):
        found = [o for o in memory.objects_by_category(label) if ok(o)]
        if found:
            return max(found, key=lambda o: o.n_points)
    return None


def target_points(obj: Any) -> np.ndarray:
    """Six world points (6x3) of a memory object's box: centre, upper centre, four upper corners pulled in."""
    c, s, yaw = np.asarray(obj.center), np.asarray(obj.size), float(obj.yaw)
    R = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
    local = [(0, 0, 0), (0, 0, 0.35)] + [(sx * 0.25, sy * 0.25, 0.35) for sx in (-1, 1) for sy in (-1, 1)]
    pts = []
    for lx, ly, lz in local:
        xy = c[:2] + R @ (np.array([lx, ly]) * s[:2])
        pts.append([xy[0], xy[1], c[2] + lz * s[2]])
    return np.array(pts)


def target_reached(obj: Any, pose: np.ndarray, frame: Any, cfg: NavigatorConfig, radius: float | None = None) -> bool:
    """Our own success estimate: the target is in view and the base is within ``radius`` (default
    ``success_radius_m - 0.1``) of its box. In view: with the simulator's masks (the memory tracks objects
    by instance id), at least ``min_visible_fraction`` of the pixels show it; with a detector's masks (ids
    local to each frame, the ``realistic`` and ``harsh`` profiles), the memory matched one of this frame's
    segments to it."""
    if frame.instance is None:
        return False
    if obj.instance_id is None:
        visible = frame.step is not None and int(obj.last_seen) == int(frame.step)
    else:
        visible = float(np.count_nonzero(frame.instance == obj.instance_id)) / frame.instance.size >= (
            cfg.min_visible_fraction
        )
    dist = float(box_distance(pose[:2], obj.center, obj.size, obj.yaw))
    return visible and dist <= (cfg.success_radius_m - 0.1 if radius is None else radius)


def approach_cell(
    grid: OccupancyGrid,
    obj: Any,
    frame: Any,
    dist: np.ndarray,
    approach_m: float,
    cfg: NavigatorConfig,
    blacklisted: Callable[[np.ndarray], np.ndarray],
) -> tuple[tuple[int, int], float] | None:
    """The cheapest reachable cell (and its score) near the target that should see it (see the module
    doc); ``dist`` is a Dijkstra field on ``grid``, ``blacklisted(xy)`` masks spots already tried.
    None: no such cell is reachable."""
    w = grid.window
    reach = approach_m + (cfg.approach_max_m - cfg.approach_m)  # both shrink after a false "done"
    c = w.world_to_cell(obj.center[:2])
    k = int(math.ceil((reach + float(np.hypot(*obj.size[:2])) / 2) / w.res)) + 1
    r0, r1 = max(c[0] - k, 0), min(c[0] + k + 1, w.shape[0])
    c0, c1 = max(c[1] - k, 0), min(c[1] + k + 1, w.shape[1])
    if r0 >= r1 or c0 >= c1:
        return None
    rr, cc = np.mgrid[r0:r1, c0:c1]
    rr, cc = rr.ravel(), cc.ravel()
    xy = w.cell_to_world(np.stack([rr, cc], -1))
    dbox = box_distance(xy, obj.center, obj.size, obj.yaw)
    d = dist[rr, cc]
    sel = np.isfinite(d) & (dbox <= reach) & ~blacklisted(xy)
    if not sel.any():
        return None
    rr, cc, dbox, d = rr[sel], cc[sel], dbox[sel], d[sel]
    cam_z = float(frame.T_world_cam[2, 3])
    half_v = half_fovs(frame)[0] - math.radians(cfg.fov_margin_deg)
    vis = visible_points(grid.height, w, np.stack([rr, cc], -1), cam_z, target_points(obj), half_v)
    score = d * w.res + 0.5 * dbox  # prefer near the object among equally cheap cells
    for limit, need in ((approach_m, 2), (reach, 2), (approach_m, 0)):
        m = (dbox <= limit) & (vis >= need)
        if m.any():
            j = int(np.flatnonzero(m)[np.argmin(score[m])])
            return (int(rr[j]), int(cc[j])), float(score[j])
    return None
