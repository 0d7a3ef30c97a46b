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
            return max(surface + 0.01, lo + 0.005), hi
        return surface + 0.01, None
