"""``TurnKnob``: turn a stove's knob on or off.

The ridge on top of the dial (the knob's geoms rising above it) is pinched at its centre, fingers
across it, and the hand is turned about the hinge's own axis (the stove's dial is not centred on
its hinge) until LIBERO's ``turnon`` / ``turnoff`` holds; the target angle comes from LIBERO's own
ranges.
"""

from __future__ import annotations

import numpy as np

from .control import move, rot_error, rotate_about, via_travel
from .geometry import (
    FINGER_BELOW,
    grip_rotation,
)
from .sim import SimView
from .skill import Skill


TURN_MARGIN = 0.45  # rad past LIBERO's turn-on threshold
TURN_LEAD = 0.6  # rad the commanded knob angle leads the measured one


class TurnKnob(Skill):
    """Pinch the knob's ridge and turn it about its hinge until LIBERO's ``turnon`` / ``turnoff``
    holds."""

    name = "turn_knob"

    def __init__(self, view: SimView, fixture: str, on: bool) -> None:
        super().__init__(view)
        joints = view.joints_of(fixture)
        if len(joints) != 1:
            raise NotImplementedError(f"{fixture!r} has joints {joints}: TurnKnob needs exactly one hinge")
        self.fixture, self.on = fixture, on
        self.joint = view.joint_id(joints[0])
        self.knob_body = int(view.model.jnt_bodyid[self.joint])
        ranges = view.libero_object(fixture).object_properties["articulation"]
        lo, hi = view.model.jnt_range[self.joint]
        if on:
            self.goal_q = min(min(ranges["default_turnon_ranges"]) + TURN_MARGIN, hi - 0.05)
        else:
            self.goal_q = float(lo) - 0.3  # the joint's own limit stops it just below LIBERO's threshold
        self.regrasps = 0
        self.start_phase("start")

    def describe(self) -> str:
        return f"turn_knob({self.fixture} {'on' if self.on else 'off'})[{self.phase}]"

    def _reached(self) -> bool:
        return self.view.holds(["turnon" if self.on else "turnoff", self.fixture])

    def _plan(self) -> None:
        """Grasp the ridge (the knob's geoms rising above its dial) at its centre, fingers across it."""
        view = self.view
        geoms = view.body_geoms(self.knob_body)
        tops = np.array([view.corners([g])[:, 2].max() for g in geoms])
        ridge = geoms[tops > tops.min() + 0.01]
        pts = view.corners(ridge)
        xy = pts[:, :2] - pts[:, :2].mean(0)
        _, _, vt = np.linalg.svd(xy, full_matrices=False)
        along = vt[0]
        self.grasp_xy = 0.5 * (pts[:, :2].min(0) + pts[:, :2].max(0))
        top = float(pts[:, 2].max())
        dial_top = float(tops.min())
        self.grasp_z = max(top - 0.012, dial_top + FINGER_BELOW + 0.004)
        yaw = float(np.arctan2(along[1], along[0])) + np.pi / 2  # finger axis across the ridge
        _, R = view.grip()
        cur = np.arctan2(R[1, 0], R[0, 0])
        if np.cos(yaw - cur) < 0:  # the nearer of the two equivalent finger directions
            yaw += np.pi
        self.Rg = grip_rotation(yaw)
        self.pre = np.array([*self.grasp_xy, top + 0.06])
        self.travel_z = top + 0.06

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        if ph == "start":
            if self._reached():
                return self.finish()
            self._plan()
            self.start_phase("approach")
            return self.act()
        if ph == "approach":
            target = via_travel(pos, self.pre, self.travel_z)
            if (np.linalg.norm(pos - self.pre) < 0.015 and rot_error(R, self.Rg) < 0.1) or self.t_phase > 80:
                self.start_phase("descend")
            return move(view, target, self.Rg, -1.0)
        if ph == "descend":
            target = np.array([*self.grasp_xy, self.grasp_z])
            togo = float(np.linalg.norm(pos - target))
            if togo < 0.005 or self.progress.stalled(togo) or self.t_phase > 40:
                self.start_phase("close")
            return move(view, target, self.Rg, -1.0, cap=1.0 if togo > 0.04 else 0.5)
        if ph == "close":
            if self.t_phase >= 8:
                self.G0, self.R0 = view.grip()
                self.q0 = view.qpos(self.joint)
                self.anchor, self.axis = view.joint_anchor(self.joint)
                self.start_phase("turn")
            return move(view, np.array([*self.grasp_xy, self.grasp_z]), self.Rg, 1.0, cap=0.5)
        if ph == "turn":
            q = view.qpos(self.joint)
            sign = 1.0 if self.goal_q > self.q0 else -1.0
            if self._reached() and (self.on and q >= self.goal_q - 0.1 or not self.on):
                self.start_phase("release")
                return self.act()
            if self.progress.stalled(sign * (self.goal_q - q), eps=0.01, patience=12) or self.t_phase > 120:
                self.regrasps += 1
                self.start_phase("release")
                return self.act()
            q_cmd = q + sign * min(TURN_LEAD, abs(self.goal_q - q) + 0.05)
            p, Rt = rotate_about(self.anchor, self.axis, q_cmd - self.q0, self.G0, self.R0)
            return move(view, p, Rt, 1.0, cap=0.6, symmetric=False)
        if ph == "release":
            if self.t_phase >= 5:
                self.start_phase("retreat")
            return move(view, pos, R, -1.0, cap=0.2, symmetric=False)
        if ph == "retreat":
            if pos[2] > self.pre[2] - 0.01 or self.t_phase > 20:
                return self.finish()
            return move(view, np.array([pos[0], pos[1], self.pre[2] + 0.02]), R, -1.0, cap=0.6, symmetric=False)
        raise RuntimeError(f"unknown phase {ph!r}")
