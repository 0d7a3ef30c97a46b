"""``MemoryNavigator``: explore until the target is in memory, then go to it (the package doc and
docs/NAVIGATION.md describe the behaviour). ``act(obs, memory)`` reads the observation (ego frame,
odometry ``obs.state``, the bump flag ``obs.sensors["blocked"]``), the memory's public queries and
the action limits; nothing of an env. Driving is :func:`envs.control.step_towards`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from envs.control import BaseLimits, step_towards, turn_towards
from spatial_memory.geometry import wrap_angle
from spatial_memory.queries import normalise_category

from .config import NavigatorConfig
from .frontiers import FrontierChoice, frontier_clusters, frontier_mask, look_point, rank_frontiers
from .grid import OccupancyGrid, half_fovs
from .layers import NavLayers
from .planning import cost_field, extract_path, pursuit_point
from .targets import approach_cell, find_target, parse_target, target_reached

PHASES = ("explore", "goto", "done")
ALIGN_DEG = 5.0  # a base without sideways motion turns until the path heading is within this


@dataclass
class _Goal:
    kind: str  # "frontier" | "target" | "escape"
    cell_xy: np.ndarray  # where to drive (world xy)
    look_xy: np.ndarray  # what to face on arrival
    key_xy: np.ndarray  # identifies the goal across replans (frontier point / target centre)
    started: int  # step the goal was first chosen
    budget: int  # steps allowed
    score: float = 0.0
    path: list = field(default_factory=list)  # world xy waypoints (cell centres), start excluded
    arrived: bool = False
    bumps: int = 0


def base_limits(cfg: NavigatorConfig, max_forward: float, max_left: float, max_turn: float) -> BaseLimits:
    """The shared base controller's limits, turning on the spot beyond ``turn_in_place_deg`` (a base
    without sideways motion: beyond ``ALIGN_DEG``)."""
    return BaseLimits(max_forward, max_left, max_turn, math.radians(cfg.turn_in_place_deg), math.radians(ALIGN_DEG))


def action_limits(cfg: NavigatorConfig, low: np.ndarray, high: np.ndarray) -> BaseLimits:
    """The limits for an action space's bounds ``[forward_m, left_m, yaw_rad]``."""
    low, high = np.asarray(low, dtype=np.float64).ravel(), np.asarray(high, dtype=np.float64).ravel()
    if low.shape != (3,) or high.shape != (3,):
        raise ValueError(
            f"the navigator needs a 3-dim action space [forward_m, left_m, yaw_rad], got bounds of shape {low.shape}"
        )
    m = np.minimum(np.abs(low), np.abs(high))
    limits = base_limits(cfg, float(high[0]), float(m[1]), float(m[2]))
    if limits.max_forward <= 0 or limits.max_turn <= 0:
        raise ValueError(
            f"the action space must allow forward motion and turning, got low={low.tolist()} high={high.tolist()}"
        )
    return limits


