"""Object navigation from the agent's own observations and its :class:`SpatialMemory` (no scene truth).

``MemoryNavigator.act(obs, memory)`` turns "go to the <category>" into base actions
``[forward_m, left_m, yaw_rad]``. The caller integrates the frame into the memory before ``act``.
Nothing here reads an env: only the observation (ego frame, odometry ``obs.state``, the bump flag
``obs.sensors["blocked"]``), the memory's public queries and the action limits.

Each step the navigator rebuilds a 2D grid in the odometry frame (the memory's frame) from the
memory's occupancy (:meth:`SpatialMemory.occupancy2d`) and its own layers (free-space rays of the
depth images, where the base stood, bumps): see :mod:`.grid` and :mod:`.layers`. Planning is one
Dijkstra field from the base (:mod:`.planning`), which ranks every goal at once.

EXPLORE (target not in memory): turn once on the spot, then pick a frontier (:mod:`.frontiers`: a
cluster of known free cells next to unknown ones, not touching an obstacle) by path cost minus a
gain for long clusters plus a penalty for turning; drive to the cheapest cell within
``frontier_reach_m`` of it, face the unknown side, and blacklist it if it is still there. GOTO
(target category in memory with at least ``min_target_points``): goal cells near the target's box
that should see it (:mod:`.targets`); drive to the cheapest, face the target, and stop once the own
camera shows it (``phase = "done"``, zero actions). A goal from which the target does not show is
blacklisted and the next one tried. Paths are followed by pure pursuit (the farthest path point
within ``lookahead_m`` reachable in a straight line), driven by the shared base controller
(:func:`envs.control.step_towards`): translating straight at it while turning towards it, turning
on the spot first when it lies more than ``turn_in_place_deg`` off the view.

Bumps (``obs.sensors["blocked"]``, e.g. a low object below the view): a holonomic base probes short
moves fanning out around the blocked direction (this threads gaps narrower than the map can
resolve); if one gets through it carries on, else the spot ahead is forbidden. When nothing is
reachable, lethal cells are relaxed in two levels (down to ``agent_radius_m + relaxed_m``, keeping
to the middle of the gap). The path is checked against the newest grid every step and replanned
every ``replan_every`` steps, after a bump, when it crosses a new obstacle or the target moves; a
goal that takes far longer than its path should, collects ``max_bumps`` bumps, or where the base
makes no progress for ``stuck_steps``, is blacklisted; frontier choice has hysteresis
(``switch_margin_m``) so two goals cannot alternate.

Modules: ``config`` (NavigatorConfig), ``grid`` (GridWindow, OccupancyGrid, cost map, free-space
rays), ``layers`` (the per-episode layers and the step's grid), ``planning`` (Dijkstra, paths,
segment and visibility kernels), ``frontiers``, ``targets`` (instruction, target box, approach
cells), ``navigator`` (MemoryNavigator). docs/NAVIGATION.md has the numbers.
"""

from .config import NavigatorConfig
from .frontiers import FrontierChoice, frontier_clusters, frontier_mask, rank_frontiers
from .grid import GridWindow, OccupancyGrid, cost_map, half_fovs, scan_rays
from .layers import NavLayers
from .navigator import PHASES, MemoryNavigator
from .planning import cost_field, dijkstra, extract_path, segment_clear, visible_points
from .targets import approach_cell, box_distance, parse_target, target_points, target_reached

__all__ = [
    "PHASES",
    "FrontierChoice",
    "GridWindow",
    "MemoryNavigator",
    "NavLayers",
    "NavigatorConfig",
    "OccupancyGrid",
    "approach_cell",
    "box_distance",
    "cost_field",
    "cost_map",
    "dijkstra",
    "extract_path",
    "frontier_clusters",
    "frontier_mask",
    "half_fovs",
    "parse_target",
    "rank_frontiers",
    "scan_rays",
    "segment_clear",
    "target_points",
    "target_reached",
    "visible_points",
]
