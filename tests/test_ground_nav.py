"""envs/ground_nav: what the ground-navigation families share, on plain grids (no simulator).

The apartments' and OmniGibson's own behaviour through it is covered by tests/test_house_*.py and
tests/test_omnigibson_env.py; here: the shared home is the only link between the families, the one
box distance against a brute-force footprint, goal cells and the episode draw on a hand-made grid.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from envs.ground_nav.navgrid import Planner, main_component
from envs.ground_nav.task import GOAL_MARGIN_M, goal_cells, instruction_for, make_episode
from envs.truth import NavGrid
from spatial_memory.geometry import box_distance

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> set[str]:
    out = set()
    for path in (ROOT / "envs" / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("family, other", [("omnigibson", "house"), ("house", "omnigibson")])
def test_a_family_imports_the_shared_home_never_another_family(family, other):
    mods = _imports(family)
    assert not [m for m in mods if m == f"envs.{other}" or m.startswith(f"envs.{other}.")]
    assert any(m.startswith("envs.ground_nav") for m in mods)
    assert not [m for m in _imports("ground_nav") if m.startswith(("envs.house", "envs.omnigibson", "envs.libero"))]


def _footprint_distance(xy: np.ndarray, center, size, yaw: float, n: int = 801) -> np.ndarray:
    """Brute force: distance to a dense sampling of the footprint's boundary (0 inside)."""
    t = np.linspace(-0.5, 0.5, n)
    hx, hy = size[0], size[1]
    edges = np.concatenate(
        [np.stack([t * hx, np.full(n, s * hy / 2)], -1) for s in (-1, 1)]
        + [np.stack([np.full(n, s * hx / 2), t * hy], -1) for s in (-1, 1)]
    )
    c, s = math.cos(yaw), math.sin(yaw)
    world = edges @ np.array([[c, s], [-s, c]]) + np.asarray(center)[:2]
    d = np.min(np.hypot(*(xy[:, None, :] - world[None]).transpose(2, 0, 1)), axis=1)
    local = (xy - np.asarray(center)[:2]) @ np.array([[c, -s], [s, c]])
    inside = np.all(np.abs(local) <= np.asarray(size)[:2] / 2, axis=1)
    return np.where(inside, 0.0, d)


@pytest.mark.parametrize("yaw", [0.0, 0.4, math.pi / 2, -2.5])
def test_box_distance_is_the_distance_to_the_turned_footprint(yaw):
    rng = np.random.default_rng(3)
    xy = rng.uniform(-3, 3, (200, 2))
    center, size = np.array([0.3, -0.2, 0.5]), np.array([1.6, 0.7, 1.0])
    got = box_distance(xy, center, size, yaw)
    assert got.shape == (200,)
    np.testing.assert_allclose(got, _footprint_distance(xy, center, size, yaw), atol=2e-3)
    assert box_distance(center[:2], center, size, yaw) == 0.0


def _grid() -> NavGrid:
    free = np.ones((60, 80), dtype=bool)  # 4 x 3 m at 5 cm
    free[:, 40] = False  # a wall down the middle ...
    free[25:35, 40] = True  # ... with a door
    free[0:3, 0:3] = False
    free[50:60, 70:80] = False
    free[55, 75] = True  # an island: not part of the main component
    return NavGrid(free=free, x0=0.0, y0=0.0, resolution=0.05, agent_radius=0.2)


def test_goal_cells_are_exactly_the_main_cells_within_reach():
    grid = _grid()
    main = main_component(grid)
    assert not main[55, 75] and main[30, 40] and main.sum() == grid.free.sum() - 1
    center, size, yaw, reach = np.array([3.0, 1.5]), np.array([0.6, 0.3]), 0.7, 0.8
    got = goal_cells(grid, main, center, size, yaw, reach)
    rc = np.argwhere(main)
    rc = rc[np.hypot(*(grid.cell_to_world(rc) - center).T) < 1.5]  # farther cells are out of reach anyway
    want = rc[_footprint_distance(grid.cell_to_world(rc), center, size, yaw, n=201) <= reach]
    assert len(got) > 0
    # the same cells up to the brute force's sampling error at the boundary, in row-major order
    near_edge = np.abs(box_distance(grid.cell_to_world(rc), center, size, yaw) - reach) < 2e-3
    assert {tuple(c) for c in got} ^ {tuple(c) for c in want} <= {tuple(c) for c in rc[near_edge]}
    assert np.array_equal(got, got[np.lexsort((got[:, 1], got[:, 0]))])
    seen = goal_cells(grid, main, center, size, yaw, reach, sees=lambda xy: xy[0] > 3.0)
    assert len(seen) and np.all(grid.cell_to_world(seen)[:, 0] > 3.0)
    first = goal_cells(grid, main, center, size, yaw, reach, sees=lambda xy: xy[0] > 3.0, first_only=True)
    assert np.array_equal(first, seen[:1])


class _Target:
    def __init__(self, id: str, category: str, instance_id: int, center):
        self.id, self.category, self.instance_id, self.center = id, category, instance_id, np.asarray(center)


def _draw(trial: int, targets=None, **kw):
    grid = _grid()
    main = main_component(grid)
    planner = Planner(grid)
    if targets is None:
        targets = [_Target("sofa_1", "sofa", 4, [3.2, 1.0]), _Target("tv_stand_1", "tv_stand", 7, [0.8, 2.2])]

    def goals(t):
        return goal_cells(grid, main, t.center, np.array([0.4, 0.4]), 0.0, 1.0 - GOAL_MARGIN_M)

    args = ("test scene", trial, (5, 11), grid, main, planner.distance_field, lambda: targets, goals, 2.0)
    return make_episode(*args, **kw), grid, planner, goals


def test_make_episode_is_a_pure_function_of_the_trial_and_starts_far_enough():
    for trial in range(4):
        ep, grid, planner, goals = _draw(trial)
        again, *_ = _draw(trial)
        assert ep.target_id == again.target_id and np.array_equal(ep.start, again.start)
        assert ep.instruction == instruction_for(ep.category) == f"go to the {ep.category.replace('_', ' ')}"
        assert grid.is_free(ep.start[:2]) and -math.pi <= ep.start[2] <= math.pi
        dist, _ = planner.distance_field(ep.goal_cells)
        rc = grid.world_to_cell(ep.start[:2])
        assert ep.geodesic_m == dist[rc[0], rc[1]] >= 2.0
    assert len({_draw(t)[0].target_id for t in range(8)}) == 2


def test_a_scene_without_a_target_is_a_runtime_error_that_callers_may_skip():
    with pytest.raises(RuntimeError, match="test scene: no navigation target"):
        _draw(0, targets=[])


def test_make_episode_refuses_bad_input_by_name():
    with pytest.raises(ValueError, match="trial must be a non-negative int"):
        _draw(-1)
    with pytest.raises(ValueError, match="not on a free cell"):
        _draw(0, start=np.array([0.025, 0.025, 0.0]))  # the blocked corner
    with pytest.raises(ValueError, match="cut off from the goal region"):
        _draw(0, start=np.array([3.775, 2.775, 0.0]))  # the island
