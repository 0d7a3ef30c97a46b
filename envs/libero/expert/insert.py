"""``InsertPlace``: put an object into a container with a roof (the mug into the microwave).

A top-down carry cannot go there: the roof is in the way of the hand. The object is carried to a
staging point in front of the container's opening, lowered to just above the container's floor,
slid in horizontally, let go, and the hand withdraws the way it came before it rises, then turns
back to how it was before the grasp (a level hand leaves the wrist near its joint limits). The grasp
is chosen to fit at the release pose too (rim grasps may roll about the finger axis so the hand
leans out of the opening).
"""

from __future__ import annotations

import numpy as np

from .control import move, rot_error, rotation_action
from .grasp import clearance
from .lay import LAY_STAGE_GAP
from .pick_place import PickPlace
from .placement import Placement
from .sim import SimView

CLEAR_ENOUGH = 0.01  # release-point search: clearance counts up to this
INSIDE_MARGIN = 0.012  # m the object stays behind the opening's plane
COVER_HEADROOM = 0.12  # a roof closer than this above the object's top keeps the hand out
STAGE_GAP = 0.04  # m between the object and the opening at the staging point
OPEN_RUN = 0.3  # m a horizontal ray from the target runs free through the opening
WITHDRAW = 0.08  # m the hand backs out past the opening before it rises
UNTURN_CAP = 0.3  # rotation action cap while turning back
UNTURN_DONE = 0.15  # rad from that orientation: turned back
UNTURN_STEPS = 30  # at most this many steps of turning back (then the next skill starts anyway)
OUTSIDE = -1.0  # release-point search: the score of a footprint point outside the container's walls
UP = np.array([0.0, 0.0, 1.0])


def find_cover(view: SimView, placement: Placement, obj: str):
    """(way out: unit xy, distance from the target to the roof's edge along it) when something
    covers the target point lower than the object plus COVER_HEADROOM; None when it is open."""
    body = view.body(obj)
    root = view.root(body)
    pts = view.corners(view.colliding_geoms(root))
    height = float(np.ptp(pts[:, 2]))
    T = placement.xy()
    zr, _ = placement.release_level(root)
    reach = height + COVER_HEADROOM

    def roofed(xy) -> bool:
        dist, g = view.ray([xy[0], xy[1], zr + 0.005], UP, skip_roots=(root,))
        return g >= 0 and dist < reach

    if not roofed(T):
        return None
    z = zr + 0.5 * height
    dirs = [np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 16, endpoint=False)]
    free = np.array([min(view.ray([T[0], T[1], z], [u[0], u[1], 0.0], skip_roots=(root,))[0], 1.0) for u in dirs])
    # the opening: the middle of the directions that run free (not the first of them)
    open_dirs = [u for u, f in zip(dirs, free) if f >= OPEN_RUN] or [dirs[int(np.argmax(free))]]
    u_out = np.mean(open_dirs, axis=0)
    u_out = u_out / max(np.linalg.norm(u_out), 1e-9)
    for s in np.arange(0.0, 0.4, 0.01):
        if not roofed(T + s * u_out):
            return u_out, float(s)
    return u_out, 0.4


