"""Motion primitives: the proportional controller every skill moves with, stall detection, and the
binary gripper command that holds the fingers half open.

Actions are LIBERO's 7-dim OSC_POSE deltas in [-1, 1] (1 = 5 cm / 0.5 rad per step) with the
gripper as the last entry, always -1 (open) or +1 (close), as the official datasets have it.
"""

from __future__ import annotations

import mujoco
import numpy as np

from .geometry import OPEN, POS_SCALE, ROT_SCALE
from .sim import SimView


WRIST_MARGIN = 0.05  # rad: a turn that would take the wrist joint nearer its limit goes the other way
WRIST_TURN = 0.35  # rad: ... if it is at least this large (small corrections at the limit are left alone)


def _symmetric(R, R_des, wrist=None) -> np.ndarray:
    """R_des, or R_des turned by pi about its approach axis, whichever is nearer R (the two fingers
    are interchangeable); with ``wrist`` (``SimView.wrist()``), the farther one when the turn to the
    nearer would run the wrist joint into its limit (from there the hand stays where it is)."""
    R_des = np.array(R_des, dtype=np.float64)
    flip = R_des.copy()
    flip[:, :2] *= -1.0
    near, far = (R_des, flip) if np.dot(R[:, 0], R_des[:, 0]) >= 0 else (flip, R_des)
    if wrist is not None and _past_limit(R, near, wrist) and not _past_limit(R, far, wrist):
        return far
    return near


def _past_limit(R, R_des, wrist) -> bool:
    """Whether turning the hand from R to R_des takes the wrist joint past its range (less a margin)
    by a turn of at least WRIST_TURN: the turn's component about the joint's axis, added to the
    joint's position."""
    q, lo, hi, axis = wrist
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, (R_des @ R.T).reshape(-1))
    aa = np.zeros(3)
    mujoco.mju_quat2Vel(aa, quat, 1.0)
    turn = float(aa @ axis)
    if abs(turn) < WRIST_TURN:
        return False
    return q + turn < lo + WRIST_MARGIN or q + turn > hi - WRIST_MARGIN


def move(view: SimView, target, R_des, grip: float, cap: float = 1.0, symmetric: bool = True) -> np.ndarray:
    """P-control of the grip site towards ``target`` and orientation ``R_des``. The translation is
    scaled as a vector (its direction kept) to at most ``cap``; ``symmetric`` lets the finger axis
    point either way."""
    pos, R = view.grip()
    a = np.zeros(7)
    dp = (np.asarray(target, float) - pos) / POS_SCALE
    n = np.max(np.abs(dp))
    if n > cap:
        dp *= cap / n
    a[:3] = dp
    a[3:6] = rotation_action(R, _symmetric(R, R_des, view.wrist()) if symmetric else np.asarray(R_des, float))
    a[6] = grip
    return np.clip(a, -1.0, 1.0)


def rotation_action(R, R_des, cap: float = 1.0) -> np.ndarray:
    """Axis-angle action turning orientation ``R`` towards ``R_des`` (scaled to at most ``cap``)."""
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, (np.asarray(R_des, float) @ R.T).reshape(-1))
    aa = np.zeros(3)
    mujoco.mju_quat2Vel(aa, q, 1.0)
    r = aa / ROT_SCALE
    nr = np.max(np.abs(r))
    if nr > cap:
        r *= cap / nr
    return r


def rot_error(R, R_des, symmetric: bool = True) -> float:
    """Angle (rad) between the grip orientation and R_des (the finger axis symmetric by default)."""
    R_des = _symmetric(R, R_des) if symmetric else np.asarray(R_des, float)
    c = (np.trace(R_des @ R.T) - 1.0) / 2.0
    return float(np.arccos(np.clip(c, -1.0, 1.0)))


def via_travel(pos, pre, travel_z: float, near: float = 0.015, descending: bool = False) -> np.ndarray:
    """Waypoint towards the pre-grasp pose ``pre`` at a safe height: rise first (drifting towards it
    as the hand clears), over at ``travel_z``, then down to it once within ``near`` horizontally
    (``descending``: already on the way down, keep on it unless 3 x ``near`` off)."""
    pos, pre = np.asarray(pos, float), np.asarray(pre, float)
    if np.linalg.norm(pos[:2] - pre[:2]) <= (3 * near if descending else near):
        return pre
    if pos[2] < travel_z - 0.03:
        frac = float(np.clip(1.0 - (travel_z - pos[2]) / 0.08, 0.0, 1.0))
        return np.array([*(pos[:2] + frac * (pre[:2] - pos[:2])), travel_z])
    return np.array([pre[0], pre[1], travel_z])


def rotate_about(point, axis, angle: float, p, R) -> tuple[np.ndarray, np.ndarray]:
    """The pose (p, R) turned by ``angle`` about the line through ``point`` along ``axis``."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, axis, angle)
    Rz = np.zeros(9)
    mujoco.mju_quat2Mat(Rz, q)
    Rz = Rz.reshape(3, 3)
    return point + Rz @ (np.asarray(p, float) - point), Rz @ R


class Progress:
    """Stall detection: ``stalled(v)`` is True once a distance to go ``v`` has not improved by
    ``eps`` for ``patience`` calls."""

    def __init__(self) -> None:
        self.best, self.since = np.inf, 0

    def stalled(self, value: float, eps: float = 0.002, patience: int = 8) -> bool:
        if value < self.best - eps:
            self.best, self.since = value, 0
            return False
        self.since += 1
        return self.since >= patience


def preshape(view: SimView, opening: float) -> float:
    """Gripper command (always -1 or +1) holding the fingers near joint position ``opening``.

    The Panda gripper integrates the sign of the command (a quarter of its range per step) into
    its finger target; alternating around the wanted target keeps the fingers within ~5 mm while
    the demonstration's gripper actions stay binary, as policies are trained on."""
    if opening >= OPEN - 1e-6:
        return -1.0
    want = opening / (OPEN / 2) - 1.0
    return 1.0 if view.gripper_command() > want else -1.0
