"""Grasp planning for movable objects, scored by the gripper's clearance against the scene.

* objects narrow enough for the open fingers (<= 7 cm across some horizontal direction) are taken
  at their centre across their narrowest direction, fingers pointing down, the hand above the
  object's top (``body`` grasps);
* wider ones (bowls, mugs) by the rim, one finger inside and one outside, tilted to lie flat on a
  flared wall (pinched upright, a bowl slowly turns out of the gripper) (``rim`` grasps);
* a mug that goes under a roof (into a microwave) also by its handle, the hand level or pitched
  down from behind it, so the hand stays outside while the mug goes in (``handle`` grasps; their
  forearm is checked too: a second mug often stands behind the handle).

Candidates (side, tilt, depth, finger opening) are scored by the clearance of the gripper, modelled
as boxes swept along its approach, against every collision geom nearby (separating-axis test), by
reach from the base (the arm stops following near full stretch) and by how well the carry
direction suits the pinch.
"""

from __future__ import annotations

import mujoco
import numpy as np

from spatial_memory.geometry import wrap_angle

from .geometry import (
    APPROACH_BACK,
    FINGER_BELOW,
    FOREARM_HI,
    FOREARM_LO,
    HAND_ABOVE,
    MAX_GRASP_WIDTH,
    OPEN,
    SIGNS,
    Grasp,
    box_separation,
    frame_from_axes,
    gripper_parts,
)
from .sim import Obstacles, SimView

# grasp scores are in metres of clearance: clearance counts up to CLEARANCE_ENOUGH, costs subtract
CLEARANCE_ENOUGH = 0.01
# rim grasps: fingers tilted by this fraction of the wall's flare, cost. The pads then lie flat on
# the wall; upright they touch it by an edge and the bowl slowly turns out of the pinch.
RIM_TILTS = ((1.0, 0.0), (0.6, 0.004), (0.3, 0.012), (0.0, 0.03))
RIM_DEPTHS = ((0.018, 0.0), (0.011, 0.006), (0.026, 0.008))  # rim grasps: grip site below the rim's top, cost
# rim grasps under an overhang (a bowl next to an open drawer): the hand leans by this much more
# (out > 0, in < 0) than the wall's flare (rad), cost; tried after every upright-to-flat tilt
RIM_LEANS = ((0.25, 0.04), (-0.25, 0.04), (0.45, 0.05), (-0.45, 0.05))
RIM_OPENINGS = ((OPEN, 0.0), (0.026, 0.002), (0.018, 0.004))  # finger opening on the way in, cost
RIM_WALL_MIN = 0.5  # a box whose normal is at least this horizontal is a wall, not a lid or a floor
# rim grasps for containers with a roof (a microwave): turned about the finger axis so the hand
# stays out of the container while the object goes in (rad), cost
RIM_ROLLS = ((0.4, 0.01), (-0.4, 0.01), (0.8, 0.02), (-0.8, 0.02), (1.1, 0.03), (-1.1, 0.03))
HANDLE_COST = 0.005  # handle grasps are for where a rim grasp does not fit
HANDLE_WRIST = 0.13  # m from the grip site back to the wrist of a level hand
HANDLE_WRIST_REACH = 0.58  # m from the base: farther, a level hand low over the table is near full stretch
HANDLE_BACK = 0.05  # m the fingers come in from, level, before a handle (things stand behind it)
# handle grasps: the approach pitched down by this much (rad), cost: the wrist and forearm then pass
# above what stands behind the handle (a second mug), not into it
HANDLE_PITCHES = ((0.0, 0.0), (0.35, 0.002), (0.6, 0.004))
ARM_RADIUS = 0.4  # m around the handle: obstacles the forearm is checked against
HANDLE_TURNS = np.deg2rad([0.0, 20.0, -20.0, 40.0, -40.0])  # handle grasps: approach turned from the radial
# bar grasps (a pan's handle): bars at least this long, at most this wide across; grip points at
# these fractions of the half length from the bar's centre; cost per metre from the object's centre
BAR_MIN_LENGTH = 0.06
BAR_MAX_WIDTH = 0.045
BAR_POINTS = (-0.6, -0.3, 0.0, 0.3, 0.6)
BAR_OFFSET_COST = 0.05
COMFORT_REACH = 0.72  # m from the robot base (horizontal) beyond which grasp points are penalised


