"""``PickPlace``: take a movable object and put it ``on`` / ``in`` a target (object, fixture or region).

Phases: plan -> approach (over to the pre-grasp pose at a safe height, then down to it) ->
descend (along the approach axis) -> close -> lift (vertically until the object clears everything
between it and the target: "lift higher before moving sideways") -> carry (servo the *object*
over the target, slowly) -> lower -> release (about 1 cm above the surface) -> retreat.

A blocked descent times out (grasp there if close enough, else another side); when the object
leaves the hand it backs off, plans again and re-grasps. ``done`` after the retreat; the planner
checks the predicate and calls :meth:`retry` (a re-grasp) when it does not hold.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import ConvexHull

from .control import Progress, move, preshape, rot_error, via_travel
from .geometry import FINGER_BELOW, HAND_HALF_LENGTH
from .grasp import GraspPlanner
from .lay import lay_direction, lay_needed, laid, turned_for_lay
from .placement import Placement
from .sim import SimView
from .skill import Skill

CARRY_CLEARANCE = 0.035  # object bottom above obstacles while carrying
CARRY_CAP = 0.7  # action cap while carrying
TURNS = np.deg2rad(np.arange(-90, 91, 5))  # turns tried for the carry
TRIM_TURNS = np.deg2rad(np.arange(-20.0, 20.1, 2.5))  # the last correction of the turn, before lowering
TRIMMED = 0.03  # rad from the trued-up orientation: lowering goes on
TURN_GAIN = 0.01  # m a quarter turn must gain in how the footprint fits a region before it is made
TURN_CAP = 0.3  # rotation action cap while the hand turns during the carry
TIGHT = 0.03  # m: a footprint closer than this to an In region's box is centred on it
TURNED = 0.1  # rad from the carry orientation: the turn is done
FINGER_SLACK = 0.02  # m off along the finger axis a stalled descent still closes (a body grasp's open fingers)
EXTRACT_SPACING = 0.012  # m between the rays up from the footprint (an open drawer's handle bar is 1.5 cm)
EXTRACT_HEADROOM = 0.25  # an object with something less than this above its top is slid out before lifting


class PickPlace(Skill):
    name = "pick_place"

    def __init__(self, view: SimView, obj: str, target: str, relation: str = "on", placement=None) -> None:
        super().__init__(view)
        if not view.is_object(obj):
            raise NotImplementedError(f"cannot move {obj!r}: it is not a movable object of {view.task_name}")
        self.obj, self.target, self.relation = obj, target, relation
        self.placement = placement or Placement(view, obj, target, relation)
        self.obj_body = view.body(obj)
        self.planner = GraspPlanner(view, self.obj_body)
        self.obj_root, self.obj_geoms = self.planner.root, self.planner.geoms
        self.regrasps = 0
        self.centre_foot = False
        self.lay_dir = None  # laid down while carried: the direction it then points along (xy)
        self._lay_decided = False
        self.lay_stage = None  # "turn", then "pitch", while a laid object is carried
        self.start_phase("plan")

    def describe(self) -> str:
        return f"pick_place({self.obj} {self.relation} {self.target})[{self.phase}]"

    # ------------------------------------------------------------------ state
    def on_phase(self, phase: str) -> None:
        self._q_prev = np.inf
        self._no_contact = False

    def retry(self) -> None:
        self.attempts += 1
        self.status, self.reason = "running", ""
        self.regrasps += 1
        self.start_phase("backoff")

    def _obj_pos(self) -> np.ndarray:
        return self.view.body_pos(self.obj_body)

    def _extent(self):
        return self.planner.extent()

    def _holding(self) -> bool:
        """The object still moves with the hand and a finger touches it (one step without contact
        is forgiven: contacts flicker while the object settles in the fingers). An object being laid
        down turns with the hand: its offset is then kept in the hand's frame."""
        pos, R = self.view.grip()
        offset = R @ self.hold_local if self.lay_stage else self.hold_offset
        dev = np.linalg.norm((self._obj_pos() - pos) - offset)
        touching = len(self.view.finger_contacts(self.obj_geoms)) >= 1
        lost_contact = not touching and self._no_contact
        self._no_contact = not touching
        return dev < 0.05 and not lost_contact

    def carry_xy(self) -> np.ndarray:
        """Where the carry takes the object (the placement point; a container with a roof: the
        point in front of its opening)."""
        return self.placement.xy()

    def _release_check(self):
        """(offset to the release pose, obstacles there) for grasps that must fit there too; None."""
        return None

    def _cover(self):
        """The roof over the target (``find_cover``'s answer) for a roofed container; None."""
        return None

    def _decide_lay(self) -> None:
        """Once, before the first grasp: whether the object is laid down while carried."""
        if self._lay_decided:
            return
        self._lay_decided = True
        pts, _, _ = self._extent()
        cover = self._cover()
        if lay_needed(self.view, self.obj_body, self.obj_root, pts, self.placement, self.relation, cover):
            self.lay_dir = lay_direction(self.view, self.obj_body, self.obj_root, pts, self.placement, cover)

    def _regrasp(self) -> np.ndarray:
        self.regrasps += 1
        self.start_phase("backoff")
        return self.act()

    # ------------------------------------------------------------------ planning
    def _plan(self) -> None:
        self._decide_lay()
        self.grasp = self.planner.plan(self.placement.xy(), self._release_check())
        g = self.grasp
        pos, _ = self.view.grip()
        self.pre = g.pregrasp(g.back)
        self.hover_z = float(self.pre[2])
        hand_top = self.view.corridor_top(pos[:2], self.pre[:2], HAND_HALF_LENGTH, skip_roots=(self.obj_root,))
        self.travel_z = max(self.hover_z, hand_top + FINGER_BELOW + 0.03)

    def _plan_extraction(self) -> np.ndarray:
        """Horizontal offset that takes the object out from under an overhang (a bowl beside an
        open drawer) before it is lifted: the shortest move after which nothing is above its
        footprint (zero when nothing is)."""
        pts, zb, zt = self._extent()
        lo, hi = pts[:, :2].min(0), pts[:, :2].max(0)
        n = [max(3, int(np.ceil((hi[k] - lo[k]) / EXTRACT_SPACING)) + 1) for k in range(2)]
        foot = np.array([[x, y] for x in np.linspace(lo[0], hi[0], n[0]) for y in np.linspace(lo[1], hi[1], n[1])])
        # only points over the object itself (its horizontal hull): a round bowl's box has corners
        # beside it, over the walls of the drawer it stands in
        hull = ConvexHull(pts[:, :2]).equations
        foot = foot[np.all(foot @ hull[:, :2].T + hull[:, 2] <= 1e-6, axis=1)]
        up = np.array([0.0, 0.0, 1.0])

        def hits(offset):
            out = []
            for x, y in foot + offset:
                dist, g = self.view.ray([x, y, zt + 0.003], up, skip_roots=(self.obj_root,))
                if g >= 0 and dist < EXTRACT_HEADROOM:
                    out.append([x, y])
            return np.array(out).reshape(-1, 2)

        blocked = hits(np.zeros(2))
        if not len(blocked):
            return np.zeros(2)
        away = self._obj_pos()[:2] - blocked.mean(0)
        away = away / max(np.linalg.norm(away), 1e-9)
        dirs = [np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 16, endpoint=False)]
        dirs.sort(key=lambda u: -float(u @ away))
        for r in np.arange(0.02, 0.161, 0.02):
            for u in dirs:
                if not len(hits(r * u)):
                    return (r + 0.03) * u
        return np.zeros(2)

    def _plan_carry(self) -> None:
        """Obstacle heights along the object's straight path to the target, and the release level."""
        pts, zb, zt = self._extent()
        radius = 0.5 * float(np.max(np.ptp(pts[:, :2], axis=0))) + 0.015
        tgt = self.carry_xy()
        self.extract = self._plan_extraction()
        self.lift_xy = self.grasp.xy + self.extract
        self.extracted = not np.any(self.extract)
        p0 = self._obj_pos()[:2] + self.extract
        length = float(np.linalg.norm(tgt - p0))
        n = max(2, int(length / 0.02) + 1)
        offs = [np.zeros(2)] + [
            radius * np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)
        ]
        s = np.linspace(0.0, 1.0, n)
        ray = self.view.ray_down
        tops = np.array([max(ray(*(p0 + si * (tgt - p0) + o), skip_roots=(self.obj_root,)) for o in offs) for si in s])
        self.path = (p0, tgt, s, tops, radius / max(length, 1e-6))
        self.release_bottom, self.region_hi = self.placement.release_level(self.obj_root)
        self.centre_foot = False  # set by _carry_turn for a tight fit
        if self.lay_dir is not None and self.grasp.kind == "body":
            # first turned about the vertical (finger axis across the lay direction), then pitched
            self.lay_stage = "turn"
            self.R_carry = turned_for_lay(self.grasp.rotation(), self.lay_dir)
            return
        self.lay_stage = None
        turn = self._carry_turn()
        c, s_ = np.cos(turn), np.sin(turn)
        self.R_carry = np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]]) @ self.grasp.rotation()

    def _servo_xy(self) -> np.ndarray:
        """The point carried over the placement point: the object's origin, or its footprint's centre."""
        if self.centre_foot:
            pts, _, _ = self._extent()
            return 0.5 * (pts[:, :2].min(0) + pts[:, :2].max(0))
        return self._obj_pos()[:2]

    def _carry_turn(self) -> float:
        """Turn (rad, about the vertical) of the hand while carrying: the one after which the object's
        footprint fits the ``In`` region's box best, when it does not fit as it is (a book into a
        caddy's narrow compartment), else none."""
        pl = self.placement
        self.centre_foot = False
        if self.relation != "in" or pl.kind != "site":
            return 0.0
        half = self._region_half()
        fit = self._fit
        turn, best = 0.0, fit(0.0)
        if best < 0.0:
            t = max(TURNS, key=lambda t: fit(t) - 0.002 * abs(t))
            if fit(t) > best + TURN_GAIN:
                turn, best = float(t), fit(t)
        # a tight fit: the footprint's centre (not the object's origin, which may sit off it) goes
        # midway between the walls around the region's centre, the origin kept in the region
        self.centre_foot = not np.any(pl.offset) and best < TIGHT
        if self.centre_foot:
            pl.offset = np.clip(self._free_centre() - pl.anchor_xy(), -half, half)
        return turn

    def _region_half(self) -> np.ndarray:
        site = self.view.se.object_sites_dict[self.placement.target]
        return np.abs(self.view.site_mat(self.placement.target) @ np.asarray(site.size, float))[:2]

    def _fit(self, turn: float) -> float:
        """Least margin (m) of the object's footprint, turned by ``turn`` about the vertical, inside
        the In region's box (< 0: it sticks out)."""
        pts, _, _ = self._extent()
        c, s_ = np.cos(turn), np.sin(turn)
        return float(np.min(self._region_half() - 0.5 * np.ptp(pts[:, :2] @ np.array([[c, s_], [-s_, c]]), axis=0)))

    def _free_centre(self) -> np.ndarray:
        """Midway between the walls around the region's centre along each world axis (ray casts a
        little above the release level; an axis with no wall on both sides keeps the centre)."""
        c = self.placement.anchor_xy()
        z = self.release_bottom + 0.03
        out = c.copy()
        for k in range(2):
            u = np.zeros(3)
            u[k] = 1.0
            hi, g1 = self.view.ray([c[0], c[1], z], u, skip_roots=(self.obj_root,))
            lo, g2 = self.view.ray([c[0], c[1], z], -u, skip_roots=(self.obj_root,))
            if g1 >= 0 and g2 >= 0 and max(hi, lo) < 0.2:
                out[k] += 0.5 * (hi - lo)
        return out

    def _carry_bottom(self, obj_xy) -> float:
        """Height the object's bottom must keep from here to the target (obstacles still ahead + margin)."""
        p0, p1, s, tops, back = self.path
        d = p1 - p0
        s_cur = float(np.clip(np.dot(obj_xy - p0, d) / max(np.dot(d, d), 1e-12), 0.0, 1.0))
        ahead = tops[s >= s_cur - back]
        top = float(ahead.max()) if ahead.size else float(tops[-1])
        return max(top + CARRY_CLEARANCE, self.release_bottom + 0.02)

    # ------------------------------------------------------------------ control
    def step(self) -> np.ndarray:
        view = self.view
        pos, R = view.grip()
        ph = self.phase
        if ph in ("plan", "start"):
            self._plan()
            self.start_phase("approach")
            return self.act()

        g = self.grasp
        Rg = g.rotation()
        if ph == "approach":
            # over to the pre-grasp pose at a safe height, then down to it
            pre = self.pre
            target = via_travel(pos, pre, self.travel_z)
            near = np.linalg.norm(pos - pre) < 0.015 and rot_error(R, Rg) < 0.12
            if near or self.t_phase > 80:
                self.start_phase("descend")
            return move(view, target, Rg, preshape(view, g.opening))

        if ph == "descend":
            # straight along the approach axis into the grasp
            target = g.pos
            togo = float(np.linalg.norm(pos - target))
            if togo < 0.006 or (self.t_phase > 4 and pos[2] - g.z < 0.004):
                self.start_phase("close")
            elif self.progress.stalled(togo) or self.t_phase > 50:
                # close there if near enough; along the finger axis the closing fingers centre the
                # object (the arm stops short of a grasp close to its base, low over the table)
                off = Rg.T @ (target - pos)
                near = g.kind == "body" and abs(off[0]) < FINGER_SLACK and np.hypot(off[1], off[2]) < 0.01
                if togo < 0.012 or near:
                    self.start_phase("close")
                else:
                    self.planner.failed_sides.append(g.side)
                    return self._regrasp()
            return move(view, target, Rg, preshape(view, g.opening), cap=1.0 if togo > 0.05 else 0.6)

        if ph == "close":
            target = np.array([g.xy[0], g.xy[1], g.z])
            q = view.finger_opening()
            settled = self.t_phase >= 6 and abs(q - self._q_prev) < 0.0004
            self._q_prev = q
            if settled or self.t_phase >= 14:
                self.hold_offset = self._obj_pos() - pos
                self.hold_local = R.T @ self.hold_offset
                self.obj_z0 = self._obj_pos()[2]
                self.grip_z0 = pos[2]
                self._plan_carry()
                self.start_phase("lift")
            return move(view, target, Rg, 1.0, cap=0.5)

        if ph == "lift":
            obj = self._obj_pos()
            _, zb, _ = self._extent()
            if not self.extracted:
                # out from under the overhang first, barely off the support
                if self.t_phase > 3 and not self._holding():
                    self.planner.failed_sides.append(g.side)
                    return self._regrasp()
                if np.linalg.norm(pos[:2] - self.lift_xy) < 0.01 or self.t_phase > 40:
                    self.extracted = True
                    self.start_phase("lift")
                target = np.array([*self.lift_xy, self.grip_z0 + 0.01])
                return move(view, target, Rg, 1.0, cap=0.4)
            need = self._carry_bottom(obj[:2])
            target = np.array([self.lift_xy[0], self.lift_xy[1], pos[2] + need - zb + 0.005])
            lifted = pos[2] - self.grip_z0
            # a bowl held by its rim pivots on its far edge before it comes up: allow for that
            if lifted > 0.05 and (obj[2] - self.obj_z0) < 0.3 * lifted:
                self.planner.failed_sides.append(g.side)
                return self._regrasp()
            if self.t_phase > 3 and not self._holding():
                self.planner.failed_sides.append(g.side)
                return self._regrasp()
            if zb > need - 0.01 or self.t_phase > 60:
                self.start_phase("carry")
            return move(view, target, Rg, 1.0, cap=0.8)

        if ph == "carry":
            if not self._holding():
                return self._regrasp()
            obj = self._obj_pos()
            _, zb, _ = self._extent()
            err = self.carry_xy() - self._servo_xy()
            need = self._carry_bottom(obj[:2])
            target = np.array([pos[0] + err[0], pos[1] + err[1], pos[2] + need - zb])
            turning = rot_error(R, self.R_carry) > TURNED
            if self.lay_stage == "turn" and not turning:
                self.lay_stage = "pitch"
                self.R_carry = laid(self.R_carry, self.lay_dir)
                turning = True
            if np.linalg.norm(err) < 0.012 and not turning or self.t_phase > 150:
                if self.centre_foot:  # the object may have turned in the fingers: true it up
                    t = max(TRIM_TURNS, key=lambda t: self._fit(t) - 0.002 * abs(t))
                    c, s_ = np.cos(t), np.sin(t)
                    self.R_carry = np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]]) @ R
                self.start_phase("lower")
            a = move(view, target, self.R_carry, 1.0, cap=min(CARRY_CAP, 0.15 + 0.05 * self.t_phase))
            if turning:  # slowly: a book pinched near its top swings about the finger axis
                a[3:6] *= min(1.0, TURN_CAP / max(float(np.max(np.abs(a[3:6]))), 1e-9))
            return a

        if ph == "lower":
            if not self._holding():
                return self._regrasp()
            err = self.carry_xy() - self._servo_xy()
            _, zb, _ = self._extent()
            togo = zb - self.release_bottom
            target = np.array([pos[0] + err[0], pos[1] + err[1], pos[2] - togo])
            if self.centre_foot and (rot_error(R, self.R_carry) > TRIMMED or np.linalg.norm(err) > 0.006):
                target[2] = pos[2]  # a tight fit: trued up and over the centre before it goes down
                self.progress = Progress()
            inside = self.region_hi is not None and self._obj_pos()[2] < self.region_hi - 0.02
            if (togo < 0.004 or inside and togo < 0.03) and np.linalg.norm(err) < 0.015:
                self.start_phase("release")
            elif self.progress.stalled(togo, patience=10) or self.t_phase > 60:
                self.start_phase("release")
            return move(view, target, self.R_carry, 1.0, cap=0.7 if togo > 0.04 else 0.4)

        if ph == "release":
            if self.t_phase >= 6:
                self.start_phase("retreat")
            return move(view, pos, self.R_carry, -1.0, cap=0.3)

        if ph == "retreat":
            target = np.array([pos[0], pos[1], max(pos[2], self.hover_z) + 0.05])
            if self.t_phase > 12:
                return self.finish()  # the planner checks the predicate and retries when it fails
            # a laid object's hand rises level first (turning there would sweep the fingers through it)
            return move(view, target, self.R_carry if self.lay_stage else Rg, -1.0, cap=0.5)

        if ph == "backoff":
            # open and rise clear of the object, then plan again
            _, _, zt = self._extent()
            target = np.array([pos[0], pos[1], max(zt + 0.05, pos[2])])
            if self.t_phase >= 6 and pos[2] > zt + 0.03 or self.t_phase > 25:
                self.start_phase("plan")
            return move(view, target, Rg, -1.0, cap=0.6)

        raise RuntimeError(f"unknown phase {ph!r}")
