"""Drawers: ``OpenDrawer`` (pinch the handle from the front, pull along the slide) and
``CloseDrawer`` (push the handle shut). Both work on the joint LIBERO's ``open`` / ``close`` read
and take their target positions from LIBERO's own ranges.
"""

from __future__ import annotations

import numpy as np

from .control import move, preshape, rot_error, via_travel
from .geometry import (
    SIGNS,
    frame_from_axes,
    gripper_parts,
)
from .grasp import clearance, clearance_score
from .sim import SimView
from .skill import Skill


class Drawer:
    """A sliding drawer: its joint, body, the direction it opens in, and its handle bar."""

    def __init__(self, view: SimView, region: str) -> None:
        joints = view.joints_of(region)
        if len(joints) != 1:
            raise NotImplementedError(f"{region!r} has joints {joints}: a drawer needs exactly one slide joint")
        self.view = view
        self.joint = view.joint_id(joints[0])
        self.body = int(view.model.jnt_bodyid[self.joint])
        self.geoms = view.body_geoms(self.body)
        parent = view.site_parent(region)
        ranges = view.libero_object(parent).object_properties["articulation"]
        self.open_below = max(ranges["default_open_ranges"])  # LIBERO: open when q < this
        self.close_above = min(ranges["default_close_ranges"])  # closed when q > this
        self.lo, self.hi = (float(x) for x in view.model.jnt_range[self.joint])

    def q(self) -> float:
        return self.view.qpos(self.joint)

    def opening_dir(self) -> np.ndarray:
        """Horizontal unit vector the drawer moves along as it opens (q decreasing)."""
        _, axis = self.view.joint_anchor(self.joint)
        d = -axis[:2] if self.open_below < self.close_above else axis[:2]
        d = d / np.linalg.norm(d)
        return np.array([d[0], d[1], 0.0])

    def handle(self):
        """(centre, long axis, front extent along the opening direction, z range) of the handle bar:
        the drawer's geoms standing out farthest along the opening direction."""
        u = self.opening_dir()
        per = [(g, self.view.corners([g])) for g in self.geoms]
        front = max(float((c @ u).max()) for _, c in per)
        bar = np.concatenate([c for _, c in per if float((c @ u).min()) > front - 0.02])
        centre = 0.5 * (bar.min(0) + bar.max(0))
        along = np.cross([0.0, 0.0, 1.0], u)
        return centre, along, front, (float(bar[:, 2].min()), float(bar[:, 2].max()))

    def face(self):
        """(front, z range, lateral centre) of the drawer's front panel (below the handle)."""
        u = self.opening_dir()
        centre, _, front, _ = self.handle()
        per = [(g, self.view.corners([g])) for g in self.geoms]
        panel = [c for _, c in per if float((c @ u).max()) < front - 0.02]
        f = max(float((c @ u).max()) for c in panel)
        pts = np.concatenate([c for c in panel if float((c @ u).max()) > f - 0.012])
        return f, (float(pts[:, 2].min()), float(pts[:, 2].max())), centre


def _drawer_goal_q(drawer: Drawer, opening: bool) -> float:
    if opening:
        return max(drawer.lo + 0.004, drawer.open_below - 0.012)
    return min(drawer.hi - 0.001, drawer.close_above + 0.006)


# handle grasps: the approach pitched down by this much (the hand, long along the finger axis, then
# clears the table under a low handle), finger opening on the way in (the handle above is close)
HANDLE_PITCHES = np.deg2rad([0.0, 15.0, 30.0, 45.0])
HANDLE_OPENINGS = (0.02, 0.015)
PULL_CAP = 1.0
PULL_LEAD = 0.06  # m the hand leads the handle while pulling


