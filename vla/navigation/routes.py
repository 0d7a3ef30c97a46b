"""Routes on the memory's map, as a policy can read them: for the target (once the memory holds an
object of the instruction's category) and for the best frontiers, where the way there heads first
and how long it is.

:class:`MapRoutes` keeps the navigator's layers for one episode (free-space rays of every depth
frame, the cells the base stood on: :class:`.layers.NavLayers`), builds the navigator's grid from
them and the memory each step, and plans from the base with the navigator's own planner
(:func:`.planning.cost_field`). A :class:`Route` is one way:

* ``kind`` ``"target"``: to the cell the navigator would approach the target from
  (:func:`.targets.approach_cell`); ``"frontier"``: to a frontier cluster's goal cell, ranked as the
  navigator ranks them (:func:`.frontiers.rank_frontiers`, path cost, cluster size, turning), best
  first, without its memory of which frontier it chose before: a route is a function of the map and
  the pose;
* ``point``: where the way heads first, pure pursuit's point on the path (:func:`.planning.pursuit_point`:
  the farthest path point within ``lookahead_m`` reachable in a straight line), and its
  ``direction_deg`` from the camera (left positive, as the memory's object table); for a frontier
  whose goal cell the base stands on, where to look from it (:func:`.frontiers.look_point`);
* ``length_m``: the path's length.

:class:`RouteFollower` acts on the routes alone, with the navigator's interface (``reset``, ``act``,
``phase``, ``target``): stop when the target is within reach and in view (:func:`.targets.target_reached`),
else drive along the target's route, else along the best frontier's, else turn in place. It keeps no
state but the layers, so its action is a function of the routes (and that test), which a policy
reading the routes as rows can imitate exactly; the navigator's goal commitment, blacklists and bump
probes are what it leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from spatial_memory.geometry import egocentric_bearing, wrap_angle

from envs.control import step_towards, turn_towards

from .config import NavigatorConfig
from .frontiers import frontier_clusters, frontier_mask, look_point, rank_frontiers
from .grid import OccupancyGrid
from .layers import NavLayers
from .navigator import action_limits, base_limits
from .planning import cost_field, extract_path, pursuit_point
from .targets import approach_cell, find_target, parse_target, target_reached

ROUTE_KINDS = ("target", "frontier")
UNEXPLORED = "unexplored"  # the category a frontier's row carries in the memory's table


@dataclass(frozen=True)
class Route:
    kind: str
    category: str
    point: np.ndarray  # world xy the way heads to first
    direction_deg: float
    length_m: float
    goal: np.ndarray  # world xy of the route's end


class MapRoutes:
    """The routes of one episode (see the module doc): ``reset(instruction)``, then per step
    ``observe(frame, pose)`` and ``routes(memory, frame, pose)``."""

    def __init__(self, config: NavigatorConfig | dict | None = None, frontiers: int = 2) -> None:
        self.config = config if isinstance(config, NavigatorConfig) else NavigatorConfig.from_dict(config)
        if int(frontiers) < 0:
            raise ValueError(f"frontiers must be >= 0, got {frontiers}")
        self.frontiers = int(frontiers)
        self.layers = NavLayers(self.config)
        self.reset("")

    def reset(self, instruction: str) -> None:
        self.set_instruction(instruction)
        self.layers.reset()
        self.grid: OccupancyGrid | None = None
        self.target = None

    def set_instruction(self, instruction: str) -> None:
        """The target category of ``instruction`` (the layers stay: the map is the same)."""
        try:
            self.category = parse_target(instruction) if instruction else None
        except ValueError:
            self.category = None

    def observe(self, frame: Any, pose: np.ndarray, blocked: bool = False) -> None:
        """Add a frame's free-space rays and the base's cell (each step, before :meth:`routes`); a move
        cut short (``blocked``) forbids the spot just ahead of the base, as the navigator's bump does."""
        pose = np.asarray(pose, dtype=np.float64)
        self.layers.add_scan(frame)
        self.layers.add_visit(pose)
        if blocked:
            cfg = self.config
            ahead = pose[:2] + (0.5 * cfg.cell_m + cfg.bump_radius_m) * np.array([np.cos(pose[2]), np.sin(pose[2])])
            self.layers.mark(self.layers.bump, self.layers.disc(ahead, cfg.bump_radius_m))

    def routes(self, memory: Any, frame: Any, pose: np.ndarray) -> list[Route]:
        """The target's route (when the memory has the target and a cell to approach it from is
        reachable) first, then up to ``frontiers`` frontier routes, best first."""
        cfg = self.config
        pose = np.asarray(pose, dtype=np.float64)
        self.target = find_target(memory, self.category, cfg)
        self.grid = grid = self.layers.grid(memory, self.target)
        T = np.asarray(frame.T_world_cam, dtype=np.float64)
        out: list[Route] = []
        for relaxed in (0, 1, 2):  # as the navigator: squeeze past the lethal margin only as a last resort
            dist, parent, _ = cost_field(grid, pose, cfg, relaxed)
            goal = None
            if self.target is not None:
                goal = self._approach(grid, frame, dist, pose, T)
            ranked = self._frontiers(grid, dist, pose) if self.frontiers else []
            if ranked and self._looked_at(grid, ranked[0], pose, T):  # marked: rank again without it
                ranked = self._frontiers(grid, dist, pose)
            if goal is not None or ranked:
                break
        if goal is not None:
            out.append(self._route("target", self.target.category, grid, parent, goal, pose, T))
        for f in ranked[: self.frontiers]:
            look = look_point(grid, grid.window.cell_to_world(np.array(f.point)))
            out.append(self._route("frontier", UNEXPLORED, grid, parent, f.goal, pose, T, look))
        return out

    def arrived(self, goal_xy: np.ndarray, pose: np.ndarray) -> bool:
        """Whether the base at ``pose`` stands at a route's end (within the navigator's goal tolerance
        and a cell)."""
        cfg = self.config
        return float(np.hypot(*(np.asarray(goal_xy)[:2] - pose[:2]))) <= cfg.goal_tolerance_m + cfg.cell_m

    def _approach(self, grid: OccupancyGrid, frame: Any, dist: np.ndarray, pose: np.ndarray, T: np.ndarray):
        """The cell to approach the target from; one the base stands on, facing the target without
        reaching it (not in view enough, or too far), is marked tried (the navigator's goal blacklist,
        kept here as map state) and the next one taken."""
        cfg, obj = self.config, self.target

        def tried(xy: np.ndarray) -> np.ndarray:
            rc = self.layers.cell(np.asarray(xy).reshape(-1, 2))
            return self.layers.goal_black[rc[:, 0], rc[:, 1]]

        for _ in range(2):
            choice = approach_cell(grid, obj, frame, dist, cfg.approach_m, cfg, tried)
            if choice is None:
                return None
            here = self.arrived(grid.window.cell_to_world(np.array(choice[0])), pose)
            facing = abs(egocentric_bearing(T, np.asarray(obj.center, dtype=np.float64))[0]) <= cfg.face_tolerance_deg
            if not (here and facing) or target_reached(obj, pose, frame, cfg):
                return choice[0]
            self.layers.mark(self.layers.goal_black, self.layers.disc(pose[:2], 0.35))
        return None

    def _looked_at(self, grid: OccupancyGrid, f, pose: np.ndarray, T: np.ndarray) -> bool:
        """Whether the base stands at frontier ``f``'s goal cell facing where to look from it; if so the
        frontier is marked looked at (the navigator's frontier blacklist, kept here as map state)."""
        w, cfg = grid.window, self.config
        if tuple(int(v) for v in w.world_to_cell(pose[:2])) != tuple(f.goal):
            return False
        point = w.cell_to_world(np.array(f.point))
        look = look_point(grid, point)
        direction, _ = egocentric_bearing(T, np.array([look[0], look[1], T[2, 3]]))
        # the unknown left near a frontier may be the floor under the base itself: nothing to face
        under = float(np.hypot(*(look - pose[:2]))) <= cfg.agent_radius_m
        if abs(direction) > cfg.face_tolerance_deg and not under:
            return False
        self.layers.mark(self.layers.fr_black, self.layers.disc(point, cfg.blacklist_radius_m))
        return True

    def _frontiers(self, grid: OccupancyGrid, dist: np.ndarray, pose: np.ndarray) -> list:
        cfg, w = self.config, grid.window
        unknown = grid.unknown & ~grid.suspect if grid.suspect is not None else grid.unknown
        black = self.layers.window_of(self.layers.fr_black, w)
        frontier = frontier_mask(grid.free, unknown) & ~black & (grid.clearance >= 2 * w.res - 1e-9)
        labels, n = frontier_clusters(frontier, cfg.min_frontier_cells)
        centres = w.centres()
        ang = np.abs(wrap_angle(np.arctan2(centres[..., 1] - pose[1], centres[..., 0] - pose[0]) - pose[2]))
        extra = cfg.turn_cost_m * ang / np.pi
        return rank_frontiers(dist, labels, n, w.res, cfg.frontier_reach_m, cfg.frontier_gain_m, extra)

    def _route(self, kind, category, grid, parent, cell, pose, T, look=None) -> Route:
        w = grid.window
        cells = extract_path(parent, w.shape, tuple(cell))
        pts = w.cell_to_world(cells[1:]) if len(cells) > 1 else w.cell_to_world(cells)
        pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
        d0 = float(np.hypot(*(pts[0] - pose[:2])))
        length = d0 + float(np.hypot(*np.diff(pts, axis=0).T).sum()) if len(pts) > 1 else d0
        if len(cells) <= 1 and look is not None:  # at the goal cell: look into the unknown
            point = np.asarray(look, dtype=np.float64)
        else:
            point = np.asarray(pursuit_point(grid, pose[:2], pts, d0, self.config), dtype=np.float64)
        direction, _ = egocentric_bearing(T, np.array([point[0], point[1], T[2, 3]]))
        return Route(kind, str(category), point, float(direction), float(length), pts[-1].copy())


