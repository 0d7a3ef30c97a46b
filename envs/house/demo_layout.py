"""How the apartments' demonstration files look without a stored EnvSpec (:class:`envs.demo_layout.DemoLayout`):
older recordings of this project, recognised by their ``ego`` camera and 3-dim base actions."""

from __future__ import annotations

from typing import Any

from ..demo_layout import DemoLayout
from ..spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
from .config import HouseConfig


class HouseDemoLayout(DemoLayout):
    def recognizes(self, attrs: Any, prefixes: list[str], action_dim: int) -> bool:
        return "ego" in prefixes and action_dim == 3

    def implied_spec(
        self, family: str, cameras: list[CameraSpec], sensors: dict[str, ArraySpec], action_dim: int, state_dim: int
    ) -> EnvSpec:
        """The house env's spec (bounds: the env's default limits)."""
        c = HouseConfig()
        return EnvSpec(
            family="house",
            action=ActionSpec(
                (-c.max_forward_m, -c.max_left_m, -c.max_turn_rad),
                (c.max_forward_m, c.max_left_m, c.max_turn_rad),
                ("forward_m", "left_m", "yaw_rad"),
            ),
            state=ArraySpec((3,), "float64", ("x_m", "y_m", "yaw_rad")),
            cameras=tuple(cameras),
            sensors=sensors,
            info={"frame": "odometry: origin at the start pose on the floor, x forward, z up"},
        )


LAYOUT = HouseDemoLayout()
