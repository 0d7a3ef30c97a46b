"""Laying a tall object on its side while it is carried (a ketchup bottle into a shallow drawer, a
book onto a shelf with a roof just above its top).

A tall object is taken from above near its top (a ``body`` grasp, fingers across its thinnest
side). When it cannot go where it must standing -- LIBERO's ``In`` wants the object's origin
inside the region's box, and a standing bottle's origin is above a drawer's rim; a roof over a
shelf leaves no room for the hand above a book's top -- the hand turns about the vertical until
its finger axis is across the direction the object will lie along, then pitches about the finger
axis until it is level: the object's long axis then points away from the hand, horizontally, its
width upright. It is lowered and let go like that (into a roofed container: slid in, the hand
staying outside the opening behind it).
"""

from __future__ import annotations

import numpy as np

from .geometry import frame_from_axes
from .grasp import forearm_clearance, reach_penalty
from .sim import SimView

TALL = 1.0  # an object this many times taller than its widest horizontal extent is laid down
ROOF_SPARE = 0.03  # m: standing, the object's top must clear the roof by this (the hand is above it)
RIM_SPARE = 0.01  # m: standing, the object's origin must be this far under an open region's top
# m between a laid object's leading end and a roofed container's opening where it is lowered (the
# object trails 10-15 cm behind it there, over what stands in front of the opening: keep it short)
LAY_STAGE_GAP = 0.0
LAY_ARM_RADIUS = 0.7  # m around the target: obstacles the forearm is checked against (it trails the object)
LAY_TURNS = np.deg2rad([0.0, 20.0, -20.0, 40.0, -40.0, 60.0, -60.0])  # lay directions tried


def lay_needed(view: SimView, obj_body: int, obj_root: int, pts, placement, relation: str, cover) -> bool:
    """Whether the object must be laid down to be placed ``relation`` the target: it is tall, and
    standing it does not fit (its origin above an ``In`` region's top, or its top too near a roof)."""
    if relation != "in" or placement.kind != "site":
        return False
    height = float(np.ptp(pts[:, 2]))
    if height < TALL * float(np.max(np.ptp(pts[:, :2], axis=0))):
        return False
    zb = float(pts[:, 2].min())
    origin_up = float(view.body_pos(obj_body)[2]) - zb  # origin above the object's bottom
    bottom, hi = placement.release_level(obj_root)
    if hi is not None and bottom + origin_up > hi - RIM_SPARE:
        return True
    if cover is not None:
        T = placement.xy()
        dist, g = view.ray([T[0], T[1], bottom], [0.0, 0.0, 1.0], skip_roots=(obj_root,))
        return g >= 0 and dist < height + ROOF_SPARE
    return False


def lay_direction(view: SimView, obj_body: int, obj_root: int, pts, placement, cover) -> np.ndarray:
    """Horizontal direction (unit xy) the laid object points along, away from the hand: into a
    roofed container through its opening, else across the way from the robot's base to the target
    (outwards, to the target's side of the robot), or turned from there by
    up to 60 degrees where the forearm behind the level hand is clearer of the scene at the
    release (books stand behind the hand on the table)."""
    T = np.asarray(placement.xy(), float)
    if cover is not None:
        d0 = -np.asarray(cover[0], float)
    else:
        # across the way from the base to the target, outwards (pointing away from the base, level,
        # the hand stopped turning a third of the way: the wrist's range)
        u = (T - view.base_xy) / max(np.linalg.norm(T - view.base_xy), 1e-9)
        d0 = np.array([-u[1], u[0]]) * (1.0 if T[1] >= view.base_xy[1] else -1.0)
    zt = float(pts[:, 2].max())
    reach = max(zt - float(view.body_pos(obj_body)[2]) - 0.015, 0.0)  # grip to origin, laid
    bottom, _ = placement.release_level(obj_root)
    grip_z = bottom + 0.5 * float(np.max(np.ptp(pts[:, :2], axis=0)))  # the object's width upright
    obstacles = view.obstacles(np.array([*T, grip_z]), skip_roots=(obj_root,), radius=LAY_ARM_RADIUS)
    best, best_score = d0, -np.inf
    for k, a in enumerate(LAY_TURNS):
        c, s_ = np.cos(a), np.sin(a)
        d = np.array([c * d0[0] - s_ * d0[1], s_ * d0[0] + c * d0[1]])
        R = frame_from_axes(np.array([-d[1], d[0], 0.0]), np.array([d[0], d[1], 0.0]))
        grip = np.array([*(T - reach * d), grip_z])
        clear = forearm_clearance(obstacles, grip, R, lift=0.1)
        if cover is not None:  # and where it is lowered, in front of the opening
            stage = grip + np.array([*((cover[1] + LAY_STAGE_GAP) * np.asarray(cover[0], float)), 0.0])
            clear = min(clear, forearm_clearance(obstacles, stage, R, lift=0.1))
        score = min(clear, 0.02) - 0.01 * abs(a) - reach_penalty(view.base_xy, grip[:2])
        if score > best_score:
            best, best_score = d, score
    return best


def turned_for_lay(R, d) -> np.ndarray:
    """The hand still pointing down, turned about the vertical so its finger axis is across ``d``
    (whichever of the two finger directions is nearer)."""
    x = np.array([-d[1], d[0], 0.0])
    if float(x @ R[:, 0]) < 0:
        x = -x
    return frame_from_axes(x, np.array([0.0, 0.0, -1.0]))


def laid(R, d) -> np.ndarray:
    """From a hand pointing down with its finger axis across ``d``: pitched about the finger axis
    until the approach axis (from the hand to the finger tips) points along ``d``, level."""
    x = np.array([R[0, 0], R[1, 0], 0.0])
    return frame_from_axes(x, np.array([d[0], d[1], 0.0]))
