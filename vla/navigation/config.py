"""``NavigatorConfig``: every knob of the memory navigator (metres, radians where named ``_rad``,
degrees ``_deg``); see docs/NAVIGATION.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from spatial_memory.queries import OccupancyBands
from vla_common.strict import from_dict

# Hits an obstacle-band voxel needs before the grid takes it for an obstacle, per perception profile
# (``min_obstacle_hits = 0`` leaves it to the profile): the ``harsh`` depth scatters single-hit voxels
# through free space, which the inflation turned into a lethal carpet around the base (docs/NAVIGATION.md).
OBSTACLE_HITS = {"gt": 1, "realistic": 1, "harsh": 3}
# Cells an 8-connected patch of obstacle cells needs before the grid keeps it, per perception profile
# (``min_obstacle_cells = 0`` leaves it to the profile): even with 3 hits the ``harsh`` depth leaves isolated
# specks of 1-5 cells on the free floor, and each one's lethal disc (0.3 m) closes corridors and doorways;
# walls and furniture are large patches (a small real obstacle the grid drops is left to the bump sensor).
# 10 on val (800000-800007, perception seeds 0 and 1): 3, 6, 10, 20 cells reached 4/8, 8/16, 10/16, 10/16.
OBSTACLE_CELLS = {"gt": 1, "realistic": 1, "harsh": 10}


@dataclass(frozen=True)
class NavigatorConfig:
    """Every knob of :class:`MemoryNavigator` (metres, radians where named ``_rad``, degrees ``_deg``)."""

    # map
    cell_m: float = 0.05  # 2D grid cell (best equal to the memory's voxel size)
    map_extent_m: float = 30.0  # the grid covers [-extent, extent]^2 around the odometry origin
    obstacle_band_m: tuple[float, float] = (0.1, 2.3)  # voxel centres in this height band are obstacles
    floor_max_z_m: float = 0.05  # voxel centres below this are floor
    min_obstacle_hits: int = 0  # hits an obstacle voxel needs; 0 = by the perception profile (OBSTACLE_HITS)
    min_obstacle_cells: int = 0  # cells an 8-connected obstacle patch needs; 0 = by the profile (OBSTACLE_CELLS)
    scan_max_m: float = 8.0  # free-space rays of the depth image, up to this range
    scan_margin_m: float = 0.1  # stop a free-space ray this short of the first obstacle pixel
    scan_col_stride: int = 4
    scan_row_stride: int = 2
    # costs (agent_radius_m: the base's radius; lethal_margin_m and inflation_m are added to it)
    agent_radius_m: float = 0.2
    lethal_margin_m: float = 0.1
    inflation_m: float = 0.2
    inflation_cost: float = 6.0
    comfort_m: float = 0.65  # clearance below which a cell costs up to clearance_cost extra
    clearance_cost: float = 1.5
    unknown_cost: float = 1.0  # extra cost per metre through unknown cells
    suspect_cost: float = 6.0  # ... and through unknown floor hidden below an obstacle at the bottom of a view
    relaxed_cost: float = (
        20.0  # nothing reachable: lethal cells with clearance >= agent_radius_m + relaxed_m[level-1] cost this
    )
    relaxed_m: tuple[float, float] = (0.05, 0.01)  # (level 1, level 2): squeezing through gaps the lethal margin closes
    bump_radius_m: float = 0.04  # a bump forbids a disc this big just ahead of where the base stopped
    probe_m: float = 0.05  # after a bump, probe moves this long fanning out around the blocked direction (0 = off)
    max_bumps: int = 8  # bumps on one goal before it is given up
    # exploration
    initial_turns: int = -1  # turns on the spot at the start (-1: enough for a full circle)
    min_frontier_cells: int = 6
    frontier_reach_m: float = 0.9  # drive to a cell within this distance of the frontier
    frontier_gain_m: float = 0.4  # score bonus per metre of frontier (capped at 3 m)
    turn_cost_m: float = 0.6  # score penalty for a frontier straight behind (linear in the bearing)
    switch_margin_m: float = 1.0  # hysteresis: a new frontier must be this much better
    blacklist_radius_m: float = 0.6
    # goal (target object)
    min_target_points: int = 3  # object sample points before the target counts as localised
    approach_m: float = 0.7  # goal cells within this horizontal distance of the target's box
    approach_max_m: float = 0.9  # fallback when no goal cell within approach_m sees the target
    success_radius_m: float = 1.0  # own done test: distance to the box ...
    min_visible_fraction: float = 0.001  # ... and the target's share of the ego image
    fov_margin_deg: float = 5.0
    # control
    max_forward_m: float = 0.25  # replaced by the action space's bounds (set_action_limits)
    max_left_m: float = 0.25
    max_turn_rad: float = math.radians(30.0)
    turn_in_place_deg: float = 40.0  # translate only when the path heading is within this of the view
    lookahead_m: float = 1.0
    goal_tolerance_m: float = 0.08
    face_tolerance_deg: float = 4.0
    replan_every: int = 5
    stuck_steps: int = 30  # no progress: less than stuck_distance_m net motion over this many steps
    stuck_distance_m: float = 0.3
    resume_after_done: int = (
        5  # still asked to act this many steps after "done": our estimate was wrong, go closer (0 = stay)
    )
    unseen_give_up: int = 0  # goal cells near the target from which, facing it, it was not detected before
    # the object is given up as a false detection (0 = never: try cells until the goal budget runs out)
    # the search for a category the memory does not hold (vla/navigation/confusion.py)
    confusions: str | None = None  # a learned confusion model (JSON): objects labelled as a class the target
    # is taken for become candidates (None = only objects labelled as the target)
    confusion_min_p: float = 0.1  # ... those with P(target | label) at least this
    confusion_when: str = "explored"  # "explored": once no frontier is left; "always": whenever no object
    # labelled as the target is left
    confusion_give_up: int = 2  # "done" this many times at such an object and the episode went on: it is not
    # the target, try the next (an object of the target's own label is approached ever closer instead)

    def __post_init__(self) -> None:
        if not (self.cell_m > 0 and self.map_extent_m > 4 * self.cell_m):
            raise ValueError(
                "NavigatorConfig needs cell_m > 0 and a map extent of several cells, "
                f"got {self.cell_m}, {self.map_extent_m}"
            )
        lo, hi = self.obstacle_band_m
        if not lo < hi or self.floor_max_z_m > lo:
            raise ValueError(
                "NavigatorConfig needs floor_max_z_m <= obstacle_band_m[0] < obstacle_band_m[1], "
                f"got {self.floor_max_z_m}, {self.obstacle_band_m}"
            )
        if self.min_obstacle_hits < 0:
            raise ValueError(
                f"NavigatorConfig.min_obstacle_hits must be >= 0 (0 = by perception), got {self.min_obstacle_hits}"
            )
        if self.min_obstacle_cells < 0:
            raise ValueError(
                f"NavigatorConfig.min_obstacle_cells must be >= 0 (0 = by perception), got {self.min_obstacle_cells}"
            )
        if self.unseen_give_up < 0:
            raise ValueError(f"NavigatorConfig.unseen_give_up must be >= 0 (0 = never), got {self.unseen_give_up}")
        if self.confusion_give_up < 1:
            raise ValueError(f"NavigatorConfig.confusion_give_up must be >= 1, got {self.confusion_give_up}")
        if not 0.0 < self.confusion_min_p <= 1.0:
            raise ValueError(f"NavigatorConfig.confusion_min_p must be in (0, 1], got {self.confusion_min_p}")
        if self.confusion_when not in ("explored", "always"):
            raise ValueError(
                f"NavigatorConfig.confusion_when must be 'explored' or 'always', got {self.confusion_when!r}"
            )
        if self.approach_max_m < self.approach_m or self.approach_m <= 0:
            raise ValueError("NavigatorConfig needs 0 < approach_m <= approach_max_m")
        object.__setattr__(self, "obstacle_band_m", (float(lo), float(hi)))
        object.__setattr__(self, "relaxed_m", tuple(float(m) for m in self.relaxed_m))
        if len(self.relaxed_m) != 2:
            raise ValueError(f"NavigatorConfig.relaxed_m needs two clearances (level 1, level 2), got {self.relaxed_m}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "NavigatorConfig":
        return from_dict(cls, d, "navigator")

    def for_perception(self, profile: str) -> "NavigatorConfig":
        """This config with what it leaves to the perception profile filled in (``min_obstacle_hits = 0``:
        :data:`OBSTACLE_HITS`, ``min_obstacle_cells = 0``: :data:`OBSTACLE_CELLS`, 1 for a profile not
        listed); values set explicitly stay."""
        hits = self.min_obstacle_hits or OBSTACLE_HITS.get(profile, 1)
        cells = self.min_obstacle_cells or OBSTACLE_CELLS.get(profile, 1)
        return replace(self, min_obstacle_hits=hits, min_obstacle_cells=cells)

    @property
    def occupancy_bands(self) -> OccupancyBands:
        """What the grid reads from the memory as floor and obstacles (:meth:`SpatialMemory.occupancy2d`);
        ``min_obstacle_hits = 0`` (no profile applied) reads as 1."""
        return OccupancyBands(self.floor_max_z_m, self.obstacle_band_m, max(1, self.min_obstacle_hits))
