"""Turning a planned polyline into actions ``[forward_m, left_m, yaw_rad]`` within the action limits.

Used by the scripted expert and by the exploration route, so both move the same way: turn in place
while the next waypoint is far off to the side, otherwise translate exactly along the current
segment (the base is holonomic, the translation happens before the turn) while turning towards
it at most ``max_turn`` per step. Because every translation stays on a segment the planner
checked, the agent never bumps into anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .agent import wrap_angle


@dataclass(frozen=True)
class Limits:
    max_forward: float
    max_left: float
    max_turn: float  # radians
    turn_in_place_rad: float = math.radians(60.0)

    @classmethod
    def from_config(cls, cfg) -> "Limits":
        return cls(cfg.max_forward_m, cfg.max_left_m, cfg.max_turn_rad)


def turn_towards(pose: np.ndarray, yaw: float, limits: Limits) -> np.ndarray:
    """Rotate in place towards a world yaw (one step, clipped)."""
    err = wrap_angle(yaw - float(pose[2]))
    return np.array([0.0, 0.0, float(np.clip(err, -limits.max_turn, limits.max_turn))])


def step_towards(pose: np.ndarray, target_xy: np.ndarray, limits: Limits) -> np.ndarray:
    """One action moving straight towards ``target_xy`` (never past it)."""
    x, y, yaw = (float(v) for v in pose)
    d = np.asarray(target_xy, dtype=np.float64)[:2] - np.array([x, y])
    dist = float(np.hypot(*d))
    if dist < 1e-9:
        return np.zeros(3)
    heading = math.atan2(d[1], d[0])
    err = wrap_angle(heading - yaw)
    threshold = limits.turn_in_place_rad if limits.max_left > 1e-9 else 1e-6
    if abs(err) > threshold:
        return turn_towards(pose, heading, limits)
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])
    if limits.max_left <= 1e-9:  # non-holonomic base: it only moves when aligned (|err| <= 1e-6 rad)
        local[1] = 0.0
    scale = 1.0
    if abs(local[0]) > limits.max_forward:
        scale = min(scale, limits.max_forward / abs(local[0]))
    if abs(local[1]) > limits.max_left:
        scale = min(scale, limits.max_left / abs(local[1]))
    local *= scale
    turn = float(np.clip(err, -limits.max_turn, limits.max_turn))
    return np.array([local[0], local[1], turn])


def follow(pose: np.ndarray, waypoints: list[np.ndarray], limits: Limits, reached_m: float = 1e-4) -> np.ndarray | None:
    """Action along a waypoint list (consumed in place as they are reached); None when none is left."""
    while waypoints and float(np.hypot(*(np.asarray(waypoints[0])[:2] - pose[:2]))) <= reached_m:
        waypoints.pop(0)
    if not waypoints:
        return None
    return step_towards(pose, waypoints[0], limits)
