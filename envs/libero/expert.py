"""Scripted pick-and-place expert for LIBERO (libero_spatial, libero_object; DESIGN §6).

The expert reads privileged simulator state only (object poses, collision geometry, contacts, ray
casts) and emits the same 7-dim delta-EEF actions a policy would (OSC_POSE in [-1, 1]; the last
dimension -1 open / +1 close, always one of the two). It is the project's demonstration source:

* a proportional controller on the grip site (``a = err / 0.05``, scaled as a vector so its
  direction is kept, capped lower while carrying) and on the gripper's orientation;
* objects narrow enough for the open fingers (<= 7 cm) are taken at their centre across their
  narrowest horizontal direction, fingers pointing down, the hand above the object's top; wider
  ones (bowls) by the rim, one finger inside and one outside, the fingers tilted to lie flat on
  the flared wall (pinched upright, a bowl slowly turns out of the gripper). Candidates (side,
  tilt, depth, finger opening) are scored by the clearance of the gripper, modelled as boxes swept
  along its approach, against every collision geom nearby (separating-axis test), by reach from
  the base (the arm stops following near full stretch) and by how well the carry direction suits
  the pinch. In tight spots (the bowl in the open drawer) the fingers come in half closed;
* lift vertically until the object clears everything between it and the target (ray-cast
  corridor: "lift higher before moving sideways"), carry, servo the *object* over the target,
  release ~1 cm above it;
* a blocked descent times out (grasp there if close enough, else another side); when the object
  leaves the hand, or lands off target, it plans again and re-grasps.

Supported goals: exactly one ``On obj target`` or ``In obj region`` predicate whose first argument
is a movable object (every libero_spatial / libero_object task, and the single pick-and-place
tasks of libero_goal). Anything else raises ``NotImplementedError`` at :meth:`reset`.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

# controller scaling of OSC_POSE (robosuite defaults used by LIBERO): action 1 = 5 cm / 0.5 rad
POS_SCALE = 0.05
ROT_SCALE = 0.5

# gripper geometry relative to the grip site (fingers open), measured on the Panda gripper
OPEN = 0.04  # finger joint position, fully open (each finger; 0 = closed)
FINGER_IN = 0.004  # a finger's collision reaches this far inside its joint position (closing side)
FINGER_OUT = 0.029  # ... and this far outside it
FINGER_HALF_WIDTH = 0.013  # across the finger axis
FINGER_BELOW = 0.013  # finger tips reach this far below the grip site
HAND_HALF_LENGTH = 0.105  # hand collision along the finger axis
HAND_ABOVE = 0.024  # hand collision starts this far above the grip site
APPROACH_BACK = 0.08  # the fingers come in along their approach axis from this far before the grasp
MAX_GRASP_WIDTH = 0.070  # widest object taken across its body; wider ones are taken by the rim

CARRY_CLEARANCE = 0.035  # object bottom above obstacles while carrying
CARRY_CAP = 0.7  # action cap while carrying
# grasp scores are in metres of clearance: clearance counts up to CLEARANCE_ENOUGH, costs subtract
CLEARANCE_ENOUGH = 0.01
# rim grasps: fingers tilted by this fraction of the wall's flare, cost. The pads then lie flat on
# the wall; upright they touch it by an edge and the bowl slowly turns out of the pinch.
RIM_TILTS = ((1.0, 0.0), (0.6, 0.004), (0.3, 0.012), (0.0, 0.03))
RIM_DEPTHS = ((0.018, 0.0), (0.011, 0.006))  # rim grasps: grip site below the rim's top edge, cost
RIM_OPENINGS = ((OPEN, 0.0), (0.026, 0.002), (0.018, 0.004))  # finger opening on the way in, cost
COMFORT_REACH = 0.72  # m from the robot base (horizontal) beyond which grasp points are penalised
SUPPORTED = ("on", "in")

FINGER_BODIES = {
    "gripper0_leftfinger": 0,
    "gripper0_finger_joint1_tip": 0,
    "gripper0_rightfinger": 1,
    "gripper0_finger_joint2_tip": 1,
}


def _part(lo, hi):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return (lo + hi) / 2, (hi - lo) / 2


def gripper_parts(opening: float = OPEN):
    """The gripper, fingers at joint position ``opening``, as boxes (centre, half extents) in the
    grip-site frame: x the finger (closing) axis, z the approach axis (hand to finger tips)."""
    lo_f, hi_f = opening - FINGER_IN, opening + FINGER_OUT
    return (
        _part([lo_f, -FINGER_HALF_WIDTH, -0.049], [hi_f, FINGER_HALF_WIDTH, FINGER_BELOW]),
        _part([-hi_f, -FINGER_HALF_WIDTH, -0.049], [-lo_f, FINGER_HALF_WIDTH, FINGER_BELOW]),
        _part([-HAND_HALF_LENGTH, -0.031, -0.126], [HAND_HALF_LENGTH, 0.039, -HAND_ABOVE]),  # hand
    )


def box_separation(cA, RA, hA, cB, RB, hB) -> np.ndarray:
    """Separating-axis test of oriented boxes A against boxes B, pair by pair (arrays of equal
    length, or one A against many B): per pair the largest gap along any of the 15 candidate axes
    (a lower bound on their distance when > 0; minus the least penetration depth when they
    overlap). A box is its centre (3,), rotation with the box axes as columns (3, 3), half extents."""
    cB, RB, hB = np.atleast_2d(cB), np.asarray(RB).reshape(-1, 3, 3), np.atleast_2d(hB)
    cA, RA, hA = np.atleast_2d(cA), np.asarray(RA).reshape(-1, 3, 3), np.atleast_2d(hA)
    n = max(cA.shape[0], cB.shape[0])
    axA = np.broadcast_to(RA.transpose(0, 2, 1), (n, 3, 3))  # rows are axes
    axB = np.broadcast_to(RB.transpose(0, 2, 1), (n, 3, 3))
    cross = np.cross(axA[:, :, None, :], axB[:, None, :, :]).reshape(n, 9, 3)
    L = np.concatenate([axA, axB, cross], axis=1)  # (n, 15, 3)
    norm = np.linalg.norm(L, axis=2)
    valid = norm > 1e-6
    L = L / np.where(valid, norm, 1.0)[..., None]
    rA = np.einsum("nki,ni->nk", np.abs(np.einsum("nkd,nid->nki", L, axA)), np.broadcast_to(hA, (n, 3)))
    rB = np.einsum("nki,ni->nk", np.abs(np.einsum("nkd,nid->nki", L, axB)), np.broadcast_to(hB, (n, 3)))
    gap = np.abs(np.einsum("nkd,nd->nk", L, np.broadcast_to(cB - cA, (n, 3)))) - rA - rB
    gap = np.where(valid, gap, -np.inf)
    return gap.max(axis=1)


@dataclass
class Grasp:
    xy: np.ndarray  # grip-site target (world xy)
    z: float  # grip-site height at the grasp
    yaw: float  # direction of the finger axis (closing direction), radians
    kind: str  # "rim" or "body"
    score: float
    side: float  # approach angle for rim grasps (to penalise a failed side), else yaw
    tilt: float = 0.0  # rim grasps: fingers tilted inward by this angle to lie flat on a flared wall
    opening: float = OPEN  # finger joint position on the way in (narrower for tight spots)

    @property
    def pos(self) -> np.ndarray:
        return np.array([self.xy[0], self.xy[1], self.z])

    def pregrasp(self, back: float) -> np.ndarray:
        """``back`` metres before the grasp along the approach axis (above it, outward when tilted)."""
        return self.pos - back * self.rotation()[:, 2]

    def rotation(self) -> np.ndarray:
        """Desired grip-site orientation: x = finger (closing) axis, z = approach (fingers point along +z)."""
        u = np.array([np.cos(self.yaw), np.sin(self.yaw), 0.0])
        up = np.array([0.0, 0.0, 1.0])
        ct, st = np.cos(self.tilt), np.sin(self.tilt)
        x = u * ct - up * st
        z = -(up * ct + u * st)
        return np.column_stack([x, np.cross(z, x), z])


def _wrap(a: float) -> float:
    return (a + np.pi) % (2 * np.pi) - np.pi


class PickPlaceExpert:
    """Privileged scripted expert for single ``On`` / ``In`` pick-and-place goals."""

    def __init__(self, env) -> None:
        self.env = env
        self.phase = "idle"

    # ------------------------------------------------------------------ episode setup
    def reset(self) -> None:
        se = self.env.sim_env
        goal = se.parsed_problem["goal_state"]
        if len(goal) != 1:
            raise NotImplementedError(
                f"PickPlaceExpert handles a single On/In pick-and-place goal; "
                f"{self.env.task.name} has {len(goal)} predicates: {goal}"
            )
        pred = [str(x) for x in goal[0]]
        if pred[0].lower() not in SUPPORTED or len(pred) != 3:
            raise NotImplementedError(
                f"PickPlaceExpert does not support the goal predicate {pred} of {self.env.task.name} "
                "(only 'on'/'in' pick-and-place)"
            )
        obj, target = pred[1], pred[2]
        if obj not in se.objects_dict:
            raise NotImplementedError(
                f"PickPlaceExpert cannot move {obj!r} (predicate {pred}): it is not a movable object"
            )
        if target in se.object_sites_dict:
            self.target_kind = "site"
        elif target in se.objects_dict or target in se.fixtures_dict:
            self.target_kind = "object"
        else:
            raise NotImplementedError(f"PickPlaceExpert: unknown target {target!r} in predicate {pred}")
        if self.target_kind == "site" and getattr(se.object_sites_dict[target], "joints", None):
            state = getattr(se, "object_states_dict", {}).get(target)
            if state is not None and state.is_close():
                raise NotImplementedError(
                    f"PickPlaceExpert: the goal {pred} needs {target!r} opened first (articulated and closed); "
                    "only pick-and-place is supported"
                )
        self.relation, self.obj, self.target = pred[0].lower(), obj, target
        self.model, self.data = se.sim.model._model, se.sim.data._data
        m = self.model
        self.grip_site = m.site("gripper0_grip_site").id
        self.obj_body = se.obj_body_id[obj]
        self.obj_root = int(m.body_rootid[self.obj_body])
        self.obj_geoms = self._colliding_geoms(self.obj_root)
        self.robot_root = int(m.body_rootid[m.body("robot0_base").id])
        self.base_xy = self.data.xpos[m.body("robot0_base").id][:2].copy()
        finger_bodies = {m.body(n).id: side for n, side in FINGER_BODIES.items()}
        self.finger_geoms = {
            g: finger_bodies[int(m.geom_bodyid[g])]
            for g in range(m.ngeom)
            if int(m.geom_bodyid[g]) in finger_bodies and self._collides(g)
        }
        self._skip_roots = {self.robot_root}
        self.finger_joints = [m.joint(n).id for n in ("gripper0_finger_joint1", "gripper0_finger_joint2")]
        self._q_prev = np.inf
        self._no_contact = False
        self.failed_sides: list[float] = []
        self.regrasps = 0
        self._start_phase("plan")

    # ------------------------------------------------------------------ geometry helpers
    def _collides(self, g: int) -> bool:
        return bool(self.model.geom_contype[g] or self.model.geom_conaffinity[g])

    def _colliding_geoms(self, root: int) -> np.ndarray:
        m = self.model
        return np.array(
            [g for g in range(m.ngeom) if int(m.body_rootid[m.geom_bodyid[g]]) == root and self._collides(g)],
            dtype=np.int64,
        )

    _SIGNS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)

    def _corners(self, geoms) -> np.ndarray:
        """World corners (N*8 x 3) of the local AABBs of ``geoms``."""
        m, d = self.model, self.data
        pts = []
        for g in geoms:
            aabb = m.geom_aabb[g]
            c = aabb[:3] + self._SIGNS * aabb[3:]
            pts.append(c @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g])
        return np.concatenate(pts)

    def _obj_extent(self):
        pts = self._corners(self.obj_geoms)
        return pts, pts[:, 2].min(), pts[:, 2].max()

    def _ray_down(self, x: float, y: float, z0: float = 3.0, skip_roots=()) -> float:
        """Height of the first colliding geom below (x, y, z0), ignoring the robot and ``skip_roots``."""
        m, d = self.model, self.data
        skip = self._skip_roots | set(skip_roots)
        gid = np.zeros(1, dtype=np.int32)
        p = np.array([x, y, z0], dtype=np.float64)
        down = np.array([0.0, 0.0, -1.0])
        groups = np.array([1, 1, 1, 0, 0, 0], dtype=np.uint8)
        for _ in range(40):
            dist = mujoco.mj_ray(m, d, p, down, groups, 1, -1, gid)
            if dist < 0 or gid[0] < 0:
                return -np.inf
            g = int(gid[0])
            hit = p[2] - dist
            root = int(m.body_rootid[m.geom_bodyid[g]])
            if self._collides(g) and root not in skip:
                return hit
            p = np.array([x, y, hit - 1e-4])
        return -np.inf

    def _corridor_top(self, p0, p1, radius: float, skip_roots=()) -> float:
        p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
        n = max(2, int(np.linalg.norm(p1 - p0) / 0.03) + 1)
        top = -np.inf
        offs = [np.zeros(2)] + [
            radius * np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)
        ]
        for s in np.linspace(0.0, 1.0, n):
            c = p0 + s * (p1 - p0)
            for o in offs:
                top = max(top, self._ray_down(c[0] + o[0], c[1] + o[1], skip_roots=skip_roots))
        return top

    # ------------------------------------------------------------------ state
    def _grip(self):
        d = self.data
        return d.site_xpos[self.grip_site].copy(), d.site_xmat[self.grip_site].reshape(3, 3).copy()

    def _obj_pos(self) -> np.ndarray:
        return self.data.xpos[self.obj_body].copy()

    def _finger_contacts(self) -> set:
        d = self.data
        touching = set()
        objs = set(self.obj_geoms.tolist())
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom1), int(c.geom2)
            if g1 in self.finger_geoms and g2 in objs:
                touching.add(self.finger_geoms[g1])
            elif g2 in self.finger_geoms and g1 in objs:
                touching.add(self.finger_geoms[g2])
        return touching

    def _preshape(self, opening: float) -> float:
        """Gripper command (always -1 or +1) holding the fingers near joint position ``opening``.

        The Panda gripper integrates the sign of the command (a quarter of its range per step) into
        its finger target; alternating around the wanted target keeps the fingers within ~5 mm
        while the demonstration's gripper actions stay binary, as policies are trained on."""
        if opening >= OPEN - 1e-6:
            return -1.0
        cur = float(self.env.sim_env.robots[0].gripper.current_action[0])  # +1 open .. -1 closed
        want = opening / (OPEN / 2) - 1.0
        return 1.0 if cur > want else -1.0

    def _finger_opening(self) -> float:
        m, d = self.model, self.data
        return float(sum(abs(d.qpos[m.jnt_qposadr[j]]) for j in self.finger_joints))

    def _target_xy(self) -> np.ndarray:
        se = self.env.sim_env
        if self.target_kind == "site":
            return self.data.site_xpos[self.model.site(self.target).id][:2].copy()
        return self.data.xpos[se.obj_body_id[self.target]][:2].copy()

    def _region_z(self):
        """(lower, upper) z bounds of an ``In`` site region as libero tests them."""
        se = self.env.sim_env
        site = se.object_sites_dict[self.target]
        sid = self.model.site(self.target).id
        pos = self.data.site_xpos[sid]
        size = np.abs(self.data.site_xmat[sid].reshape(3, 3) @ np.asarray(site.size, float))
        return pos[2] - size[2] - 0.01, pos[2] + size[2]

    # ------------------------------------------------------------------ planning
    def _plan_grasp(self) -> Grasp:
        self._obstacles()
        pts, zb, zt = self._obj_extent()
        xy = pts[:, :2]
        angles = np.deg2rad(np.arange(0, 180, 5))
        widths = np.array([np.ptp(xy @ np.array([np.cos(a), np.sin(a)])) for a in angles])
        if widths.min() <= MAX_GRASP_WIDTH:
            return self._plan_body_grasp(pts, zb, zt, angles, widths)
        return self._plan_rim_grasp(zt)

    def _obstacles(self) -> None:
        """Colliding geoms near the object (the object itself included, the robot not), as oriented
        boxes (a geom's local bounding box: exact for boxes, conservative for meshes), and planes."""
        m, d = self.model, self.data
        center = d.xpos[self.obj_body]
        boxes, planes = [], []
        for g in range(m.ngeom):
            if not self._collides(g) or int(m.body_rootid[m.geom_bodyid[g]]) in self._skip_roots:
                continue
            R = d.geom_xmat[g].reshape(3, 3)
            if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE:
                planes.append((d.geom_xpos[g].copy(), R[:, 2].copy()))
                continue
            aabb = m.geom_aabb[g]
            c = d.geom_xpos[g] + R @ aabb[:3]
            if np.linalg.norm(c[:2] - center[:2]) - np.linalg.norm(aabb[3:]) > 0.3:
                continue
            boxes.append((c, R.copy(), aabb[3:].copy()))
        self._obs_c = np.array([b[0] for b in boxes]).reshape(-1, 3)
        self._obs_R = np.array([b[1] for b in boxes]).reshape(-1, 3, 3)
        self._obs_h = np.array([b[2] for b in boxes]).reshape(-1, 3)
        self._planes = planes

    def _gripper_clearance(self, pos, R, opening: float = OPEN, sweep: float = APPROACH_BACK) -> float:
        """Least gap (m; < 0 = collision) between the gripper opened to ``opening``, swept from
        ``sweep`` before the grip pose (``pos``, ``R``) along its approach axis down to it, and the
        obstacles."""
        parts = gripper_parts(opening)
        back = np.array([0.0, 0.0, sweep / 2])
        c = np.array([pos + R @ (cl - back) for cl, _ in parts])  # (P, 3)
        h = np.array([hl + back for _, hl in parts])
        clear = np.inf
        n = len(self._obs_c)
        if n:
            P = len(parts)
            gaps = box_separation(
                np.repeat(c, n, 0),
                np.broadcast_to(R, (P * n, 3, 3)),
                np.repeat(h, n, 0),
                np.tile(self._obs_c, (P, 1)),
                np.tile(self._obs_R, (P, 1, 1)),
                np.tile(self._obs_h, (P, 1)),
            )
            clear = float(gaps.min())
        for p0, nrm in self._planes:
            corners = (c[:, None, :] + (self._SIGNS[None] * h[:, None, :]) @ R.T).reshape(-1, 3)
            clear = min(clear, float(((corners - p0) @ nrm).min()))
        return clear

    @staticmethod
    def _clearance_score(clear: float) -> float:
        """Clearance counts up to CLEARANCE_ENOUGH; a predicted collision weighs five-fold."""
        return min(clear, CLEARANCE_ENOUGH) if clear >= 0 else 5.0 * clear

    def _reach_penalty(self, p_xy) -> float:
        r = float(np.linalg.norm(np.asarray(p_xy) - self.base_xy))
        # mild preference for the nearer side, steep beyond comfortable reach (the arm gets close to
        # its stretched, singular pose there and stops following), and not too close to the base
        return 0.3 * max(0.0, r - COMFORT_REACH + 0.1) + 2.0 * max(0.0, r - COMFORT_REACH) + 2.0 * max(0.0, 0.25 - r)

    def _side_penalty(self, side: float) -> float:
        return sum(0.05 for s in self.failed_sides if abs(_wrap(side - s)) < np.deg2rad(40))

    def _yaw_cost(self, yaw: float) -> float:
        _, R = self._grip()
        cur = np.arctan2(R[1, 0], R[0, 0])
        dy = abs(_wrap(2 * (yaw - cur))) / 2  # finger axis is symmetric under pi
        return 0.004 * dy

    def _plan_body_grasp(self, pts, zb, zt, angles, widths) -> Grasp:
        xy = pts[:, :2]
        h = zt - zb
        # the support under the object (floor, table, whatever it stands on)
        support = self._ray_down(*(0.5 * (xy.min(0) + xy.max(0))), z0=zb - 1e-3, skip_roots=(self.obj_root,))
        support = zb if not np.isfinite(support) else support
        # pads at mid-height, but the hand must stay above the object's top (tall bottles and
        # cartons are taken just below their top) and the finger tips above the support
        z = max(zb + 0.5 * h, zt - HAND_ABOVE + 0.008, support + FINGER_BELOW - 0.001)
        z = min(z, zt - 0.006)
        best = None
        for a, w in zip(angles, widths):
            if w > MAX_GRASP_WIDTH:
                continue
            u = np.array([np.cos(a), np.sin(a)])
            proj = xy @ u
            v = np.array([-u[1], u[0]])
            projv = xy @ v
            center = u * 0.5 * (proj.min() + proj.max()) + v * 0.5 * (projv.min() + projv.max())
            clear = self._gripper_clearance(
                np.array([center[0], center[1], z]), Grasp(center, z, float(a), "body", 0.0, float(a)).rotation()
            )
            score = (
                self._clearance_score(clear)
                - 0.3 * max(0.0, w - 0.055)
                - self._reach_penalty(center)
                - self._side_penalty(a)
                - self._yaw_cost(a)
            )
            if best is None or score > best.score:
                best = Grasp(xy=center, z=float(z), yaw=float(a), kind="body", score=float(score), side=float(a))
        return best

    def _rim_segments(self, zt):
        """Candidate rim grasps: per colliding geom reaching the top (a wall segment) and grasp
        depth, (grip point, outward direction angle, wall flare angle, cost). Box walls give their
        exact plane; other geoms a vertical wall through their centre."""
        m, d = self.model, self.data
        center = d.xpos[self.obj_body]
        out = []
        for g in self.obj_geoms:
            c = self._corners([g])
            if c[:, 2].max() < zt - 0.01:
                continue
            cg = d.geom_xpos[g]
            radial = cg[:2] - center[:2]
            if np.linalg.norm(radial) < 0.02:
                continue
            A = d.geom_xmat[g].reshape(3, 3)
            if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX:
                size = m.geom_size[g]
                n = A[:, int(np.argmin(size))].copy()
                if np.dot(n[:2], radial) < 0:
                    n = -n
                nh = np.linalg.norm(n[:2])
                if nh < 0.5:  # not a wall (a lid or a floor)
                    continue
                u = n[:2] / nh
                tilt = float(np.arcsin(np.clip(-n[2], -0.5, 0.5)))
                t = np.array([u[0] * np.sin(tilt), u[1] * np.sin(tilt), np.cos(tilt)])
                ext = float(np.sum(np.abs(A.T @ t) * size))
            else:
                u = radial / np.linalg.norm(radial)
                tilt, t = 0.0, np.array([0.0, 0.0, 1.0])
                ext = float(c[:, 2].max() - cg[2])
            # grip points on the wall's mid-plane, at the preferred depth below its top edge and,
            # for tight spots (a bowl in a drawer), shallower
            for depth, cost in RIM_DEPTHS:
                out.append((cg + (ext - depth) * t, float(np.arctan2(u[1], u[0])), tilt, cost))
        return out

    def _plan_rim_grasp(self, zt) -> Grasp:
        center = self.data.xpos[self.obj_body][:2].copy()
        cands = self._rim_segments(zt)
        if not cands:  # no recognisable wall: a vertical pinch on a circle through the top geoms
            r_rim = 0.5 * MAX_GRASP_WIDTH
            cands = [
                (np.array([*(center + r_rim * np.array([np.cos(a), np.sin(a)])), zt - depth]), float(a), 0.0, cost)
                for a in np.deg2rad(np.arange(0, 360, 15))
                for depth, cost in RIM_DEPTHS
            ]
        # pinched at the rim the object swings about the finger axis: prefer carrying along it
        dt = self._target_xy() - center
        carry_dir = float(np.arctan2(dt[1], dt[0])) if np.linalg.norm(dt) > 0.03 else None
        best = None
        for p, side, wall_tilt, depth_cost in cands:
            align = abs(np.sin(side - carry_dir)) if carry_dir is not None else 0.0
            # the hand stays where it is relative to the object: check its reach at the target too
            reach = max(self._reach_penalty(p[:2]), self._reach_penalty(p[:2] + dt))
            base = -0.005 * align - reach - self._side_penalty(side) - self._yaw_cost(side) - depth_cost
            # pads parallel to a flared wall hold far better; upright fingers only where tilting
            # collides. In tight spots (a bowl in a drawer) the fingers come in half closed.
            tilts = RIM_TILTS if abs(wall_tilt) > 1e-3 else RIM_TILTS[-1:]
            options = sorted((ct + co, f * wall_tilt, opening) for f, ct in tilts for opening, co in RIM_OPENINGS)
            for cost, tilt, opening in options:
                R = Grasp(p[:2], p[2], side, "rim", 0.0, side, tilt).rotation()
                clear = self._gripper_clearance(p, R, opening)
                score = self._clearance_score(clear) + base - cost
                if best is None or score > best.score:
                    best = Grasp(
                        xy=p[:2].copy(),
                        z=float(p[2]),
                        yaw=side,
                        kind="rim",
                        score=float(score),
                        side=side,
                        tilt=tilt,
                        opening=opening,
                    )
                if clear >= CLEARANCE_ENOUGH:
                    break  # the costlier options of this grasp point cannot score higher
        return best

    def _plan(self) -> None:
        self.grasp = self._plan_grasp()
        g = self.grasp
        pos, _ = self._grip()
        _, zb, zt = self._obj_extent()
        self.pre = g.pregrasp(APPROACH_BACK)
        self.hover_z = float(self.pre[2])
        hand_top = self._corridor_top(pos[:2], self.pre[:2], HAND_HALF_LENGTH, skip_roots=(self.obj_root,))
        self.travel_z = max(self.hover_z, hand_top + FINGER_BELOW + 0.03)

    def _plan_carry(self) -> None:
        """Obstacle heights along the object's straight path to the target, and the release level."""
        pts, zb, zt = self._obj_extent()
        radius = 0.5 * float(np.max(np.ptp(pts[:, :2], axis=0))) + 0.015
        tgt = self._target_xy()
        p0 = self._obj_pos()[:2]
        length = float(np.linalg.norm(tgt - p0))
        n = max(2, int(length / 0.02) + 1)
        offs = [np.zeros(2)] + [
            radius * np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)
        ]
        s = np.linspace(0.0, 1.0, n)
        tops = np.array(
            [max(self._ray_down(*(p0 + si * (tgt - p0) + o), skip_roots=(self.obj_root,)) for o in offs) for si in s]
        )
        self.path = (p0, tgt, s, tops, radius / max(length, 1e-6))
        # where to release: the object's bottom about 1 cm above the surface under the target
        surface = self._ray_down(tgt[0], tgt[1], skip_roots=(self.obj_root,))
        self.surface_z = surface
        if self.relation == "in" and self.target_kind == "site":
            lo, hi = self._region_z()
            self.release_bottom = max(surface + 0.01, lo + 0.005)
            self.region_hi = hi
        else:
            self.release_bottom = surface + 0.01
            self.region_hi = None

    def _carry_bottom(self, obj_xy) -> float:
        """Height the object's bottom must keep from here to the target (obstacles still ahead + margin)."""
        p0, p1, s, tops, back = self.path
        d = p1 - p0
        s_cur = float(np.clip(np.dot(obj_xy - p0, d) / max(np.dot(d, d), 1e-12), 0.0, 1.0))
        ahead = tops[s >= s_cur - back]
        top = float(ahead.max()) if ahead.size else float(tops[-1])
        return max(top + CARRY_CLEARANCE, self.release_bottom + 0.02)

    # ------------------------------------------------------------------ control
    def _start_phase(self, phase: str) -> None:
        self.phase, self.t_phase = phase, 0
        self._q_prev = np.inf
        self._no_contact = False
        self._progress = (np.inf, 0)

    def _move(self, target, R_des, grip, cap=1.0) -> np.ndarray:
        """P-control of the grip site towards ``target`` and orientation ``R_des`` (finger axis
        symmetric: the nearer of R_des and R_des turned by pi about its approach axis)."""
        pos, R = self._grip()
        a = np.zeros(7)
        dp = (np.asarray(target, float) - pos) / POS_SCALE
        n = np.max(np.abs(dp))
        if n > cap:
            dp *= cap / n
        a[:3] = dp
        R_des = np.array(R_des, dtype=np.float64)
        if np.dot(R[:, 0], R_des[:, 0]) < 0:
            R_des[:, :2] *= -1.0
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, (R_des @ R.T).reshape(-1))
        aa = np.zeros(3)
        mujoco.mju_quat2Vel(aa, q, 1.0)
        r = aa / ROT_SCALE
        nr = np.max(np.abs(r))
        if nr > 1.0:
            r /= nr
        a[3:6] = r
        a[6] = grip
        return np.clip(a, -1.0, 1.0)

    @staticmethod
    def _rot_error(R, R_des) -> float:
        """Angle (rad) between the grip orientation and R_des, the finger axis taken as symmetric."""
        R_des = np.array(R_des, dtype=np.float64)
        if np.dot(R[:, 0], R_des[:, 0]) < 0:
            R_des[:, :2] *= -1.0
        c = (np.trace(R_des @ R.T) - 1.0) / 2.0
        return float(np.arccos(np.clip(c, -1.0, 1.0)))

    def _stalled(self, value: float, eps: float = 0.002, patience: int = 8) -> bool:
        """True when ``value`` (a distance to go) has not improved by ``eps`` for ``patience`` steps."""
        best, since = self._progress
        if value < best - eps:
            self._progress = (value, 0)
            return False
        self._progress = (best, since + 1)
        return since + 1 >= patience

    def _holding(self) -> bool:
        """The object still moves with the hand and a finger touches it (one step without contact
        is forgiven: contacts flicker while the object settles in the fingers)."""
        pos, _ = self._grip()
        dev = np.linalg.norm((self._obj_pos() - pos) - self.hold_offset)
        touching = len(self._finger_contacts()) >= 1
        lost_contact = not touching and self._no_contact
        self._no_contact = not touching
        return dev < 0.05 and not lost_contact

    def _regrasp(self) -> np.ndarray:
        self.regrasps += 1
        self._start_phase("backoff")
        return self.act(None)

    def act(self, obs=None) -> np.ndarray:
        self.t_phase += 1
        pos, R = self._grip()
        ph = self.phase
        if ph == "plan":
            self._plan()
            self._start_phase("approach")
            return self.act(obs)

        g = self.grasp
        Rg = g.rotation()
        if ph == "approach":
            # over to the pre-grasp pose at a safe height, then down to it
            pre = self.pre
            dxy = np.linalg.norm(pos[:2] - pre[:2])
            if dxy > 0.015:
                if pos[2] < self.travel_z - 0.03:  # rise first, drifting towards the grasp as we clear
                    frac = float(np.clip(1.0 - (self.travel_z - pos[2]) / 0.08, 0.0, 1.0))
                    target = np.array([*(pos[:2] + frac * (pre[:2] - pos[:2])), self.travel_z])
                else:
                    target = np.array([pre[0], pre[1], self.travel_z])
            else:
                target = pre
            near = np.linalg.norm(pos - pre) < 0.015 and self._rot_error(R, Rg) < 0.12
            if near or self.t_phase > 80:
                self._start_phase("descend")
            return self._move(target, Rg, self._preshape(g.opening))

        if ph == "descend":
            # straight along the approach axis into the grasp
            target = g.pos
            togo = float(np.linalg.norm(pos - target))
            if togo < 0.006 or (self.t_phase > 4 and pos[2] - g.z < 0.004):
                self._start_phase("close")
            elif self._stalled(togo) or self.t_phase > 50:
                if togo < 0.012:
                    self._start_phase("close")
                else:
                    self.failed_sides.append(g.side)
                    return self._regrasp()
            return self._move(target, Rg, self._preshape(g.opening), cap=1.0 if togo > 0.05 else 0.6)

        if ph == "close":
            target = np.array([g.xy[0], g.xy[1], g.z])
            q = self._finger_opening()
            settled = self.t_phase >= 6 and abs(q - self._q_prev) < 0.0004
            self._q_prev = q
            if settled or self.t_phase >= 14:
                self.hold_offset = self._obj_pos() - pos
                self.obj_z0 = self._obj_pos()[2]
                self.grip_z0 = pos[2]
                self._plan_carry()
                self._start_phase("lift")
            return self._move(target, Rg, 1.0, cap=0.5)

        if ph == "lift":
            obj = self._obj_pos()
            _, zb, _ = self._obj_extent()
            need = self._carry_bottom(obj[:2])
            target = np.array([g.xy[0], g.xy[1], pos[2] + need - zb + 0.005])
            lifted = pos[2] - self.grip_z0
            # a bowl held by its rim pivots on its far edge before it comes up: allow for that
            if lifted > 0.05 and (obj[2] - self.obj_z0) < 0.3 * lifted:
                self.failed_sides.append(g.side)
                return self._regrasp()
            if self.t_phase > 3 and not self._holding():
                self.failed_sides.append(g.side)
                return self._regrasp()
            if zb > need - 0.01 or self.t_phase > 60:
                self._start_phase("carry")
            return self._move(target, Rg, 1.0, cap=0.8)

        if ph == "carry":
            if not self._holding():
                return self._regrasp()
            obj = self._obj_pos()
            _, zb, _ = self._obj_extent()
            err = self._target_xy() - obj[:2]
            need = self._carry_bottom(obj[:2])
            target = np.array([pos[0] + err[0], pos[1] + err[1], pos[2] + need - zb])
            if np.linalg.norm(err) < 0.012 or self.t_phase > 150:
                self._start_phase("lower")
            return self._move(target, Rg, 1.0, cap=min(CARRY_CAP, 0.15 + 0.05 * self.t_phase))

        if ph == "lower":
            if not self._holding():
                return self._regrasp()
            err = self._target_xy() - self._obj_pos()[:2]
            _, zb, _ = self._obj_extent()
            togo = zb - self.release_bottom
            target = np.array([pos[0] + err[0], pos[1] + err[1], pos[2] - togo])
            inside = self.region_hi is not None and self._obj_pos()[2] < self.region_hi - 0.02
            if (togo < 0.004 or inside and togo < 0.03) and np.linalg.norm(err) < 0.015:
                self._start_phase("release")
            elif self._stalled(togo, patience=10) or self.t_phase > 60:
                self._start_phase("release")
            return self._move(target, Rg, 1.0, cap=0.7 if togo > 0.04 else 0.4)

        if ph == "release":
            if self.t_phase >= 6:
                self._start_phase("retreat")
            return self._move(pos, Rg, -1.0, cap=0.3)

        if ph == "retreat":
            target = np.array([pos[0], pos[1], max(pos[2], self.hover_z) + 0.05])
            if self.t_phase > 12:
                return self._regrasp()  # not (yet) a success: take it again
            return self._move(target, Rg, -1.0, cap=0.5)

        if ph == "backoff":
            # open and rise clear of the object, then plan again
            _, _, zt = self._obj_extent()
            target = np.array([pos[0], pos[1], max(zt + 0.05, pos[2])])
            if self.t_phase >= 6 and pos[2] > zt + 0.03 or self.t_phase > 25:
                self._start_phase("plan")
            return self._move(target, Rg, -1.0, cap=0.6)

        raise RuntimeError(f"unknown phase {ph!r}")
