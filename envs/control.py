"""Driving a kinematic mobile base towards waypoints: actions ``[forward_m, left_m, yaw_rad]``.

One control law for everything that steers a base: the house env's scripted expert and exploration
route, and the memory navigator (``vla.navigation``). A base is *holonomic* when it can move
sideways (``max_left > 0``); the action's translation happens before its turn (envs/ground_nav/agent.py).

:func:`step_towards`: a holonomic base turns on the spot while the target lies more than
``turn_in_place_rad`` off its heading, otherwise it translates straight at the target (never past
it, scaled into the limits) while turning towards it by at most ``max_turn``; a base without
sideways motion turns until it is within ``align_rad`` of the target's bearing, then drives forward
only. The callers differ in parameters only (the expert turns in place beyond 60 degrees and aligns
exactly, the navigator beyond 40 degrees, and aligns to 5 degrees).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from spatial_memory.geometry import wrap_angle


@dataclass(frozen=True)
class BaseLimits:
    """Per-step bounds (metres, radians) and the turning behaviour of :func:`step_towards`."""

    max_forward: float
    max_left: float
    max_turn: float
    turn_in_place_rad: float = math.radians(60.0)  # holonomic: turn on the spot when the target is further off
    align_rad: float = 1e-6  # no sideways motion: turn until the target's bearing is within this

    @property
    def holonomic(self) -> bool:
        return self.max_left > 1e-9

    @classmethod
    def from_config(cls, cfg, **kw) -> "BaseLimits":
        """From a config with ``max_forward_m``, ``max_left_m`` and ``max_turn_rad``."""
        return cls(cfg.max_forward_m, cfg.max_left_m, cfg.max_turn_rad, **kw)


def turn_towards(pose: np.ndarray, yaw: float, limits: BaseLimits) -> np.ndarray:
    """Rotate in place towards a world yaw (one step, clipped to ``max_turn``)."""
    err = wrap_angle(yaw - float(pose[2]))
    return np.array([0.0, 0.0, float(np.clip(err, -limits.max_turn, limits.max_turn))])


def step_towards(pose: np.ndarray, target_xy: np.ndarray, limits: BaseLimits) -> np.ndarray:
    """One action from ``pose`` ``[x, y, yaw]`` towards ``target_xy`` (never past it); see the module doc."""
    x, y, yaw = (float(v) for v in pose[:3])
    d = np.asarray(target_xy, dtype=np.float64)[:2] - np.array([x, y])
    dist = float(np.hypot(*d))
    if dist < 1e-9:
        return np.zeros(3)
    heading = math.atan2(d[1], d[0])
    err = wrap_angle(heading - yaw)
    turn = float(np.clip(err, -limits.max_turn, limits.max_turn))
    if abs(err) > (limits.turn_in_place_rad if limits.holonomic else limits.align_rad):
        return np.array([0.0, 0.0, turn])
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])
    if not limits.holonomic:  # forward only, never past the target
        local = np.array([min(max(local[0], 0.0), dist), 0.0])
    scale = 1.0
    if abs(local[0]) > limits.max_forward:
        scale = min(scale, limits.max_forward / abs(local[0]))
    if abs(local[1]) > limits.max_left:
        scale = min(scale, limits.max_left / abs(local[1]))
    local = local * scale
    return np.array([local[0], local[1], turn])


def follow(
    pose: np.ndarray, waypoints: list[np.ndarray], limits: BaseLimits, reached_m: float = 1e-4
) -> np.ndarray | None:
    """Action along a waypoint list (consumed in place as they are reached); None when none is left."""
    while waypoints and float(np.hypot(*(np.asarray(waypoints[0])[:2] - pose[:2]))) <= reached_m:
        waypoints.pop(0)
    if not waypoints:
        return None
    return step_towards(pose, waypoints[0], limits)
