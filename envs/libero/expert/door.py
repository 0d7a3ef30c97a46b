"""Hinged doors (the microwave's): ``CloseDoor`` swings one shut by pushing its outer face along the
arc of the hinge; ``OpenDoor`` pulls it open by its handle, then swings it the rest of the way by
pushing its inner face. Both read LIBERO's own ranges for what ``open`` and ``close`` mean.
"""

from __future__ import annotations

import numpy as np

from .control import move, preshape, rot_error, rotate_about, rotation_action, via_travel
from .geometry import (
    FINGER_BELOW,
    FINGER_HALF_WIDTH,
    HAND_ABOVE,
    HAND_HALF_LENGTH,
    frame_from_axes,
    grip_rotation,
)
from .grasp import clearance, forearm_clearance
from .sim import SimView
from .skill import Skill

DOOR_CONTACT = 0.7  # push a door this far (as a fraction of its length) from the hinge
DOOR_LEAD = 0.08  # m the pusher's target lies beyond the door's face (the push force grows with it)


class Door:
    """A hinged door: its joint, its geoms, which way its joint opens, and its handle."""

    def __init__(self, view: SimView, fixture: str) -> None:
        joints = view.joints_of(fixture)
        if len(joints) != 1:
            raise NotImplementedError(f"{fixture!r} has joints {joints}: a door needs exactly one hinge")
        self.view, self.fixture = view, fixture
        self.joint = view.joint_id(joints[0])
        self.body = int(view.model.jnt_bodyid[self.joint])
        self.geoms = view.body_geoms(self.body)
        ranges = view.libero_object(fixture).object_properties["articulation"]
        self.lo, self.hi = (float(x) for x in view.model.jnt_range[self.joint])
        # LIBERO's microwave is closed when q > min(close range), open when q < max(open range)
        self.close_sign = (
            1.0 if np.mean(ranges["default_close_ranges"]) > np.mean(ranges["default_open_ranges"]) else -1.0
        )
        self.open_limit = (
            max(ranges["default_open_ranges"]) if self.close_sign > 0 else min(ranges["default_open_ranges"])
        )
        vol = [float(np.prod(view.model.geom_aabb[g][3:])) for g in self.geoms]
        self.panel = self.geoms[int(np.argmax(vol))]  # the door's panel: its largest geom

    def q(self) -> float:
        return self.view.qpos(self.joint)

    def frame(self, sign: float):
        """(hinge point, door direction d (hinge to free end, horizontal), length, the direction its
        face moves while the joint turns towards ``sign``, the panel's least extent along that
        direction from the hinge (the face pushed), top of the door)."""
        A, axis = self.view.joint_anchor(self.joint)
        pts = self.view.corners(self.geoms)
        rel = pts[:, :2] - A[:2]
        far = rel[np.argmax(np.linalg.norm(rel, axis=1))]
        length = float(np.linalg.norm(far))
        d = np.array([*(far / max(length, 1e-9)), 0.0])
        moving = np.cross(sign * axis, d)
        moving[2] = 0.0
        moving /= max(np.linalg.norm(moving), 1e-9)
        panel = self.view.corners([self.panel])
        thick = (panel - A) @ moving
        return A, d, length, moving, float(thick.min()), float(panel[:, 2].max())

    def handle(self):
        """(centre, unit long axis, geom) of the handle bar: the geom standing out farthest from the
        panel on the side the door opens to; None for a door without one."""
        _, _, _, out, _, _ = self.frame(-self.close_sign)
        others = [g for g in self.geoms if g != self.panel]
        if not others:
            return None
        panel_out = float((self.view.corners([self.panel]) @ out).max())
        reach = [float((self.view.corners([g]) @ out).max()) for g in others]
        k = int(np.argmax(reach))
        if reach[k] < panel_out + 0.01:
            return None
        c, R, h = self.view.geom_box(others[k])
        return c, R[:, int(np.argmax(h))], others[k]


