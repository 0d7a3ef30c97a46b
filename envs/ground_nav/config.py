"""The options every ground-navigation env config shares, and their checks (the apartments' and OmniGibson's
configs each hold these fields: camera pitch, image size, base limits, the success predicate, the start
distance)."""

from __future__ import annotations

from typing import Any, Callable


def check_ground_nav(c: Any, need: Callable[[bool, str], None]) -> None:
    """The checks every ground-navigation env config shares (camera pitch, image size, base limits,
    the success predicate, the start distance): the apartments' and OmniGibson's."""
    need(
        -60.0 <= c.camera_pitch_deg <= 60.0,
        f"camera_pitch_deg must be in [-60, 60], got {c.camera_pitch_deg}",
    )
    need(
        16 <= c.width <= 2048 and 16 <= c.height <= 2048,
        f"image size must be in [16, 2048], got {c.width}x{c.height}",
    )
    need(
        0 < c.max_forward_m <= 1.0 and 0 <= c.max_left_m <= 1.0,
        f"need 0 < max_forward_m <= 1 and 0 <= max_left_m <= 1, got {c.max_forward_m}, {c.max_left_m}",
    )
    need(0 < c.max_turn_deg <= 180.0, f"max_turn_deg must be in (0, 180], got {c.max_turn_deg}")
    need(
        c.success_radius_m > c.agent_radius + 0.2,
        f"success_radius_m={c.success_radius_m} is unreachable for agent_radius={c.agent_radius}",
    )
    need(
        0 < c.min_visible_fraction < 0.5,
        f"min_visible_fraction must be in (0, 0.5), got {c.min_visible_fraction}",
    )
    need(c.min_start_distance_m >= 0, f"min_start_distance_m must be >= 0, got {c.min_start_distance_m}")