def clearance(obstacles: Obstacles, pos, R, opening: float = OPEN, sweep: float = APPROACH_BACK) -> float:
    """Least gap (m; < 0 = collision) between the gripper opened to ``opening``, swept from
    ``sweep`` before the grip pose (``pos``, ``R``) along its approach axis down to it, and the
    obstacles."""
    parts = gripper_parts(opening)
    back = np.array([0.0, 0.0, sweep / 2])
    c = np.array([pos + R @ (cl - back) for cl, _ in parts])  # (P, 3)
    h = np.array([hl + back for _, hl in parts])
    clear = np.inf
    n = len(obstacles.c)
    if n:
        P = len(parts)
        gaps = box_separation(
            np.repeat(c, n, 0),
            np.broadcast_to(R, (P * n, 3, 3)),
            np.repeat(h, n, 0),
            np.tile(obstacles.c, (P, 1)),
            np.tile(obstacles.R, (P, 1, 1)),
            np.tile(obstacles.h, (P, 1)),
        )
        clear = float(gaps.min())
    for p0, nrm in obstacles.planes:
        corners = (c[:, None, :] + (SIGNS[None] * h[:, None, :]) @ R.T).reshape(-1, 3)
        clear = min(clear, float(((corners - p0) @ nrm).min()))
    return clear


def forearm_clearance(obstacles: Obstacles, pos, R, lift: float = 0.1) -> float:
    """Least gap between the forearm behind a handle grasp's hand at (``pos``, ``R``), swept
    ``lift`` up from there (it comes down to it), and the obstacles' boxes."""
    if not len(obstacles.c):
        return np.inf
    c = pos + R @ (0.5 * (FOREARM_LO + FOREARM_HI)) + np.array([0.0, 0.0, lift / 2])
    corners = (SIGNS * (0.5 * (FOREARM_HI - FOREARM_LO))) @ R.T  # its world AABB, grown upwards
    h = np.abs(corners).max(0) + np.array([0.0, 0.0, lift / 2])
    gaps = box_separation(c, np.eye(3), h, obstacles.c, obstacles.R, obstacles.h)
    return float(gaps.min())


def clearance_score(clear: float) -> float:
    """Clearance counts up to CLEARANCE_ENOUGH; a predicted collision weighs five-fold."""
    return min(clear, CLEARANCE_ENOUGH) if clear >= 0 else 5.0 * clear


def reach_penalty(base_xy, p_xy) -> float:
    r = float(np.linalg.norm(np.asarray(p_xy) - base_xy))
    # mild preference for the nearer side, steep beyond comfortable reach (the arm gets close to
    # its stretched, singular pose there and stops following), and not too close to the base
    return 0.3 * max(0.0, r - COMFORT_REACH + 0.1) + 2.0 * max(0.0, r - COMFORT_REACH) + 2.0 * max(0.0, 0.25 - r)