class MemoryNavigator:
    """Explore until the target is in memory, then go to it (see the module doc). ``phase`` is
    ``"explore"``, ``"goto"`` or ``"done"``; ``grid`` is the last :class:`OccupancyGrid`."""

    def __init__(self, config: NavigatorConfig | dict | None = None, **overrides: Any) -> None:
        cfg = config if isinstance(config, NavigatorConfig) else NavigatorConfig.from_dict(config)
        self.config = replace(cfg, **overrides) if overrides else cfg
        self.limits = self._limits(self.config.max_forward_m, self.config.max_left_m, self.config.max_turn_rad)
        self.layers = NavLayers(self.config)
        self.confusions = None  # what the detector confuses (config.confusions), read once
        if self.config.confusions:
            from .confusion import ConfusionModel

            self.confusions = ConfusionModel.load(self.config.confusions)
        self.reset("")

    # ---------------------------------------------------------------------------- setup
    def set_action_limits(self, low: np.ndarray, high: np.ndarray) -> None:
        """Take the action bounds ``[forward_m, left_m, yaw_rad]`` from an action space."""
        self.limits = action_limits(self.config, low, high)

    def _limits(self, max_forward: float, max_left: float, max_turn: float) -> BaseLimits:
        return base_limits(self.config, max_forward, max_left, max_turn)

    def reset(self, instruction: str) -> None:
        """Start an episode. An instruction that is not "go to the <category>" leaves no target: the
        navigator then only explores (building the memory), and says so in ``events``."""
        self.instruction = instruction
        try:
            self.target_category = parse_target(instruction) if instruction else None
        except ValueError:
            self.target_category = ""
        self.layers.reset()
        self.phase = "explore"
        self.grid: OccupancyGrid | None = None
        self.goal: _Goal | None = None
        self.target = None  # the MemoryObject being approached
        self._t = 0
        self._turns_left = self.config.initial_turns
        self._history: list[np.ndarray] = []
        self._last_action = np.zeros(3)
        self._last_pose: np.ndarray | None = None
        self._since_plan = 0
        self._done_steps = 0
        self._approach = self.config.approach_m
        self._face_steps = 0
        self._last_clear = -(10**9)
        self._probe: dict | None = None  # pending probes after a bump
        self._goto_retry_at = 0  # no reachable goal near the target: when to look again
        self._given_up: list[np.ndarray] = []  # centres of objects given up (done there, episode went on)
        self._dones = (None, 0)  # (centre of the object last "done" at, times in a row)
        self._unseen = (None, 0)  # (centre of the object last not seen from its goal cell, times in a row)
        self._explored = False  # no frontier was left at some step
        self.events: list[tuple[int, str]] = []  # (step, what happened): replans, bumps, blacklists
        if self.target_category == "":
            self._event(f"no target in the instruction {instruction!r}: exploring only")

    # ---------------------------------------------------------------------------- the step
    def act(self, obs: Any, memory: Any, camera: str | None = None) -> np.ndarray:
        """One action ``[forward_m, left_m, yaw_rad]`` for the observation (memory already updated)."""
        if self.target_category is None:
            self.reset(str(getattr(obs, "instruction", "")))
        frame = obs.cameras[camera] if camera else next(iter(obs.cameras.values()))
        pose = np.asarray(obs.state, dtype=np.float64)[:3]
        self._t += 1
        if self._turns_left < 0:
            hfov = half_fovs(frame)[1] * 2
            self._turns_left = max(0, int(math.ceil((2 * math.pi - hfov) / self.limits.max_turn - 1e-6)))
        blocked = bool(obs.sensors.get("blocked", False))
        probe = None
        if self._probe is not None and not blocked:
            self._event("a probe got through")
            self._probe = None
        elif blocked and self._last_pose is not None:
            probe = self._on_bump(self._last_pose, pose)
        self.layers.add_scan(frame)
        self.layers.add_visit(pose)
        self._history.append(pose.copy())
        self.target = self._find_target(memory)  # before the grid: its voxels do not hide it
        self.grid = self.layers.grid(memory, self.target)
        action = probe if probe is not None else self._decide(pose, frame, blocked)
        self._last_pose = pose.copy()
        self._last_action = np.asarray(action, dtype=np.float64)
        return self._last_action.copy()

    def _decide(self, pose: np.ndarray, frame: Any, blocked: bool) -> np.ndarray:
        cfg = self.config
        if self.phase == "done":
            self._done_steps += 1
            if not cfg.resume_after_done or self._done_steps <= cfg.resume_after_done:
                return np.zeros(3)
            # the episode went on: our distance or visibility estimate was off; get closer elsewhere,
            # or, done confusion_give_up times at an object taken for the target, it is not the target
            self.phase, self.goal, self._done_steps = "goto", None, 0
            if not self._give_up():
                self._event(f"still running {cfg.resume_after_done} steps after done: approaching closer")
                self._approach = max(0.3, self._approach - 0.15)
                self._blacklist_goal_here(pose)
        # after a resume ("done" and the episode went on) the base must really get closer: done then needs
        # the shrunk approach distance (+ 0.1 m), not the success radius it already met by its own estimate
        radius = None if self._approach >= cfg.approach_m else self._approach + 0.1
        if self.target is not None and target_reached(self.target, pose, frame, cfg, radius):
            self.phase = "done"
            self._done_steps = 0
            self._dones = self._streak(self._dones, self.target)
            self._event("target visible and within reach: done")
            return np.zeros(3)
        if self.target is None and self._turns_left > 0:
            self._turns_left -= 1
            return np.array([0.0, 0.0, self.limits.max_turn])
        self._turns_left = 0
        if self._stuck():
            self._event("no progress: blacklisting the goal")
            self._abandon_goal()
        action = None
        if self.target is not None and (
            self._t >= self._goto_retry_at or (self.goal is not None and self.goal.kind == "target")
        ):
            action = self._goto(pose, frame, blocked)
            if action is None:
                self._goto_retry_at = self._t + cfg.replan_every
        if action is None:
            self.phase = "explore"
            action = self._explore(pose, blocked)
        if action is None:  # nothing left to explore: look around; now and then forget the blacklists
            self._explored = True
            if self._t - self._last_clear >= 24:
                self._event("no frontier left: clearing blacklists")
                self._last_clear = self._t
                self.layers.fr_black[:] = False
                self.layers.goal_black[:] = False
                self._given_up.clear()  # and the objects given up: the nearest miss may be the target
                self._approach = self.config.approach_m
            action = np.array([0.0, 0.0, self.limits.max_turn])
        return action

    # ---------------------------------------------------------------------------- bumps and the target
    def _on_bump(self, prev: np.ndarray, pose: np.ndarray) -> np.ndarray | None:
        """A move was cut short. The base stopped just before a place its centre may not enter (the
        obstacle itself may lie ahead or to a side of it). A holonomic base first probes short moves
        fanning out around the blocked direction (threading gaps narrower than the map can tell);
        if none gets through, that place is forbidden and the path replanned. Returns the next probe."""
        cfg = self.config
        if self._probe is None:
            a = self._last_action
            c, s = math.cos(prev[2]), math.sin(prev[2])
            d = np.array([c * a[0] - s * a[1], s * a[0] + c * a[1]])
            norm = float(np.hypot(*d))
            if norm < 1e-9:
                return None
            if self.goal is not None:
                self.goal.bumps += 1
            self._event(f"bumped at {np.round(pose[:2], 2).tolist()}")
            point = pose[:2] + d / norm * (0.5 * cfg.cell_m + cfg.bump_radius_m)
            angles = [20.0, -20.0, 40.0, -40.0, 60.0, -60.0] if (cfg.probe_m > 0 and self.limits.holonomic) else []
            self._probe = {
                "point": point,
                "heading": math.atan2(d[1], d[0]),
                "angles": angles,
                "from": pose[:2].copy(),
                "tried": [],
            }
        probe = self._probe
        if probe["angles"]:
            ang = probe["heading"] + math.radians(probe["angles"].pop(0))
            probe["tried"].append(ang)
            c, s = math.cos(pose[2]), math.sin(pose[2])
            dx, dy = math.cos(ang) * cfg.probe_m, math.sin(ang) * cfg.probe_m
            local = np.array([c * dx + s * dy, -s * dx + c * dy])
            local *= min(
                1.0,
                self.limits.max_forward / max(abs(local[0]), 1e-12),
                self.limits.max_left / max(abs(local[1]), 1e-12),
            )
            return np.array([local[0], local[1], 0.0])
        # no probe got through: forbid where the base tried to go and every probed spot
        self.layers.mark(self.layers.bump, self.layers.disc(probe["point"], cfg.bump_radius_m))
        for ang in probe["tried"]:
            q = probe["from"] + (cfg.probe_m + 0.5 * cfg.cell_m) * np.array([math.cos(ang), math.sin(ang)])
            self.layers.mark(self.layers.bump, self.layers.disc(q, 0.5 * cfg.cell_m))
        self._probe = None
        return None

    def _find_target(self, memory: Any):
        cfg = self.config
        wide = self.confusions is not None and (cfg.confusion_when == "always" or self._explored)
        found = find_target(memory, self.target_category, cfg, self._skipped, self.confusions if wide else None)
        if found is not None and (self.target is None or found.id != self.target.id) and wide:
            if normalise_category(found.category) != self.target_category:
                self._event(f"no {self.target_category} left in memory: trying {found.id} ({found.category})")
        return found

    def _skipped(self, obj: Any) -> bool:
        """An object given up (its centre near one given up)."""
        r = self.config.blacklist_radius_m
        return any(float(np.hypot(*(p - obj.center[:2]))) < r for p in self._given_up)

    def _give_up(self) -> bool:
        """Done ``confusion_give_up`` times in a row at the current target, an object labelled as another
        class, and the episode went on: it is not the target; leave it out from now on (True: given up).
        An object of the target's own label is never given up here (on val, giving those up after 3 turned
        a success into a failure and no failure into a success: our estimate errs, the label rarely)."""
        cfg, obj = self.config, self.target
        own = obj is not None and normalise_category(obj.category) == self.target_category
        if obj is None or own or self._dones[1] < cfg.confusion_give_up:
            return False
        self._drop(obj, f"done {self._dones[1]} times at {obj.id} and the episode went on: giving it up")
        self._approach = cfg.approach_m
        self.phase = "explore"
        return True

    def _streak(self, last: tuple, obj: Any) -> tuple:
        """``(centre, times in a row)`` after one more time at ``obj``: counted on while it is the object
        of ``last`` (its centre within ``blacklist_radius_m``), else from 1."""
        centre, n = last
        same = centre is not None and float(np.hypot(*(centre - obj.center[:2]))) < self.config.blacklist_radius_m
        return obj.center[:2].copy(), n + 1 if same else 1

    def _drop(self, obj: Any, why: str) -> None:
        """Give ``obj`` up (left out of the search until the blacklists are cleared)."""
        self._event(why)
        self._given_up.append(obj.center[:2].copy())
        self._dones = self._unseen = (None, 0)
        self.target = None

    # ---------------------------------------------------------------------------- planning helpers
    def _set_path(self, goal: _Goal, parent: np.ndarray, cell: tuple[int, int]) -> None:
        w = self.grid.window
        cells = extract_path(parent, w.shape, cell)
        goal.path = [xy for xy in w.cell_to_world(cells[1:])]
        goal.cell_xy = w.cell_to_world(np.array(cell))
        self._since_plan = 0

    def _path_blocked(self, goal: _Goal) -> bool:
        if not goal.path:
            return False
        w = self.grid.window
        rc = w.world_to_cell(np.array(goal.path[: int(2.5 / w.res)]))
        ok = w.inside(rc)
        return bool(np.any(~np.isfinite(self.grid.cost[rc[ok, 0], rc[ok, 1]])))

    def _follow(self, pose: np.ndarray, goal: _Goal) -> np.ndarray | None:
        """Pure pursuit on the stored path: the farthest path point within ``lookahead_m`` reachable in a
        straight line over safe cells (or the path's own cells). None when the path is done."""
        cfg = self.config
        path = goal.path
        if not path:
            return None
        pos = pose[:2]
        pts = np.asarray(path)
        d = np.hypot(*(pts - pos).T)
        i = int(
            np.argmin(d[: int(math.ceil(1.5 / self.config.cell_m))])
        )  # nearest of the next 1.5 m (a path may loop back past a wall)
        del path[:i]  # progress: drop what lies behind the nearest point
        pts, d = pts[i:], d[i:]
        if len(pts) == 1 and d[0] <= cfg.goal_tolerance_m:
            path.clear()
            return None
        return step_towards(pose, pursuit_point(self.grid, pos, pts, d[0], cfg), self.limits)

    def _stuck(self) -> bool:
        cfg = self.config
        n = cfg.stuck_steps
        if self.goal is None or len(self._history) <= n or self._t - self.goal.started < n:
            return False
        if self.goal.arrived:
            return False
        h = np.asarray(self._history[-n:])
        return (
            float(np.hypot(*(h[-1, :2] - h[0, :2]))) < cfg.stuck_distance_m
            and float(np.max(np.hypot(*(h[:, :2] - h[0, :2]).T))) < cfg.stuck_distance_m
        )

    def _abandon_goal(self) -> None:
        g = self.goal
        if g is None:
            return
        if g.kind == "frontier":
            self.layers.mark(self.layers.fr_black, self.layers.disc(g.key_xy, self.config.blacklist_radius_m))
        elif g.kind == "target":
            self.layers.mark(self.layers.goal_black, self.layers.disc(g.cell_xy, 0.35))
        self.goal = None

    def _blacklist_goal_here(self, pose: np.ndarray) -> None:
        self.layers.mark(self.layers.goal_black, self.layers.disc(pose[:2], 0.35))

    def _event(self, text: str) -> None:
        self.events.append((self._t, text))

    # ---------------------------------------------------------------------------- GOTO
    def _target_goal(self, frame: Any, dist: np.ndarray) -> tuple[tuple[int, int], float] | None:
        """The cheapest reachable cell near the target that should see it (None: none reachable)."""

        def blacklisted(xy: np.ndarray) -> np.ndarray:
            rc = self.layers.cell(xy)
            return self.layers.goal_black[rc[:, 0], rc[:, 1]]

        return approach_cell(self.grid, self.target, frame, dist, self._approach, self.config, blacklisted)

    def _goto(self, pose: np.ndarray, frame: Any, blocked: bool) -> np.ndarray | None:
        cfg = self.config
        obj = self.target
        g = self.goal
        same = g is not None and g.kind == "target" and float(np.hypot(*(g.key_xy[:2] - obj.center[:2]))) < 0.25
        self._since_plan += 1
        replan = (
            not same
            or blocked
            or self._since_plan >= cfg.replan_every
            or self._path_blocked(g)
            or (not g.path and not g.arrived)
        )
        if same and g.arrived and not blocked:
            replan = False
        if replan:
            dist, parent, _ = cost_field(self.grid, pose, self.config)
            choice = self._target_goal(frame, dist)
            for level in (1, 2):  # last resort: squeeze past obstacles closer than the lethal margin
                if choice is not None:
                    break
                dist, parent, _ = cost_field(self.grid, pose, self.config, relaxed=level)
                choice = self._target_goal(frame, dist)
            if choice is None:
                if same:
                    self.goal = None
                return None
            cell, score = choice
            if not same:
                plen = dist[cell] * self.grid.window.res
                g = _Goal(
                    "target",
                    np.zeros(2),
                    obj.center[:2].copy(),
                    obj.center[:2].copy(),
                    self._t,
                    int(2 * plen / self.limits.max_forward) + 40,
                    score,
                )
                self._event(f"goto {obj.id} at {np.round(obj.center[:2], 2).tolist()}")
            g.key_xy, g.look_xy = obj.center[:2].copy(), obj.center[:2].copy()
            g.arrived = False
            self._set_path(g, parent, cell)
            self.goal = g
        self.phase = "goto"
        if self._t - g.started > g.budget or g.bumps > cfg.max_bumps:
            self._event("target goal over budget: blacklisting it")
            self._abandon_goal()
            return None
        a = None if g.arrived else self._follow(pose, g)
        if a is not None:
            return a
        g.arrived = True
        look = math.atan2(obj.center[1] - pose[1], obj.center[0] - pose[0])
        if abs(wrap_angle(look - pose[2])) > math.radians(cfg.face_tolerance_deg):
            self._face_steps = 0
            return turn_towards(pose, look, self.limits)
        # facing the target from the goal, and it is not in view (else we would be done): look elsewhere,
        # or, not seen from unseen_give_up cells, it was a false detection
        self._event("target not visible from the goal: trying another cell")
        self._blacklist_goal_here(pose)
        self.goal = None
        self._unseen = self._streak(self._unseen, obj)
        if cfg.unseen_give_up and self._unseen[1] >= cfg.unseen_give_up:
            self._drop(obj, f"{obj.id} not seen from {self._unseen[1]} cells facing it: giving it up")
            return None
        dist, parent, _ = cost_field(self.grid, pose, self.config)
        choice = self._target_goal(frame, dist)
        if choice is None:
            return None
        plen = dist[choice[0]] * self.grid.window.res
        g = _Goal(
            "target",
            np.zeros(2),
            obj.center[:2].copy(),
            obj.center[:2].copy(),
            self._t,
            int(2 * plen / self.limits.max_forward) + 40,
            choice[1],
        )
        self._set_path(g, parent, choice[0])
        self.goal = g
        a = self._follow(pose, g)
        return a if a is not None else turn_towards(pose, look, self.limits)

    # ---------------------------------------------------------------------------- EXPLORE
    def _explore(self, pose: np.ndarray, blocked: bool, depth: int = 0) -> np.ndarray | None:
        cfg = self.config
        g = self.goal if (self.goal is not None and self.goal.kind == "frontier") else None
        self._since_plan += 1
        if g is not None and g.arrived:
            look = math.atan2(g.look_xy[1] - pose[1], g.look_xy[0] - pose[0])
            if abs(wrap_angle(look - pose[2])) > math.radians(cfg.face_tolerance_deg) and self._face_steps < 12:
                self._face_steps += 1
                return turn_towards(pose, look, self.limits)
            self._event("frontier looked at")
            self._abandon_goal()
            g = None
        replan = g is None or blocked or self._since_plan >= cfg.replan_every or self._path_blocked(g) or not g.path
        if replan:
            choice, parent = self._choose_frontier(pose, g)
            if choice is None:
                self.goal = None
                return None
            w = self.grid.window
            point_xy = w.cell_to_world(np.array(choice.point))
            if g is None or float(np.hypot(*(g.key_xy - point_xy))) > cfg.blacklist_radius_m:
                dist_m = float(np.hypot(*(w.cell_to_world(np.array(choice.goal)) - pose[:2])))
                g = _Goal(
                    "frontier",
                    np.zeros(2),
                    self._look_point(point_xy),
                    point_xy,
                    self._t,
                    int(3 * dist_m / self.limits.max_forward) + 40,
                    choice.score,
                )
                self._event(f"frontier {np.round(point_xy, 2).tolist()} (size {choice.size}, score {choice.score:.2f})")
            else:
                g.key_xy, g.score = point_xy, choice.score
                g.look_xy = self._look_point(point_xy)
            self._set_path(g, parent, choice.goal)
            self.goal = g
        if self._t - g.started > g.budget or g.bumps > cfg.max_bumps:
            self._event("frontier over budget: blacklisting it")
            self._abandon_goal()
            return self._explore(pose, False, depth + 1) if depth < 2 else None
        a = self._follow(pose, g)
        if a is not None:
            return a
        g.arrived = True
        self._face_steps = 0
        look = math.atan2(g.look_xy[1] - pose[1], g.look_xy[0] - pose[0])
        return turn_towards(pose, look, self.limits)

    def _look_point(self, point_xy: np.ndarray) -> np.ndarray:
        return look_point(self.grid, point_xy)

    def _choose_frontier(
        self, pose: np.ndarray, current: _Goal | None
    ) -> tuple[FrontierChoice | None, np.ndarray | None]:
        for level in (0, 1, 2):  # last resort: squeeze past obstacles closer than the lethal margin
            choice, parent = self._rank(pose, current, relaxed=level)
            if choice is not None:
                break
        return choice, parent

    def _rank(
        self, pose: np.ndarray, current: _Goal | None, relaxed: int
    ) -> tuple[FrontierChoice | None, np.ndarray | None]:
        cfg = self.config
        grid = self.grid
        w = grid.window
        dist, parent, _ = cost_field(self.grid, pose, self.config, relaxed)
        res = w.res
        black = self.layers.window_of(self.layers.fr_black, w)
        # cells touching an obstacle are not frontiers: the unknown behind a wall's seen face is no news
        unknown = (
            grid.unknown & ~grid.suspect if grid.suspect is not None else grid.unknown
        )  # suspect floor: seen enough
        frontier = frontier_mask(grid.free, unknown) & ~black & (grid.clearance >= 2 * res - 1e-9)
        labels, n = frontier_clusters(frontier, cfg.min_frontier_cells)
        centres = w.centres()
        ang = np.arctan2(centres[..., 1] - pose[1], centres[..., 0] - pose[0]) - pose[2]
        ang = np.abs(wrap_angle(ang))
        extra = cfg.turn_cost_m * ang / np.pi
        if self.target is not None:  # target known but no goal reachable yet: explore towards it
            extra = extra + 0.5 * np.hypot(
                centres[..., 0] - self.target.center[0], centres[..., 1] - self.target.center[1]
            )
        ranked = rank_frontiers(dist, labels, n, res, cfg.frontier_reach_m, cfg.frontier_gain_m, extra)
        if not ranked:
            return None, None
        best = ranked[0]
        if current is not None:  # hysteresis: keep the current frontier unless another is clearly better
            for f in ranked:
                p = w.cell_to_world(np.array(f.point))
                if float(np.hypot(*(p - current.key_xy))) <= cfg.blacklist_radius_m:
                    if f.score <= best.score + cfg.switch_margin_m:
                        best = f
                    break
        return best, parent

    # ---------------------------------------------------------------------------- debugging
    def debug_image(self, scale: int = 2) -> np.ndarray:
        """RGB picture of the last grid: unknown grey, free white, lethal pink, obstacles black,
        frontiers blue, path green, goal red (rows flipped so that +y is up)."""
        g = self.grid
        if g is None:
            raise RuntimeError("act() has not run yet")
        img = np.full(g.window.shape + (3,), 128, dtype=np.uint8)
        img[g.free] = 255
        img[~np.isfinite(g.cost) & g.known] = (255, 200, 200)
        img[g.obstacle] = 0
        img[frontier_mask(g.free, g.unknown)] = (80, 80, 255)
        w = g.window
        if self.goal is not None:
            for xy in self.goal.path:
                rc = w.world_to_cell(xy)
                if w.inside(rc):
                    img[rc[0], rc[1]] = (0, 180, 0)
            rc = w.world_to_cell(self.goal.cell_xy)
            if w.inside(rc):
                img[max(rc[0] - 2, 0) : rc[0] + 3, max(rc[1] - 2, 0) : rc[1] + 3] = (255, 0, 0)
        if self.target is not None:
            rc = w.world_to_cell(self.target.center[:2])
            if w.inside(rc):
                img[max(rc[0] - 2, 0) : rc[0] + 3, max(rc[1] - 2, 0) : rc[1] + 3] = (255, 160, 0)
        if self._history:
            rc = w.world_to_cell(np.asarray(self._history)[:, :2])
            ok = w.inside(rc)
            img[rc[ok, 0], rc[ok, 1]] = (255, 0, 255)
        img = img[::-1]
        return np.repeat(np.repeat(img, scale, axis=0), scale, axis=1)