class InsertPlace(PickPlace):
    name = "insert_place"

    def __init__(self, view: SimView, obj: str, target: str, relation: str, cover, placement=None) -> None:
        self.u_out, self.edge = cover
        self._cover_found = cover
        super().__init__(view, obj, target, relation, placement)
        # the opening's plane, as a coordinate along the way out
        self.s_open = float(self.placement.anchor_xy() @ self.u_out) + self.edge
        self._obstacles_there = None
        self.R_home = None  # the hand's orientation when the skill first planned

    def on_phase(self, phase: str) -> None:
        super().on_phase(phase)
        if phase == "unturn":
            self._hold = self.view.grip()[0].copy()  # the hand turns back here, in place

    def describe(self) -> str:
        return f"insert({self.obj} {self.relation} {self.target})[{self.phase}]"

    def _radius(self) -> float:
        """How far the object reaches from its position towards the opening (its leading side: a
        pan held by the handle leads with its body, the handle trails)."""
        pts, _, _ = self._extent()
        c = self._obj_pos()[:2]
        return float(np.max((c - pts[:, :2]) @ self.u_out))

    def stage_xy(self) -> np.ndarray:
        gap = STAGE_GAP if self.lay_dir is None else LAY_STAGE_GAP
        return self.placement.xy() + (self.edge + self._radius() + gap) * self.u_out

    def carry_xy(self) -> np.ndarray:
        return self.placement.xy() if self.phase in ("insert", "release") else self.stage_xy()

    def _plan(self) -> None:
        """The grasp, then the release point inside the region where that grasp fits best (the
        hand clear of the container's walls), then the grasp again for that point."""
        if self.R_home is None:
            self.R_home = self.view.grip()[1].copy()
        super()._plan()
        if self.lay_dir is not None:
            return  # laid down: the hand stays outside the opening, behind the object
        self._choose_release_point()
        super()._plan()

    def _choose_release_point(self) -> None:
        view, pl = self.view, self.placement
        site = view.se.object_sites_dict[pl.target]
        size = np.abs(view.site_mat(pl.target) @ np.asarray(site.size, float))[:2]
        R = self.grasp.rotation()
        pts, zb, _ = self._extent()
        obj = self._obj_pos()
        best = (-np.inf, pl.offset.copy())
        base = pl.anchor_xy()
        for dx in np.arange(-size[0] + 0.01, size[0] - 0.0099, 0.03):
            for dy in np.arange(-size[1] + 0.01, size[1] - 0.0099, 0.03):
                pl.offset = np.array([dx, dy])
                offset, obstacles = self._release_check()
                clear = clearance(obstacles, self.grasp.pos + offset, R, 0.5 * self.grasp.opening, sweep=0.0)
                # the object's own footprint inside the walls, and not deeper than needed
                lo, hi = pts[:, :2].min(0), pts[:, :2].max(0)
                foot = np.array([[x, y] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])]) - obj[:2] + base + pl.offset
                inside = min(self._inside(foot), 0.02)
                # all of the object behind the opening (a door closes there)
                behind = min(self.s_open - INSIDE_MARGIN - float(np.max(foot @ self.u_out)), 0.0)
                score = min(clear, CLEAR_ENOUGH) + inside + 5.0 * behind - 0.05 * float(np.linalg.norm(pl.offset))
                if score > best[0]:
                    best = (score, pl.offset.copy())
        pl.offset = best[1]

    def _inside(self, foot) -> float:
        """Least clearance of footprint points from the container's walls (ray casts along -u_out
        and across it at mid-height of the release). A point behind the opening whose ray runs
        free is outside a wall (OUTSIDE); points in front of the opening are not checked (an
        object deeper than the container sticks out there: a pan's handle)."""
        zr, _ = self.placement.release_level(self.obj_root)
        z = zr + 0.03
        across = np.array([-self.u_out[1], self.u_out[0]])
        worst = np.inf
        for p in foot:
            if float(p @ self.u_out) > self.s_open:
                continue
            for u in (across, -across, -self.u_out):
                dist, g = self.view.ray([p[0], p[1], z], [u[0], u[1], 0.0], skip_roots=(self.obj_root,))
                worst = min(worst, dist if g >= 0 else OUTSIDE)
        return float(worst)

    def _cover(self):
        return self._cover_found

    def _carry_turn(self) -> float:
        return 0.0  # the grasp was chosen to fit the release pose as it is

    def _release_check(self):
        if self.lay_dir is not None:
            return None
        T = self.placement.xy()
        obj = self._obj_pos()
        pts, zb, _ = self._extent()
        zr, _ = self.placement.release_level(self.obj_root)
        offset = np.array([T[0] - obj[0], T[1] - obj[1], zr - zb])
        if self._obstacles_there is None:  # the container does not move: one look is enough
            centre = np.array([*self.placement.anchor_xy(), zr])
            self._obstacles_there = self.view.obstacles(centre, skip_roots=(self.obj_root,), radius=0.4)
        return offset, self._obstacles_there

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        if ph == "lower":
            # at the staging point: down to just above the container's floor
            if not self._holding():
                return self._regrasp()
            Rg = self.R_carry  # the grasp's orientation, or the object laid down
            err = self.stage_xy() - self._obj_pos()[:2]
            _, zb, _ = self._extent()
            togo = zb - (self.release_bottom + 0.006)
            target = np.array([pos[0] + err[0], pos[1] + err[1], pos[2] - togo])
            if abs(togo) < 0.006 or self.progress.stalled(abs(togo), patience=10) or self.t_phase > 50:
                self.start_phase("insert")
            return move(view, target, Rg, 1.0, cap=0.6 if abs(togo) > 0.04 else 0.4)
        if ph == "insert":
            # slide in horizontally at that height
            if not self._holding():
                return self._regrasp()
            Rg = self.R_carry
            err = self.placement.xy() - self._obj_pos()[:2]
            _, zb, _ = self._extent()
            target = np.array([pos[0] + err[0], pos[1] + err[1], pos[2] - (zb - self.release_bottom - 0.004)])
            if np.linalg.norm(err) < 0.012 or self.progress.stalled(float(np.linalg.norm(err))) or self.t_phase > 60:
                self.start_phase("release")
            return move(view, target, Rg, 1.0, cap=0.5)
        if ph == "retreat":
            # back out through the opening, then up
            out = self.placement.xy() + (self.edge + WITHDRAW) * self.u_out
            if float((pos[:2] - self.placement.xy()) @ self.u_out) < self.edge + WITHDRAW - 0.02 and self.t_phase < 30:
                return move(view, np.array([out[0], out[1], pos[2] + 0.003]), R, -1.0, cap=0.6, symmetric=False)
            if self.t_phase > 45 or pos[2] > self.hover_z + 0.04:
                self.start_phase("unturn")
                return self.act()
            return move(view, np.array([pos[0], pos[1], self.hover_z + 0.06]), R, -1.0, cap=0.6, symmetric=False)
        if ph == "unturn":
            # turn the hand back to how it was before the grasp, in place: a level hand's wrist is
            # near its joint limits, and the next skill's turn from there can lock the arm
            if rot_error(R, self.R_home, symmetric=False) < UNTURN_DONE or self.t_phase > UNTURN_STEPS:
                return self.finish()
            a = move(view, self._hold, self.R_home, -1.0, cap=0.5, symmetric=False)
            a[3:6] = rotation_action(R, self.R_home, cap=UNTURN_CAP)
            return a
        return super().step()