class OpenDrawer(Skill):
    """Pinch the handle bar from the front (the fingers above and below it, the approach pitched
    down as far as the table under it requires) and pull along the drawer's axis until LIBERO's
    ``open`` holds."""

    name = "open_drawer"

    def __init__(self, view: SimView, region: str) -> None:
        super().__init__(view)
        self.region = region
        self.drawer = Drawer(view, region)
        self.goal_q = _drawer_goal_q(self.drawer, opening=True)
        self.regrasps = 0
        self.start_phase("start")

    def describe(self) -> str:
        return f"open_drawer({self.region})[{self.phase}]"

    def _plan(self) -> None:
        centre, along, front, (zlo, zhi) = self.drawer.handle()
        u = self.drawer.opening_dir()
        self.u = u
        up = np.array([0.0, 0.0, 1.0])
        bar_u = float(centre @ u)
        # the grip point: the bar's centre (its own extent along u, not the posts behind it)
        self.grasp = centre + (front - 0.0075 - bar_u) * u
        self.grasp[2] = 0.5 * (zlo + zhi)
        obstacles = self.view.obstacles(self.grasp, skip_roots=())
        best = None
        for k, pitch in enumerate(HANDLE_PITCHES):
            approach = -np.cos(pitch) * u - np.sin(pitch) * up
            finger = np.cos(pitch) * up - np.sin(pitch) * u
            R = frame_from_axes(finger, approach)
            for j, opening in enumerate(HANDLE_OPENINGS):
                clear = clearance(obstacles, self.grasp, R, opening, sweep=0.06)
                score = clearance_score(clear) - 0.002 * k - 0.001 * j
                if best is None or score > best[0]:
                    best = (score, R, opening)
        _, self.Rg, self.opening = best
        self.pre = self.grasp - 0.07 * self.Rg[:, 2]
        self.travel_z = max(self.pre[2], zhi + 0.05)

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        d = self.drawer
        if ph == "start":
            if view.holds(["open", self.region]):
                return self.finish()
            self._plan()
            self.start_phase("approach")
            return self.act()
        if ph == "approach":
            target = via_travel(pos, self.pre, self.travel_z)
            if (np.linalg.norm(pos - self.pre) < 0.012 and rot_error(R, self.Rg) < 0.08) or self.t_phase > 80:
                self.start_phase("descend")
            return move(view, target, self.Rg, preshape(view, self.opening))
        if ph == "descend":
            togo = float(np.linalg.norm(pos - self.grasp))
            if togo < 0.005 or self.progress.stalled(togo) or self.t_phase > 40:
                self.start_phase("close")
            return move(view, self.grasp, self.Rg, preshape(view, self.opening), cap=1.0 if togo > 0.04 else 0.4)
        if ph == "close":
            if self.t_phase >= 8:
                self.q_start, self.p_start = d.q(), pos.copy()
                self.start_phase("pull")
            return move(view, self.grasp, self.Rg, 1.0, cap=0.4)
        if ph == "pull":
            q = d.q()
            if q <= self.goal_q:
                self.start_phase("release")
                return self.act()
            if self.progress.stalled(q - self.goal_q, eps=0.002, patience=10) or self.t_phase > 80:
                self.regrasps += 1
                self.start_phase("release")
                return self.act()
            # the hand follows the handle: where it was at the grasp, moved with the drawer, plus a lead
            target = self.p_start + (self.q_start - q) * self.u + PULL_LEAD * self.u
            return move(view, target, self.Rg, 1.0, cap=PULL_CAP)
        if ph == "release":
            if self.t_phase >= 5:
                self.start_phase("retreat")
            return move(view, pos, self.Rg, -1.0, cap=0.2)
        if ph == "retreat":
            # back out along the approach axis, then up
            if self.t_phase > 8 or pos[2] > self.travel_z - 0.01:
                return self.finish()
            return move(view, pos - 0.05 * self.Rg[:, 2] + np.array([0, 0, 0.02]), self.Rg, -1.0, cap=0.6)
        raise RuntimeError(f"unknown phase {ph!r}")


# pushers: the closed fingers pointing down (pushing with their side), or the approach pitched
# towards the drawer so the finger tips lead (for a low drawer, whose handle is under another)
PUSH_PITCHES = np.deg2rad([90.0, 60.0, 40.0, 20.0, 0.0])


