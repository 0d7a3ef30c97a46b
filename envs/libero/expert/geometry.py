"""Gripper geometry and the box-overlap test the grasp planner scores clearance with.

Frames: the *grip frame* is the Panda's grip site, x the finger (closing) axis, z the approach
axis (from the hand towards the finger tips). World z is up.
"""

from __future__ import annotations

from dataclasses import dataclass

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
HAND_BACK = 0.126  # ... and ends this far behind it, along the approach axis (where the wrist begins)
APPROACH_BACK = 0.08  # the fingers come in along their approach axis from this far before the grasp
MAX_GRASP_WIDTH = 0.070  # widest object taken across its body; wider ones are taken by the rim

# the wrist and forearm behind a level hand (links 6 and 7 of the Panda; link 6's collision mesh is
# centred 0.21 m behind the grip site), in the grip frame, centred on the approach axis (so the
# same for either finger direction): what a handle grasp's arm runs into (a mug standing behind
# the one it takes)
FOREARM_LO = np.array([-0.05, -0.05, -0.27])
FOREARM_HI = np.array([0.05, 0.05, -HAND_BACK])

SIGNS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
DOWN = np.array([0.0, 0.0, -1.0])


def _part(lo, hi):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return (lo + hi) / 2, (hi - lo) / 2


def gripper_parts(opening: float = OPEN):
    """The gripper, fingers at joint position ``opening``, as boxes (centre, half extents) in the
    grip frame."""
    lo_f, hi_f = opening - FINGER_IN, opening + FINGER_OUT
    return (
        _part([lo_f, -FINGER_HALF_WIDTH, -0.049], [hi_f, FINGER_HALF_WIDTH, FINGER_BELOW]),
        _part([-hi_f, -FINGER_HALF_WIDTH, -0.049], [-lo_f, FINGER_HALF_WIDTH, FINGER_BELOW]),
        _part([-HAND_HALF_LENGTH, -0.031, -HAND_BACK], [HAND_HALF_LENGTH, 0.039, -HAND_ABOVE]),  # hand
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


def grip_rotation(yaw: float, tilt: float = 0.0) -> np.ndarray:
    """Grip-frame orientation with the fingers pointing down, the finger axis at ``yaw`` in the
    horizontal plane, the approach axis tilted by ``tilt`` towards +finger axis."""
    u = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    up = np.array([0.0, 0.0, 1.0])
    ct, st = np.cos(tilt), np.sin(tilt)
    x = u * ct - up * st
    z = -(up * ct + u * st)
    return np.column_stack([x, np.cross(z, x), z])


def frame_from_axes(finger: np.ndarray, approach: np.ndarray) -> np.ndarray:
    """Grip-frame orientation from a finger axis and an approach axis (orthogonalised)."""
    z = np.asarray(approach, float)
    z = z / np.linalg.norm(z)
    x = np.asarray(finger, float) - np.dot(finger, z) * z
    x = x / np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


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
    roll: float = 0.0  # turned about the finger axis by this much (the hand leans out of a container)
    R: np.ndarray | None = None  # an explicit orientation (handle grasps), overriding yaw/tilt/roll
    back: float = APPROACH_BACK  # the fingers come in along the approach axis from this far

    @property
    def pos(self) -> np.ndarray:
        return np.array([self.xy[0], self.xy[1], self.z])

    def pregrasp(self, back: float) -> np.ndarray:
        """``back`` metres before the grasp along the approach axis (above it, outward when tilted)."""
        return self.pos - back * self.rotation()[:, 2]

    def rotation(self) -> np.ndarray:
        """Desired grip-site orientation: x = finger (closing) axis, z = approach (fingers point along +z)."""
        if self.R is not None:
            return self.R
        R = grip_rotation(self.yaw, self.tilt)
        if self.roll:
            c, s = np.cos(self.roll), np.sin(self.roll)
            R = R @ np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
        return R
