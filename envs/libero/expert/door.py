"""``CloseDoor``: swing a hinged door (the microwave's) shut along the arc of its hinge."""

from __future__ import annotations

import numpy as np

from .control import move, via_travel
from .geometry import (
    FINGER_BELOW,
    FINGER_HALF_WIDTH,
    HAND_ABOVE,
    HAND_HALF_LENGTH,
    grip_rotation,
)
from .sim import SimView
from .skill import Skill


DOOR_CONTACT = 0.7  # push a door this far (as a fraction of its length) from the hinge
DOOR_LEAD = 0.08  # m the pusher's target lies beyond the door's face (the push force grows with it)


class CloseDoor(Skill):
    """Swing a hinged door shut (the microwave's): the closed fingers, pointing down, against the
    door's face near its top edge (the hand above the door), pushed along the arc of the hinge
    until LIBERO's ``close`` holds."""

    name = "close_door"

    def __init__(self, view: SimView, fixture: str) -> None:
        super().__init__(view)
        joints = view.joints_of(fixture)
        if len(joints) != 1:
            raise NotImplementedError(f"{fixture!r} has joints {joints}: CloseDoor needs exactly one hinge")
        self.fixture = fixture
        self.joint = view.joint_id(joints[0])
        self.door = int(view.model.jnt_bodyid[self.joint])
        self.geoms = view.body_geoms(self.door)
        ranges = view.libero_object(fixture).object_properties["articulation"]
        lo, hi = (float(x) for x in view.model.jnt_range[self.joint])
        closed = ranges["default_close_ranges"]
        # LIBERO's microwave is closed when q > min(close range); its joint closes towards hi
        self.sign = 1.0 if np.mean(closed) > np.mean(ranges["default_open_ranges"]) else -1.0
        self.goal_q = hi if self.sign > 0 else lo
        self.start_phase("start")

    def describe(self) -> str:
        return f"close_door({self.fixture})[{self.phase}]"

    def _door(self):
        """(hinge point, door direction d (hinge to free end, horizontal), length, the direction
        its face moves while closing, top of the door)."""
        A, axis = self.view.joint_anchor(self.joint)
        pts = self.view.corners(self.geoms)
        rel = pts[:, :2] - A[:2]
        far = rel[np.argmax(np.linalg.norm(rel, axis=1))]
        length = float(np.linalg.norm(far))
        d = np.array([*(far / max(length, 1e-9)), 0.0])
        moving = np.cross(self.sign * axis, d)
        moving[2] = 0.0
        moving /= max(np.linalg.norm(moving), 1e-9)
        # the face pushed: the door panel's (its largest geom, not the handle) side facing away from
        # where it moves
        vol = [float(np.prod(self.view.model.geom_aabb[g][3:])) for g in self.geoms]
        panel = self.view.corners([self.geoms[int(np.argmax(vol))]])
        thick = (panel - A) @ moving
        return A, d, length, moving, float(thick.min()), float(panel[:, 2].max())

    def _pusher(self, lead: float):
        A, d, length, moving, back, top = self._door()
        z = top + 0.005 - HAND_ABOVE  # the hand just above the door, the finger tips on its face
        p = A + DOOR_CONTACT * length * d + (back - FINGER_HALF_WIDTH - 0.006 + lead) * moving
        p[2] = z
        return p, grip_rotation(float(np.arctan2(d[1], d[0])))

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        if ph == "start":
            if view.holds(["close", self.fixture]):
                return self.finish()
            self.contact, self.Rg = self._pusher(0.0)
            self.pre = self.contact + np.array([0.0, 0.0, 0.08])
            hand_top = view.corridor_top(pos[:2], self.pre[:2], HAND_HALF_LENGTH)
            self.travel_z = max(self.pre[2], hand_top + FINGER_BELOW + 0.03)
            self.start_phase("approach")
            return self.act()
        if ph == "approach":
            descending = np.linalg.norm(pos[:2] - self.pre[:2]) < 0.045 and pos[2] < self.travel_z - 0.02
            target = via_travel(pos, self.pre, self.travel_z, descending=descending)
            if np.linalg.norm(pos[:2] - self.pre[:2]) < 0.015 and pos[2] < self.pre[2] + 0.01:
                target = self.contact
                if np.linalg.norm(pos - self.contact) < 0.008 or self.progress.stalled(pos[2] - self.contact[2]):
                    self.start_phase("push")
            if self.t_phase > 90:
                self.start_phase("push")
            return move(view, target, self.Rg, 1.0)
        if ph == "push":
            if view.holds(["close", self.fixture]):
                self.start_phase("retreat")
                return self.act()
            q = view.qpos(self.joint)
            if self.progress.stalled(self.sign * (self.goal_q - q), eps=0.01, patience=15) or self.t_phase > 100:
                self.start_phase("start")  # lost the door: from the top again
                return move(view, pos + np.array([0.0, 0.0, 0.05]), R, 1.0, cap=0.5, symmetric=False)
            target, Rt = self._pusher(DOOR_LEAD)
            return move(view, target, Rt, 1.0, cap=0.6)
        if ph == "retreat":
            if self.t_phase > 8:
                return self.finish()
            return move(view, pos + np.array([0.0, 0.0, 0.05]), R, 1.0, cap=0.5, symmetric=False)
        raise RuntimeError(f"unknown phase {ph!r}")