class RouteFollower:
    """Acts on :class:`MapRoutes` alone (see the module doc), with :class:`MemoryNavigator`'s interface."""

    def __init__(self, config: NavigatorConfig | dict | None = None, frontiers: int = 2) -> None:
        self.routes = MapRoutes(config, frontiers)
        self.config = self.routes.config
        cfg = self.config
        self.limits = base_limits(cfg, cfg.max_forward_m, cfg.max_left_m, cfg.max_turn_rad)
        self.reset("")

    def set_action_limits(self, low: np.ndarray, high: np.ndarray) -> None:
        """Take the action bounds ``[forward_m, left_m, yaw_rad]`` from an action space (as the navigator)."""
        self.limits = action_limits(self.config, low, high)

    def reset(self, instruction: str) -> None:
        self.instruction = instruction
        self.routes.reset(instruction)
        self.target_category = self.routes.category
        self.phase = "explore"
        self.target = None
        self.last: list[Route] = []
        self.events: list[tuple[int, str]] = []
        self._t = 0

    @property
    def grid(self):
        return self.routes.grid

    def act(self, obs: Any, memory: Any, camera: str | None = None) -> np.ndarray:
        frame = obs.cameras[camera] if camera else next(iter(obs.cameras.values()))
        pose = np.asarray(obs.state, dtype=np.float64)[:3]
        self._t += 1
        self.routes.observe(frame, pose, bool(obs.sensors.get("blocked", False)))
        self.last = rows = self.routes.routes(memory, frame, pose)
        self.target = self.routes.target
        if self.target is not None and target_reached(self.target, pose, frame, self.config):
            self.phase = "done"
            return np.zeros(3)
        goal = next((r for r in rows if r.kind == "target"), None)
        self.phase = "goto" if goal is not None else "explore"
        if goal is None:
            goal = next((r for r in rows if r.kind == "frontier"), None)
        if goal is None:
            return np.array([0.0, 0.0, self.limits.max_turn])
        if goal.kind == "target" and self.routes.arrived(goal.goal, pose):
            c = self.target.center  # at the approach cell: face the target
            return turn_towards(pose, float(np.arctan2(c[1] - pose[1], c[0] - pose[0])), self.limits)
        return step_towards(pose, goal.point, self.limits)