def push_pose(door: Door, sign: float, lead: float) -> tuple[np.ndarray, np.ndarray]:
    """The closed fingers, pointing down, against the face of ``door`` that leads when its joint
    turns towards ``sign``, near the top edge (the hand just above the door), ``lead`` beyond it."""
    A, d, length, moving, back, top = door.frame(sign)
    p = A + DOOR_CONTACT * length * d + (back - FINGER_HALF_WIDTH - 0.006 + lead) * moving
    p[2] = top + 0.005 - HAND_ABOVE
    return p, grip_rotation(float(np.arctan2(d[1], d[0])))


class CloseDoor(Skill):
    """Swing a hinged door shut (the microwave's): the closed fingers, pointing down, against the
    door's face near its top edge (the hand above the door), pushed along the arc of the hinge
    until LIBERO's ``close`` holds."""

    name = "close_door"

    def __init__(self, view: SimView, fixture: str) -> None:
        super().__init__(view)
        self.fixture = fixture
        self.door = Door(view, fixture)
        self.sign = self.door.close_sign
        self.goal_q = self.door.hi if self.sign > 0 else self.door.lo
        self.start_phase("start")

    def describe(self) -> str:
        return f"close_door({self.fixture})[{self.phase}]"

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        if ph == "start":
            if view.holds(["close", self.fixture]):
                return self.finish()
            self.contact, self.Rg = push_pose(self.door, self.sign, 0.0)
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
            q = self.door.q()
            if self.progress.stalled(self.sign * (self.goal_q - q), eps=0.01, patience=15) or self.t_phase > 100:
                self.start_phase("start")  # lost the door: from the top again
                return move(view, pos + np.array([0.0, 0.0, 0.05]), R, 1.0, cap=0.5, symmetric=False)
            target, Rt = push_pose(self.door, self.sign, DOOR_LEAD)
            return move(view, target, Rt, 1.0, cap=0.6)
        if ph == "retreat":
            if self.t_phase > 8:
                return self.finish()
            return move(view, pos + np.array([0.0, 0.0, 0.05]), R, 1.0, cap=0.5, symmetric=False)
        raise RuntimeError(f"unknown phase {ph!r}")


# the handle pull: the approach pitched down from level by this much (rad). Nearly pointing down, the
# hand follows the door's arc by turning about its own axis; pitched 40 degrees or level, it had to
# swing round the handle and the elbow straightened to its limit (joint 4) at 0.4-0.6 rad open,
# from where the arm could not back off the handle (sampled init state 0)
PULL_PITCH = np.deg2rad(88.0)
PULL_TOP = 0.012  # m below the bar's top end the hand takes it
PULL_OPENING = 0.025  # finger joint position on the way to the handle (it stands close to the panel)
PULL_TO = 0.75  # rad the handle is pulled open by before the push takes over
PUSH_FROM = 0.3  # rad: opened at least this far, the fingers fit between the door and the cabinet
PULL_LEAD = 0.25  # rad the commanded door angle leads the measured one while pulling
OPEN_MARGIN = 0.25  # rad past LIBERO's open threshold the push aims for
UNTURN_CAP, UNTURN_DONE, UNTURN_STEPS = 0.3, 0.15, 30  # turning the hand back after the pull (as InsertPlace)
# the inner-face push: the finger tips on the face this far along the door from the hinge (fraction
# of its length), at mid-height; the hand level (or pitched down by INNER_PITCHES), pointing away
# from the robot's base turned towards the way the face moves by INNER_TURNS (a hand pointing down
# there stretched the arm to its singular pose); the fingers one above the other. The pose whose
# gripper and forearm clear the scene best, the first in this order among equals
INNER_FRACS = (0.85, 0.7)
INNER_TURNS = tuple(np.deg2rad([0.0, 20.0, 40.0]))
INNER_PITCHES = tuple(np.deg2rad([0.0, 20.0]))
INNER_BACK = 0.06  # m the pusher comes in along its approach
STAGE_BACK, STAGE_UP = 0.1, 0.06  # m the hand turns to the pusher this far before (level) and above its start
TURN_STEPS = 40  # steps the turn at the staging point may take
RETREAT_OUT = 0.045  # m the open hand backs straight out from the door's face off the handle
WITHDRAW_BACK, WITHDRAW_SIDE = 0.12, 0.03  # m the hand withdraws after the pull: towards the base, away from the hinge