class CloseDrawer(Skill):
    """Push the drawer shut with the closed fingers against its handle, moved along the drawer's
    axis until LIBERO's ``close`` holds. The pusher's pitch is chosen by the gripper's clearance
    at the closed position (the handle of the drawer above is in the way of a hand over a low one)."""

    name = "close_drawer"

    def __init__(self, view: SimView, region: str) -> None:
        super().__init__(view)
        self.region = region
        self.drawer = Drawer(view, region)
        self.goal_q = _drawer_goal_q(self.drawer, opening=False)
        self.start_phase("start")

    def describe(self) -> str:
        return f"close_drawer({self.region})[{self.phase}]"

    def _pusher(self, pitch: float, along, u, contact) -> tuple[np.ndarray, np.ndarray]:
        """Grip pose whose closed gripper's front-most point (against -u) is at ``contact``."""
        up = np.array([0.0, 0.0, 1.0])
        approach = -np.sin(pitch) * up - np.cos(pitch) * u
        R = frame_from_axes(along, approach)
        tips = np.array([c + s * h for c, h in gripper_parts(0.0)[:2] for s in SIGNS])  # finger corners
        world = tips @ R.T
        front = world[np.argsort(world @ u)[:4]]  # the corners nearest the drawer
        lead = front[np.argmin(front[:, 2])]  # the lowest of them touches the handle
        return contact - lead, R

    def _plan(self) -> None:
        d = self.drawer
        centre, along, front, (zlo, zhi) = d.handle()
        u = d.opening_dir()
        self.u = u
        travel = d.q() - self.goal_q  # how far the handle still has to go (along -u)
        contact = centre + (front - float(centre @ u)) * u
        contact[2] = 0.5 * (zlo + zhi)
        final = contact + (travel - 0.004) * u  # 4 mm past the closed position
        obstacles = self.view.obstacles(contact, skip_roots=())
        keep = [i for i in range(len(obstacles.c)) if not self._on_drawer(obstacles.c[i])]
        others = type(obstacles)(obstacles.c[keep], obstacles.R[keep], obstacles.h[keep], obstacles.planes)
        best = None
        for k, pitch in enumerate(PUSH_PITCHES):
            p_end, R = self._pusher(pitch, along, u, final)
            clear = clearance(others, p_end, R, 0.0, sweep=0.0)
            score = clearance_score(clear) - 0.001 * k
            if best is None or score > best[0]:
                best = (score, pitch, R)
        _, pitch, self.Rg = best
        self.start_pt, _ = self._pusher(pitch, along, u, contact + 0.03 * u)
        self.pre = self.start_pt + np.array([0.0, 0.0, 0.06]) + 0.03 * u

    def _on_drawer(self, c) -> bool:
        centres = [self.view.geom_box(g)[0] for g in self.drawer.geoms]
        return any(np.linalg.norm(c - x) < 1e-9 for x in centres)

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        d = self.drawer
        if ph == "start":
            if view.holds(["close", self.region]):
                return self.finish()
            self._plan()
            self.start_phase("approach")
            return self.act()
        if ph == "approach":
            target = via_travel(pos, self.pre, self.pre[2])
            if (np.linalg.norm(pos - self.pre) < 0.015 and rot_error(R, self.Rg) < 0.1) or self.t_phase > 80:
                self.start_phase("descend")
            return move(view, target, self.Rg, 1.0)
        if ph == "descend":
            togo = float(np.linalg.norm(pos - self.start_pt))
            if togo < 0.006 or self.progress.stalled(togo) or self.t_phase > 40:
                self.start_phase("push")
            return move(view, self.start_pt, self.Rg, 1.0, cap=1.0 if togo > 0.04 else 0.5)
        if ph == "push":
            q = d.q()
            if q >= self.goal_q or view.holds(["close", self.region]) and self.t_phase > 3:
                self.start_phase("retreat")
                return self.act()
            if self.progress.stalled(self.goal_q - q, eps=0.002, patience=12) or self.t_phase > 80:
                self.start_phase("retreat")
                return self.act()
            target = pos - 0.06 * self.u
            target[2] = self.start_pt[2]
            return move(view, target, self.Rg, 1.0, cap=0.5)
        if ph == "retreat":
            back = pos + 0.04 * self.u
            if self.t_phase > 6:
                back[2] = self.pre[2]
            if self.t_phase > 16:
                return self.finish()
            return move(view, back, self.Rg, 1.0, cap=0.5)
        raise RuntimeError(f"unknown phase {ph!r}")
