"""Where to put an object down: a point over the target and the height to release it at.

For an object or fixture target the point is its body origin (LIBERO's ``On`` for objects wants the
two origins within 3 cm). For a region (a site) it is the region's centre, unless other objects
already occupy it: then the free spot of the region farthest from them (two moka pots on one
stove, two items in one basket).
"""

from __future__ import annotations

import numpy as np

from .sim import SimView

FREE_MARGIN = 0.01  # keep the placed object's footprint this far inside a region's box


class Placement:
    def __init__(self, view: SimView, obj: str, target: str, relation: str) -> None:
        if not (view.is_site(target) or view.is_object(target) or view.is_fixture(target)):
            raise NotImplementedError(f"unknown target {target!r} for {obj!r} in {view.task_name}")
        self.view, self.obj, self.target, self.relation = view, obj, target, relation
        self.kind = "site" if view.is_site(target) else "object"
        self.offset = np.zeros(2)

    def anchor_xy(self) -> np.ndarray:
        if self.kind == "site":
            return self.view.site_pos(self.target)[:2]
        return self.view.body_pos(self.view.body(self.target))[:2]

    def xy(self) -> np.ndarray:
        """The point the object's origin goes to (world xy)."""
        return self.anchor_xy() + self.offset

    def region_z(self) -> tuple[float, float]:
        """(lower, upper) z bounds of a region site as LIBERO's ``In`` tests them."""
        site = self.view.se.object_sites_dict[self.target]
        pos = self.view.site_pos(self.target)
        size = np.abs(self.view.site_mat(self.target) @ np.asarray(site.size, float))
        return pos[2] - size[2] - 0.01, pos[2] + size[2]

    def release_level(self, obj_root: int) -> tuple[float, float | None]:
        """(height of the object's bottom at release, top of an ``In`` region or None): about 1 cm
        above the surface under the target point."""
        tgt = self.xy()
        surface = self.view.ray_down(tgt[0], tgt[1], skip_roots=(obj_root,))
        if self.relation == "in" and self.kind == "site":
            lo, hi = self.region_z()
            if surface > hi:  # a roof over the region (a microwave's): its floor is under it
                mid = float(self.view.site_pos(self.target)[2])
                surface = self.view.ray_down(tgt[0], tgt[1], z0=mid, skip_roots=(obj_root,))
            return max(surface + 0.01, lo + 0.005), hi
        return surface + 0.01, None


def _footprint_half(view: SimView, obj: str, axis: np.ndarray) -> float:
    pts = view.corners(view.colliding_geoms(view.root(view.body(obj))))
    origin = view.body_pos(view.body(obj))[:2]
    proj = (pts[:, :2] - origin) @ axis
    return float(max(proj.max(), -proj.min()))


def assign_slots(view: SimView, placements: list[Placement]) -> None:
    """Objects sharing one region (two moka pots on the stove, two items in the basket) get spots
    side by side along the region's longer axis, each object's origin inside the region, the one
    that starts nearer a side going to that side."""
    by_target: dict[str, list[Placement]] = {}
    for p in placements:
        if p.kind == "site":
            by_target.setdefault(p.target, []).append(p)
    for target, group in by_target.items():
        if len(group) < 2:
            continue
        size = np.abs(np.asarray(view.se.object_sites_dict[target].size, float))
        R = view.site_mat(target)
        k = int(np.argmax(size[:2]))
        axis = R[:2, k] / max(np.linalg.norm(R[:2, k]), 1e-9)
        halves = [_footprint_half(view, p.obj, axis) for p in group]
        centre = view.site_pos(target)[:2]
        n = len(group)
        # centres spaced by the objects' footprints (plus a gap), kept inside the region
        widths = [2 * h + FREE_MARGIN for h in halves]
        total = sum(widths)
        edges = np.cumsum([0.0] + widths) - total / 2
        offsets = [(edges[i] + edges[i + 1]) / 2 for i in range(n)]
        limit = max(size[k] - FREE_MARGIN, 0.0)
        offsets = [float(np.clip(o, -limit, limit)) for o in offsets]
        starts = [float((view.body_pos(view.body(p.obj))[:2] - centre) @ axis) for p in group]
        for p, off in zip(sorted(group, key=lambda p: starts[group.index(p)]), sorted(offsets)):
            p.offset = off * axis
