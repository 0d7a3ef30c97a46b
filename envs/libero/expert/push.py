"""``Push``: slide an object over its support to a target point ("push the plate to the front of the
stove").

The closed fingers, the finger axis across the push direction, pointing down or pitched towards
the object (the pitch with the gripper's best clearance), go behind the object low over the
support (the tips at its height) and push its back edge along a path round the taller things
standing there (straight, or through one waypoint). The push line (object to waypoint) is re-aimed
every step; the pusher goes round (up, over, down) when the object turned away from it or stopped
moving. (Pushing a dish from inside, against its wall, was tried: LIBERO's plate walls slope at
about 60 degrees and the fingers ride up them; from outside, tips a few mm up ride up it too.)

Used for objects too flat and wide to pick up (a plate) whose target lies on the surface they
stand on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .control import move, via_travel
from .geometry import FINGER_BELOW, FINGER_HALF_WIDTH, FINGER_OUT, HAND_HALF_LENGTH, MAX_GRASP_WIDTH, frame_from_axes
from .grasp import clearance, clearance_score
from .placement import Placement
from .sim import SimView
from .skill import Skill

FLAT = 0.03  # objects lower than this (and too wide to grasp) are pushed, not carried
PUSH_DONE = 0.012  # m from the target point
PUSH_CAP = 0.6
PUSH_INTO = 0.05  # the pusher's target lies this far beyond the edge it pushes (the force grows with it)
WAYPOINT_REACHED = 0.025  # m: on to the next waypoint
OFF_LINE = 0.025  # m off the push line before the pusher goes round
PITCHES = np.deg2rad([0.0, 30.0, 50.0])  # behind pushes: fingers pitched towards the object
YAWS = np.deg2rad([0.0])  # the finger axis turned from across the line
PUSH_SWEEP = 0.15  # m of vertical approach checked above the pusher's pose
PATH_MARGIN = -0.015  # the pushed object may brush what it passes by this much (light things give way)
LOW = 0.01  # obstacles at most this much taller than the pushed object are pushed along, not avoided
PUSH_LIFT = 0.0  # m: finger tips over the support while pushing (higher, they ride up a plate's sloping wall)


def is_pushable(view: SimView, obj: str, target: str) -> bool:
    """A flat, wide object whose target region lies on the surface under it."""
    if not view.is_site(target) or not view.is_object(obj):
        return False
    body = view.body(obj)
    pts = view.corners(view.colliding_geoms(view.root(body)))
    height = float(np.ptp(pts[:, 2]))
    width = float(np.min(np.ptp(pts[:, :2], axis=0)))
    region_z = float(view.site_pos(target)[2])
    return height < FLAT and width > MAX_GRASP_WIDTH and abs(region_z - pts[:, 2].min()) < 0.03


def _dist_to_boxes(p, lo, hi) -> float:
    """Distance from the xy point ``p`` to the nearest of the axis-aligned boxes (lo, hi)."""
    if not len(lo):
        return np.inf
    d = np.maximum(np.maximum(lo - p, p - hi), 0.0)
    return float(np.min(np.linalg.norm(d, axis=1)))


def plan_path(start, goal, radius: float, lo, hi, margin: float = PATH_MARGIN) -> list[np.ndarray]:
    """Waypoints (ending at ``goal``) for a disc of ``radius`` pushed from ``start``: straight when
    that keeps ``margin`` from every box, else through the one waypoint (on a 4 cm grid) whose two
    legs keep the most clearance, the shortest first among those that keep ``margin``."""
    start, goal = np.asarray(start, float), np.asarray(goal, float)
    # already closer than ``margin`` at the start (the plate beside the bowl): moving must not bring
    # it closer still
    margin = min(margin, _dist_to_boxes(start, lo, hi) - radius - 0.002)

    def clear(a, b) -> float:
        n = max(2, int(np.linalg.norm(b - a) / 0.01) + 1)
        return min(_dist_to_boxes(a + t * (b - a), lo, hi) for t in np.linspace(0, 1, n)[1:]) - radius

    direct = clear(start, goal)
    if direct >= margin:
        return [goal]
    best = (direct, np.linalg.norm(goal - start), [goal])
    mid = 0.5 * (start + goal)
    for dx in np.arange(-0.24, 0.241, 0.04):
        for dy in np.arange(-0.24, 0.241, 0.04):
            w = mid + np.array([dx, dy])
            c = min(clear(start, w), clear(w, goal))
            length = np.linalg.norm(w - start) + np.linalg.norm(goal - w)
            ok, best_ok = c >= margin, best[0] >= margin
            if (ok and (not best_ok or length < best[1])) or (not ok and not best_ok and c > best[0]):
                best = (c, length, [w, goal])
    return best[2]


@dataclass
class PushWay:
    pitch: float
    yaw: float  # the finger axis turned by this much from square across the push line
    offset: float  # signed distance of the contact point from the object's centre along the push line
    z: float  # grip-site height while pushing
    score: float


class Push(Skill):
    name = "push"

    def __init__(self, view: SimView, obj: str, target: str, relation: str = "on") -> None:
        super().__init__(view)
        self.obj, self.target = obj, target
        self.placement = Placement(view, obj, target, relation)
        self.body = view.body(obj)
        self.root = view.root(self.body)
        self.geoms = view.colliding_geoms(self.root)
        self.start_phase("start")

    def describe(self) -> str:
        return f"push({self.obj} to {self.target})[{self.phase}]"

    # ------------------------------------------------------------------ geometry
    def _plan_path(self) -> None:
        """Waypoints round the other things standing on the support (a bowl beside the plate)."""
        view = self.view
        pts = view.corners(self.geoms)
        support, top = float(pts[:, 2].min()), float(pts[:, 2].max())
        origin = view.body_pos(self.body)[:2]
        radius = float(np.max(np.ptp(pts[:, :2], axis=0))) / 2
        obstacles = view.obstacles(np.array([*origin, support]), skip_roots=(self.root,), radius=0.5)
        lo, hi = [], []
        for c, R, h in zip(obstacles.c, obstacles.R, obstacles.h):
            corners = c + (np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * h) @ R.T
            if corners[:, 2].max() < top + LOW or corners[:, 2].min() > top + 0.005:
                continue  # the support, things no taller than the object (pushed along), or things above
            lo.append(corners[:, :2].min(0))
            hi.append(corners[:, :2].max(0))
        self.path = plan_path(
            origin, self.placement.xy(), radius, np.array(lo).reshape(-1, 2), np.array(hi).reshape(-1, 2)
        )

    def _waypoint(self) -> np.ndarray:
        origin = self.view.body_pos(self.body)[:2]
        while len(self.path) > 1 and np.linalg.norm(self.path[0] - origin) < WAYPOINT_REACHED:
            self.path.pop(0)
        return self.path[0]

    def _frame(self):
        """(centre, push direction, back extent, front extent, support height, top) of the object."""
        pts = self.view.corners(self.geoms)
        c = 0.5 * (pts[:, :2].min(0) + pts[:, :2].max(0))
        d = self._waypoint() - self.view.body_pos(self.body)[:2]
        u = d / max(np.linalg.norm(d), 1e-9)
        rel = (pts[:, :2] - c) @ u
        return c, u, float(-rel.min()), float(rel.max()), float(pts[:, 2].min()), float(pts[:, 2].max())

    def _rotation(self, u, pitch: float, yaw: float = 0.0) -> np.ndarray:
        """Fingers across ``u`` (turned by ``yaw``), pointing down, tilted by ``pitch`` so the hand
        leans over the object (towards +u) and away from what stands behind it."""
        u3 = np.array([u[0], u[1], 0.0])
        approach = -np.cos(pitch) * np.array([0.0, 0.0, 1.0]) - np.sin(pitch) * u3
        across = np.cross([0.0, 0.0, 1.0], u3)
        return frame_from_axes(np.cos(yaw) * across + np.sin(yaw) * u3, approach)

    def _grip_point(self, c, u, way: PushWay) -> np.ndarray:
        R = self._rotation(u, way.pitch, way.yaw)
        tip = np.array([*(c + way.offset * u), way.z - FINGER_BELOW])  # where the finger tips' centre goes
        return tip - FINGER_BELOW * R[:, 2]

    def _plan(self) -> PushWay:
        view = self.view
        c, u, back, front, support, top = self._frame()
        obstacles = view.obstacles(np.array([*c, support]), skip_roots=(self.root,))
        ways = []
        for k, pitch in enumerate(PITCHES):
            for j, yaw in enumerate(YAWS):
                # the closed fingers' extent along the push line grows as they turn
                depth = FINGER_HALF_WIDTH * abs(np.cos(yaw)) + FINGER_OUT * abs(np.sin(yaw))
                behind = -(back + depth + 0.006)
                cost = 0.001 * k + 0.001 * j
                ways.append(PushWay(float(pitch), float(yaw), behind, support + PUSH_LIFT + FINGER_BELOW, -cost))
        for w in ways:
            p = self._grip_point(c, u, w)
            clear = clearance(obstacles, p, self._rotation(u, w.pitch, w.yaw), 0.0, sweep=PUSH_SWEEP)
            w.score += clearance_score(clear)
        return max(ways, key=lambda w: w.score)

    # ------------------------------------------------------------------ control
    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        togo = float(np.linalg.norm(self.placement.xy() - view.body_pos(self.body)[:2]))
        if ph == "start":
            if view.holds(["on", self.obj, self.target]) and togo < 0.03:
                return self.finish()
            self._plan_path()
            self.way = self._plan()
            c, u, _, _, _, top = self._frame()
            self.Rg = self._rotation(u, self.way.pitch, self.way.yaw)
            self.contact = self._grip_point(c, u, self.way)
            self.pre = self.contact + np.array([0.0, 0.0, max(0.04, top + 0.03 - self.contact[2])])
            hand_top = view.corridor_top(pos[:2], self.pre[:2], HAND_HALF_LENGTH)
            self.travel_z = max(self.pre[2], hand_top + FINGER_BELOW + 0.03)
            self.start_phase("position")
            return self.act()
        if ph == "position":
            descending = np.linalg.norm(pos[:2] - self.pre[:2]) < 0.045 and pos[2] < self.travel_z - 0.02
            target = via_travel(pos, self.pre, self.travel_z, descending=descending)
            if np.linalg.norm(pos[:2] - self.pre[:2]) < 0.015 and pos[2] < self.pre[2] + 0.01:
                target = self.contact
                if pos[2] - self.contact[2] < 0.006 or self.progress.stalled(pos[2] - self.contact[2]):
                    self.start_phase("push")
            if self.t_phase > 80:
                self.start_phase("push")
            return move(view, target, self.Rg, 1.0)
        if ph == "push":
            if togo < PUSH_DONE:
                self.start_phase("retreat")
                return self.act()
            c, u, back, front, _, _ = self._frame()
            w = self.way
            tip = pos - FINGER_BELOW * R[:, 2]
            rel = tip[:2] - c
            off_line = abs(float(rel @ np.array([-u[1], u[0]])))
            if off_line > OFF_LINE or self.progress.stalled(togo, eps=0.002, patience=15):
                self.start_phase("start")  # go round: plan the contact again
                return move(view, pos + np.array([0, 0, 0.05]), self.Rg, 1.0, cap=0.6)
            # push the contact edge a little beyond where it is, slowing down on arrival
            ahead = PushWay(w.pitch, w.yaw, w.offset + PUSH_INTO, w.z, 0.0)
            target = self._grip_point(c, u, ahead)
            return move(view, target, self._rotation(u, w.pitch, w.yaw), 1.0, cap=min(PUSH_CAP, 0.2 + 4.0 * togo))
        if ph == "retreat":
            if self.t_phase > 8:
                return self.finish()
            return move(view, pos + np.array([0.0, 0.0, 0.05]), R, 1.0, cap=0.5, symmetric=False)
        raise RuntimeError(f"unknown phase {ph!r}")