class GraspPlanner:
    """Plans a grasp of one movable object (its root body and colliding geoms)."""

    def __init__(self, view: SimView, body: int) -> None:
        self.view = view
        self.body = body
        self.root = view.root(body)
        self.geoms = view.colliding_geoms(self.root)
        self.failed_sides: list[float] = []

    def extent(self):
        pts = self.view.corners(self.geoms)
        return pts, pts[:, 2].min(), pts[:, 2].max()

    def plan(self, target_xy, release=None) -> Grasp:
        """The best grasp for carrying the object towards ``target_xy``. ``release``: (offset from the
        object's position to where it is let go, obstacles there) -- the gripper must fit there too
        (inside a microwave), and rim grasps may roll about the finger axis to lean out."""
        self.obstacles = self.view.obstacles(self.view.data.xpos[self.body], skip_roots=())
        self.release = release
        pts, zb, zt = self.extent()
        xy = pts[:, :2]
        angles = np.deg2rad(np.arange(0, 180, 5))
        widths = np.array([np.ptp(xy @ np.array([np.cos(a), np.sin(a)])) for a in angles])
        if widths.min() <= MAX_GRASP_WIDTH:
            return self._body_grasp(pts, zb, zt, angles, widths)
        best = self._rim_grasp(zt, target_xy)
        if release is not None:
            # under a roof a hand over the object hardly fits: a handle held from the side keeps
            # the hand level with it (the mug into the microwave), where the arm can get there
            handle = self._handle_grasp(pts, zb, zt)
            if handle is not None and (best is None or handle.score > best.score):
                best = handle
        return best

    def _clearance(self, g: Grasp) -> float:
        R = g.rotation()
        clear = clearance(self.obstacles, g.pos, R, g.opening, sweep=g.back)
        if self.release is not None:  # and where the object is let go (fingers closed on it)
            offset, obstacles = self.release
            clear = min(clear, clearance(obstacles, g.pos + offset, R, 0.5 * g.opening, sweep=0.0))
        return clear

    # ------------------------------------------------------------------ costs
    def _side_penalty(self, side: float) -> float:
        return sum(0.05 for s in self.failed_sides if abs(wrap_angle(side - s)) < np.deg2rad(40))

    def _yaw_cost(self, yaw: float) -> float:
        _, R = self.view.grip()
        cur = np.arctan2(R[1, 0], R[0, 0])
        dy = abs(wrap_angle(2 * (yaw - cur))) / 2  # finger axis is symmetric under pi
        return 0.004 * dy

    def _reach(self, p_xy) -> float:
        return reach_penalty(self.view.base_xy, p_xy)

    # ------------------------------------------------------------------ body grasps
    def _body_grasp(self, pts, zb, zt, angles, widths) -> Grasp:
        xy = pts[:, :2]
        h = zt - zb
        # the support under the object (floor, table, whatever it stands on)
        support = self.view.ray_down(*(0.5 * (xy.min(0) + xy.max(0))), z0=zb - 1e-3, skip_roots=(self.root,))
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
            clear = self._clearance(Grasp(center, float(z), float(a), "body", 0.0, float(a)))
            score = (
                clearance_score(clear)
                - 0.3 * max(0.0, w - 0.055)
                - self._reach(center)
                - self._side_penalty(a)
                - self._yaw_cost(a)
            )
            if best is None or score > best.score:
                best = Grasp(xy=center, z=float(z), yaw=float(a), kind="body", score=float(score), side=float(a))
        return best

    # ------------------------------------------------------------------ handle grasps
    def _handle_grasp(self, pts, zb, zt) -> Grasp | None:
        """A mug's handle, held from outside: the fingers horizontal, pointing at the body, on either
        side of the handle's outer bar. The handle is the geoms standing out of the body's circle."""
        view = self.view
        cs = np.array([view.corners([g]).mean(0) for g in self.geoms])
        top = cs[:, 2] > zb + 0.6 * (zt - zb)
        axis = np.median(cs[top, :2], axis=0) if top.sum() >= 3 else cs[:, :2].mean(0)
        r = np.linalg.norm(cs[:, :2] - axis, axis=1)
        body_r = float(np.median(r[top])) if top.sum() >= 3 else float(np.median(r))
        out = r > body_r + 0.012
        if out.sum() < 1:
            return None
        bar_i = int(np.argmax(np.where(out, r, -np.inf)))
        bar = view.corners([self.geoms[bar_i]])
        centre = bar.mean(0)
        u = centre[:2] - axis
        u = u / np.linalg.norm(u)  # from the body out to the handle
        outer = float(np.max((bar[:, :2] - axis) @ u))
        grip = np.array([*(axis + (outer - 0.004) * u), centre[2]])
        best = None
        # the arm behind a level hand reaches farther back than the hand's own obstacles go
        arm_obstacles = view.obstacles(grip, skip_roots=(), radius=ARM_RADIUS)
        for pitch, pitch_cost in HANDLE_PITCHES:  # level, or from above behind the handle
            for k, turn in enumerate(HANDLE_TURNS):  # straight at the body, or from a little aside
                c, s_ = np.cos(turn), np.sin(turn)
                v = np.array([c * u[0] - s_ * u[1], s_ * u[0] + c * u[1]])
                approach = np.array([-v[0] * np.cos(pitch), -v[1] * np.cos(pitch), -np.sin(pitch)])
                # a level hand reaches less far than one pointing down: the wrist must be in reach too
                wrist = grip[:2] - HANDLE_WRIST * approach[:2]
                far = float(np.linalg.norm(wrist - self.view.base_xy)) - HANDLE_WRIST_REACH
                reach = self._reach(grip[:2]) + 0.5 * max(0.0, far)
                # the forearm box is centred on the approach axis: the same for either finger direction
                R = frame_from_axes(np.array([-v[1], v[0], 0.0]), approach)
                arm = forearm_clearance(arm_obstacles, grip - HANDLE_BACK * approach, R)
                for flip in (1.0, -1.0):
                    R = frame_from_axes(flip * np.array([-v[1], v[0], 0.0]), approach)
                    g = Grasp(grip[:2].copy(), float(grip[2]), float(np.arctan2(v[1], v[0])), "handle", 0.0, 0.0, R=R)
                    g.back = HANDLE_BACK
                    clear = min(self._clearance(g), arm)
                    score = clearance_score(clear) - reach - 0.002 * k - HANDLE_COST - pitch_cost
                    if best is None or score > best.score:
                        g.score = float(score)
                        best = g
        return best

    # ------------------------------------------------------------------ bar grasps
    def _bar_grasp(self, zt) -> Grasp | None:
        """A wide object whose top is a bar (a frying pan's handle: its walls are lower): pinched
        across the bar, fingers down, at points along it; the nearer the object's centre the less
        it swings. None when no geom reaching the top is a bar narrow enough for the fingers."""
        view = self.view
        centre = view.data.xpos[self.body]
        support = view.ray_down(*centre[:2], z0=float(self.extent()[1]) - 1e-3, skip_roots=(self.root,))
        support = support if np.isfinite(support) else float(self.extent()[1])
        best = None
        for geom in self.geoms:
            c, R, h = view.geom_box(geom)
            k = int(np.argmax(h))
            axis = R[:, k] * h[k]  # centre to the bar's end
            if np.linalg.norm(axis[:2]) < BAR_MIN_LENGTH / 2 or float(view.corners([geom])[:, 2].max()) < zt - 0.01:
                continue
            n = np.array([-axis[1], axis[0], 0.0]) / np.linalg.norm(axis[:2])  # across the bar
            width = 2.0 * float(np.sum(np.abs(R.T @ n) * h))
            if width > BAR_MAX_WIDTH:
                continue
            thick = float(np.sum(np.abs(np.delete(R[2], k)) * np.delete(h, k)))  # half height across the bar
            yaw = float(np.arctan2(n[1], n[0]))
            for s_ in BAR_POINTS:
                p = c + s_ * axis
                top = p[2] + thick
                z = min(max(p[2], top - HAND_ABOVE + 0.008, support + FINGER_BELOW + 0.002), top - 0.004)
                g = Grasp(p[:2].copy(), float(z), yaw, "body", 0.0, yaw)
                off = float(np.linalg.norm(p[:2] - centre[:2]))
                score = (
                    clearance_score(self._clearance(g))
                    - BAR_OFFSET_COST * off
                    - self._reach(p[:2])
                    - self._side_penalty(yaw)
                    - self._yaw_cost(yaw)
                )
                if best is None or score > best.score:
                    g.score = float(score)
                    best = g
        return best

    # ------------------------------------------------------------------ rim grasps
    def _rim_segments(self, zt):
        """Candidate rim grasps: per colliding geom reaching the top (a wall segment) and grasp
        depth, (grip point, outward direction angle, wall flare angle, cost). Box walls give their
        exact plane; other geoms a vertical wall through their centre."""
        m, d = self.view.model, self.view.data
        center = d.xpos[self.body]
        pts = self.view.corners(self.geoms)
        support = self.view.ray_down(*center[:2], z0=float(pts[:, 2].min()) - 1e-3, skip_roots=(self.root,))
        # the finger tips stay above the support (a plate's wall is lower than a finger reaches)
        z_min = (support if np.isfinite(support) else float(pts[:, 2].min())) + FINGER_BELOW + 0.003
        out = []
        for g in self.geoms:
            c = self.view.corners([g])
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
                if nh < RIM_WALL_MIN:  # not a wall (a lid or a floor)
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
                p = cg + (ext - depth) * t
                if p[2] < z_min:
                    p = cg + (ext - depth + (z_min - p[2]) / max(t[2], 0.5)) * t
                out.append((p, float(np.arctan2(u[1], u[0])), tilt, cost))
        return out

    def _rim_grasp(self, zt, target_xy) -> Grasp:
        center = self.view.data.xpos[self.body][:2].copy()
        cands = self._rim_segments(zt)
        if not cands:  # no wall reaches the top: a bar that does (a pan's handle), else a circle
            bar = self._bar_grasp(zt)
            if bar is not None:
                return bar
            r_rim = 0.5 * MAX_GRASP_WIDTH
            cands = [
                (np.array([*(center + r_rim * np.array([np.cos(a), np.sin(a)])), zt - depth]), float(a), 0.0, cost)
                for a in np.deg2rad(np.arange(0, 360, 15))
                for depth, cost in RIM_DEPTHS
            ]
        # pinched at the rim the object swings about the finger axis: prefer carrying along it
        dt = np.asarray(target_xy) - center
        carry_dir = float(np.arctan2(dt[1], dt[0])) if np.linalg.norm(dt) > 0.03 else None
        best = None
        for p, side, wall_tilt, depth_cost in cands:
            align = abs(np.sin(side - carry_dir)) if carry_dir is not None else 0.0
            # the hand stays where it is relative to the object: check its reach at the target too
            reach = max(self._reach(p[:2]), self._reach(p[:2] + dt))
            base = -0.005 * align - reach - self._side_penalty(side) - self._yaw_cost(side) - depth_cost
            # pads parallel to a flared wall hold far better; upright fingers only where tilting
            # collides. In tight spots (a bowl in a drawer) the fingers come in half closed.
            tilts = RIM_TILTS if abs(wall_tilt) > 1e-3 else RIM_TILTS[-1:]
            options = sorted((ct + co, f * wall_tilt, opening, 0.0) for f, ct in tilts for opening, co in RIM_OPENINGS)
            options += [(cl, wall_tilt + lean, OPEN, 0.0) for lean, cl in RIM_LEANS]
            if self.release is not None:
                options += [(cr, wall_tilt, OPEN, roll) for roll, cr in RIM_ROLLS]
            for cost, tilt, opening, roll in options:
                g = Grasp(p[:2].copy(), float(p[2]), side, "rim", 0.0, side, tilt, opening, roll)
                clear = self._clearance(g)
                score = clearance_score(clear) + base - cost
                if best is None or score > best.score:
                    g.score = float(score)
                    best = g
                if clear >= CLEARANCE_ENOUGH:
                    break  # the costlier options of this grasp point cannot score higher
        return best