class OpenDoor(Skill):
    """Open a hinged door (the microwave's): pinch its handle bar near its top, the hand (nearly)
    pointing down and the fingers across the bar, and pull it along the arc of the hinge (the hand
    turning about its own axis with the door) by ``PULL_TO``; then let go, back straight off the
    handle, withdraw towards the robot and turn the hand back; travel to a staging point before
    the door's inner face, turn the hand level there, and push that face with the closed finger
    tips until LIBERO's ``open`` holds. A door pulled less than ``PUSH_FROM`` is taken by the
    handle again."""

    name = "open_door"

    def __init__(self, view: SimView, fixture: str) -> None:
        super().__init__(view)
        self.fixture = fixture
        self.door = Door(view, fixture)
        self.sign = -self.door.close_sign  # the joint turns towards this sign as the door opens
        bound = self.door.lo if self.sign < 0 else self.door.hi
        goal = self.door.open_limit + self.sign * OPEN_MARGIN  # past LIBERO's threshold, short of the stop
        self.goal_q = max(goal, bound + 0.05) if self.sign < 0 else min(goal, bound - 0.05)
        self.regrasps = 0
        self.R_home = None  # the hand's orientation before the first pull
        self.start_phase("start")

    def on_phase(self, phase: str) -> None:
        if phase == "unturn":
            self._hold = self.view.grip()[0].copy()

    def describe(self) -> str:
        return f"open_door({self.fixture})[{self.phase}]"

    def _opened(self) -> float:
        """How far the door is open (rad, from closed)."""
        closed = self.door.hi if self.door.close_sign > 0 else self.door.lo
        return abs(self.door.q() - closed)

    def _reached(self) -> bool:
        return self.view.holds(["open", self.fixture]) and self.sign * (self.door.q() - self.goal_q) > -0.1

    def _inner_pose(self, way, lead: float) -> tuple[np.ndarray, np.ndarray]:
        """Grip pose whose closed finger tips touch the door's inner face (``lead`` beyond it along
        the way it moves) at a fraction of its length, mid-height, the approach ``way`` = (fraction,
        turn, pitch): from the robot's base, turned towards the way the face moves, pitched down."""
        frac, turn, pitch = way
        A, d, length, moving, back, top = self.door.frame(self.sign)
        panel = self.view.corners([self.door.panel])
        tip = A + frac * length * d + (back - 0.004 + lead) * moving
        tip[2] = 0.5 * (panel[:, 2].min() + panel[:, 2].max())
        out = tip[:2] - self.view.base_xy
        out /= max(np.linalg.norm(out), 1e-9)
        side = 1.0 if np.cross(out, moving[:2]) >= 0 else -1.0
        c, s_ = np.cos(side * turn), np.sin(side * turn)
        h = np.array([c * out[0] - s_ * out[1], s_ * out[0] + c * out[1], 0.0])
        approach = np.cos(pitch) * h - np.sin(pitch) * np.array([0.0, 0.0, 1.0])
        R = frame_from_axes(np.array([0.0, 0.0, 1.0]), approach)
        return tip - FINGER_BELOW * approach, R

    def _plan_push(self) -> None:
        """The inner-face pusher whose closed gripper, swept along its approach, and forearm clear
        the scene best (the door itself included)."""
        A, _, _, _, _, _ = self.door.frame(self.sign)
        obstacles = self.view.obstacles(A, skip_roots=(), radius=0.45)
        best = None
        for frac in INNER_FRACS:
            for pitch in INNER_PITCHES:
                for turn in INNER_TURNS:
                    p, R = self._inner_pose((frac, turn, pitch), 0.0)
                    clear = clearance(obstacles, p, R, 0.0, sweep=INNER_BACK)
                    clear = min(clear, forearm_clearance(obstacles, p, R, 0.0))
                    if best is None or min(clear, 0.01) > min(best[0], 0.01) + 1e-4:
                        best = (clear, (frac, turn, pitch))
        self.way = best[1]
        self.contact, self.Rg = self._inner_pose(self.way, 0.0)
        self.pre = self.contact - INNER_BACK * self.Rg[:, 2]

    def _plan_pull(self) -> bool:
        """The handle grasp: the hand from above, pitched ``PULL_PITCH`` towards the panel, the
        fingers across the bar near its top end. False when the door has no handle."""
        h = self.door.handle()
        if h is None:
            return False
        centre, bar, bar_geom = h
        bar_half = float(np.max(self.view.geom_box(bar_geom)[2]))
        _, _, _, out, _, _ = self.door.frame(self.sign)
        level = out - np.dot(out, bar) * bar
        level[2] = 0.0
        level /= max(np.linalg.norm(level), 1e-9)
        approach = -np.cos(PULL_PITCH) * level - np.sin(PULL_PITCH) * np.array([0.0, 0.0, 1.0])
        self.Rg = frame_from_axes(np.cross(level, bar), approach)  # the fingers across the bar
        self.grasp = centre + (bar_half - PULL_TOP) * bar  # near its top end, above its posts
        self.pre = self.grasp - 0.07 * self.Rg[:, 2]
        self.travel_z = max(self.pre[2], float(self.grasp[2]) + 0.05)
        return True

    def step(self):
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        if ph == "start":
            if self._reached():
                return self.finish()
            if self.R_home is None:
                self.R_home = R.copy()
            if self._opened() >= PUSH_FROM or not self._plan_pull():
                self.start_phase("push_start")
            else:
                self.start_phase("approach")
            return self.act()
        if ph == "approach":
            target = via_travel(pos, self.pre, self.travel_z)
            if (np.linalg.norm(pos - self.pre) < 0.012 and rot_error(R, self.Rg) < 0.08) or self.t_phase > 80:
                self.start_phase("descend")
            return move(view, target, self.Rg, preshape(view, PULL_OPENING))
        if ph == "descend":
            togo = float(np.linalg.norm(pos - self.grasp))
            if togo < 0.005 or self.progress.stalled(togo) or self.t_phase > 40:
                self.start_phase("close")
            return move(view, self.grasp, self.Rg, preshape(view, PULL_OPENING), cap=1.0 if togo > 0.04 else 0.4)
        if ph == "close":
            if self.t_phase >= 8:
                self.G0, self.R0 = view.grip()
                self.q0 = self.door.q()
                self.hinge, self.axis = view.joint_anchor(self.door.joint)
                self.start_phase("pull")
            return move(view, self.grasp, self.Rg, 1.0, cap=0.4)
        if ph == "pull":
            q = self.door.q()
            if self._opened() >= PULL_TO or self._reached():
                self.start_phase("release")
                return self.act()
            if self.progress.stalled(PULL_TO - self._opened(), eps=0.01, patience=12) or self.t_phase > 80:
                self.regrasps += 1
                self.start_phase("release")
                return self.act()
            q_cmd = q + self.sign * PULL_LEAD
            p, Rt = rotate_about(self.hinge, self.axis, q_cmd - self.q0, self.G0, self.R0)
            return move(view, p, Rt, 1.0, cap=0.6, symmetric=False)
        if ph == "release":
            if self.t_phase >= 5:
                self.start_phase("retreat")
            return move(view, pos, R, -1.0, cap=0.2, symmetric=False)
        if ph == "retreat":
            # off the handle: straight out from the door's face (backing out along the pitched
            # approach axis mostly rose along the bar, and the withdrawal dragged the door shut)
            if self.t_phase == 1:
                _, _, _, out, _, _ = self.door.frame(self.sign)
                self.away = pos + RETREAT_OUT * out + np.array([0.0, 0.0, 0.01])
            togo = float(np.linalg.norm(pos - self.away))
            if togo < 0.008 or self.progress.stalled(togo) or self.t_phase > 20:
                self.start_phase("withdraw")
                return self.act()
            return move(view, self.away, R, -1.0, cap=0.6, symmetric=False)
        if ph == "withdraw":
            # towards the robot past the door's free end, the hand as it is: turned in place out
            # there, the arm stretched its elbow to the limit and could not come back
            if self.t_phase == 1:
                home = np.array([*view.base_xy, pos[2]]) - pos
                home[2] = 0.0
                self.away = pos + WITHDRAW_BACK * home / max(np.linalg.norm(home), 1e-9)
                self.away[1] += WITHDRAW_SIDE * np.sign(pos[1] - self.door.frame(self.sign)[0][1])
            if (
                np.linalg.norm(pos - self.away) < 0.02
                or self.progress.stalled(np.linalg.norm(pos - self.away))
                or self.t_phase > 40
            ):
                self.start_phase("unturn")
                return self.act()
            return move(view, self.away, R, -1.0, cap=0.6, symmetric=False)
        if ph == "unturn":
            # the hand turns back to how it was before the pull, in place: from a level hand the turn
            # to the pusher, pointing down, can lock the wrist at its joint limits
            if rot_error(R, self.R_home, symmetric=False) < UNTURN_DONE or self.t_phase > UNTURN_STEPS:
                self.start_phase("push_start" if self._opened() >= PUSH_FROM else "start")
                return self.act()
            a = move(view, self._hold, self.R_home, -1.0, cap=0.5, symmetric=False)
            a[3:6] = rotation_action(R, self.R_home, cap=UNTURN_CAP)
            return a
        if ph == "push_start":
            self._plan_push()
            # the hand goes as it is (pointing down) to a staging point before the pusher, nearer
            # the robot, and turns there: turning on the way threw the arm out (it rose 0.5 m)
            h = self.Rg[:, 2].copy()
            h[2] = 0.0
            h /= max(np.linalg.norm(h), 1e-9)
            self.stage = self.pre - STAGE_BACK * h + np.array([0.0, 0.0, STAGE_UP])
            # a hand already turned (backing out of a lost push) comes straight back to the stage
            turned = rot_error(R, self.R_home, symmetric=False) > 2 * UNTURN_DONE
            self.start_phase("push_turn" if turned else "push_travel")
            return self.act()
        if ph == "push_travel":
            if np.linalg.norm(pos - self.stage) < 0.02 or self.t_phase > 60:
                self.start_phase("push_turn")
            return move(view, self.stage, self.R_home, 1.0, cap=0.6, symmetric=False)
        if ph == "push_turn":
            if rot_error(R, self.Rg, symmetric=False) < UNTURN_DONE or self.t_phase > TURN_STEPS:
                self.start_phase("push_approach")
                return self.act()
            a = move(view, self.stage, self.Rg, 1.0, cap=0.5, symmetric=False)
            a[3:6] = rotation_action(R, self.Rg, cap=UNTURN_CAP)
            return a
        if ph == "push_approach":
            if np.linalg.norm(pos - self.pre) < 0.015 or self.t_phase > 60:
                self.start_phase("push_in")
            return move(view, self.pre, self.Rg, 1.0, cap=0.6, symmetric=False)
        if ph == "push_in":
            togo = float(np.linalg.norm(pos - self.contact))
            if togo < 0.006 or self.progress.stalled(togo) or self.t_phase > 30:
                self.start_phase("push")
            return move(view, self.contact, self.Rg, 1.0, cap=0.5, symmetric=False)
        if ph == "push":
            if self._reached():
                self.start_phase("done")
                return self.act()
            q = self.door.q()
            if self.progress.stalled(self.sign * (self.goal_q - q), eps=0.01, patience=15) or self.t_phase > 100:
                self.start_phase("push_back")  # lost the door: back out and plan again
                return self.act()
            target, Rt = self._inner_pose(self.way, DOOR_LEAD)
            return move(view, target, Rt, 1.0, cap=0.6, symmetric=False)
        if ph in ("push_back", "done"):
            if self.t_phase > 8:
                if ph == "done":
                    return self.finish()
                self.start_phase("push_start")
                return self.act()
            return move(view, pos - 0.05 * R[:, 2] + np.array([0.0, 0.0, 0.03]), R, 1.0, cap=0.5, symmetric=False)
        raise RuntimeError(f"unknown phase {ph!r}")
