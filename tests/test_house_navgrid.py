"""envs/ground_nav on the apartments: navigable grid, segment tracing, planner, agent kinematics (no rendering)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.control import BaseLimits, follow
from envs.ground_nav.agent import T_base_cam, T_world_cam, step_pose, wrap_angle
from envs.ground_nav.navgrid import Planner, build_navgrid, rect_cells, segment_cells, segment_free
from envs.house.generator import generate_house


def clearance(xy: np.ndarray, rects: list[tuple[float, float, float, float]]) -> np.ndarray:
    """Exact distance from points to the nearest rectangle (0 inside)."""
    out = np.full(len(xy), np.inf)
    for r in rects:
        dx = np.maximum(np.maximum(r[0] - xy[:, 0], xy[:, 0] - r[2]), 0)
        dy = np.maximum(np.maximum(r[1] - xy[:, 1], xy[:, 1] - r[3]), 0)
        out = np.minimum(out, np.hypot(dx, dy))
    return out


@pytest.fixture(scope="module")
def house():
    spec = generate_house(900001)
    return spec, spec.navgrid(), Planner(spec.navgrid())


def test_rect_cells_touching_and_centres():
    # grid from 0 with 0.1 cells (cell c spans [0.1c, 0.1c+0.1], centre 0.1c+0.05)
    rs, cs = rect_cells((0.27, 0.0, 0.53, 0.1), 0.0, 0.0, 0.1, (10, 10), touching=True)
    assert (cs.start, cs.stop) == (2, 6) and (rs.start, rs.stop) == (0, 1)  # cells 2..5 overlap it
    rs, cs = rect_cells((0.27, 0.0, 0.53, 0.1), 0.0, 0.0, 0.1, (10, 10), touching=False)
    assert (cs.start, cs.stop) == (3, 5)  # centres 0.35 and 0.45 lie inside
    rs, cs = rect_cells((0.35, 0.0, 0.45, 0.1), 0.0, 0.0, 0.1, (10, 10), touching=False)
    assert (cs.start, cs.stop) == (3, 5)  # centres on the boundary count


def test_free_cells_have_true_clearance(house):
    """Every point of every free cell is at least agent_radius from walls, furniture and the outside."""
    spec, grid, _ = house
    rects = spec.obstacle_rects()
    rc = np.argwhere(grid.free)
    rng = np.random.default_rng(0)
    pick = rc[rng.choice(len(rc), size=min(4000, len(rc)), replace=False)]
    offsets = rng.uniform(0, 1, size=(len(pick), 2))
    xy = np.stack(
        [
            grid.x0 + (pick[:, 1] + offsets[:, 0]) * grid.resolution,
            grid.y0 + (pick[:, 0] + offsets[:, 1]) * grid.resolution,
        ],
        -1,
    )
    assert clearance(xy, rects).min() >= grid.agent_radius - 1e-9
    assert all(spec.room_at(p) is not None for p in xy[:200])


def test_grid_is_not_overly_conservative(house):
    """Points clearly far from everything (radius + 3 cells) are free."""
    spec, grid, _ = house
    rects = spec.obstacle_rects()
    rng = np.random.default_rng(1)
    xy = rng.uniform([0, 0], spec.size, size=(5000, 2))
    inside = np.array([spec.room_at(p) is not None for p in xy])
    far = inside & (clearance(xy, rects) > grid.agent_radius + 3 * grid.resolution)
    assert far.sum() > 500
    assert grid.is_free(xy[far]).all()


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.floats(0.0, 5.0))
def test_segment_cells_cover_the_segment(ax, ay, bx, by):
    from envs.base import NavGrid

    grid = NavGrid(np.ones((60, 60), bool), x0=-0.5, y0=-0.5, resolution=0.1, agent_radius=0.1)
    cells, ts = segment_cells(grid, np.array([ax, ay]), np.array([bx, by]))
    assert np.all(np.diff(ts) >= -1e-12) and ts[0] == 0.0
    assert len({tuple(c) for c in cells}) == len(cells)
    # every sampled point of the segment lies in (the closure of) one of the listed cells
    t = np.linspace(0, 1, 101)
    p = np.array([ax, ay]) + t[:, None] * (np.array([bx, by]) - np.array([ax, ay]))
    u = (p - [grid.x0, grid.y0]) / grid.resolution  # continuous (col, row)
    for q in u:
        near = np.all(np.abs(cells[:, ::-1] + 0.5 - q) <= 0.5 + 1e-7, axis=1)
        assert near.any()


def test_step_into_wall_is_blocked_not_teleported(house):
    spec, grid, planner = house
    # a free cell near a wall: walk towards the wall until blocked
    room = spec.rooms[0]
    x0, y0, x1, y1 = room.interior()
    start = None
    for x in np.arange(x0 + 0.3, x1 - 0.3, 0.05):
        p = np.array([x, (y0 + y1) / 2])
        if grid.is_free(p) and grid.is_free(p + [0, -0.6]):
            start = p
            break
    assert start is not None
    pose = np.array([start[0], start[1], -math.pi / 2])  # facing south (-y), towards the room's wall
    rects = spec.obstacle_rects()
    blocked_once = False
    for _ in range(60):
        res = step_pose(grid, pose, np.array([0.25, 0.0, 0.0]))
        assert res.moved_m <= 0.25 + 1e-9
        assert abs(res.pose[0] - pose[0]) < 1e-9  # straight line, no sliding
        assert clearance(res.pose[None, :2], rects)[0] >= grid.agent_radius - 1e-9
        blocked_once |= res.blocked
        if res.blocked:
            assert res.moved_m < 0.25
            break
        pose = res.pose
    assert blocked_once
    # a blocked agent can still turn and go back
    back = step_pose(grid, res.pose, np.array([-0.25, 0.0, 0.1]))
    assert not back.blocked and back.moved_m == pytest.approx(0.25)
    assert back.pose[2] == pytest.approx(wrap_angle(-math.pi / 2 + 0.1))


def test_random_walk_never_overlaps_obstacles(house):
    spec, grid, planner = house
    rects = spec.obstacle_rects()
    rng = np.random.default_rng(3)
    rc = np.argwhere(grid.free)[rng.integers(len(np.argwhere(grid.free)))]
    pose = np.array([*grid.cell_to_world(rc), 0.0])
    n_blocked = 0
    for _ in range(800):
        a = rng.uniform([-0.25, -0.25, -0.5], [0.25, 0.25, 0.5])
        res = step_pose(grid, pose, a)
        n_blocked += res.blocked
        pose = res.pose
        assert grid.is_free(pose[:2])
        assert clearance(pose[None, :2], rects)[0] >= grid.agent_radius - 1e-9
    assert n_blocked > 0  # the walk did meet obstacles


def test_planner_paths_are_free_and_near_optimal(house):
    spec, grid, planner = house
    rng = np.random.default_rng(4)
    main = np.argwhere(grid.free)
    for _ in range(5):
        a, b = main[rng.integers(len(main))], main[rng.integers(len(main))]
        dist, _ = planner.distance_field(np.array([b]))
        if not np.isfinite(dist[tuple(a)]):
            continue
        path = planner.plan(grid.cell_to_world(a), np.array([b]))
        assert path is not None
        assert np.allclose(path[-1], grid.cell_to_world(b))
        for p, q in zip(path[:-1], path[1:]):
            assert segment_free(grid, p, q)
        length = np.sum(np.hypot(*np.diff(path, axis=0).T))
        straight = np.hypot(*(grid.cell_to_world(a) - grid.cell_to_world(b)))
        assert straight - 1e-9 <= length <= dist[tuple(a)] + 1e-6


@pytest.mark.parametrize("max_left", [0.25, 0.0])  # holonomic and differential-drive-like bases
def test_follow_reaches_the_waypoints_without_bumping(house, max_left):
    spec, grid, planner = house
    limits = BaseLimits(0.25, max_left, math.radians(30))
    main = np.argwhere(grid.free)
    rng = np.random.default_rng(5)
    a, b = main[rng.integers(len(main))], main[rng.integers(len(main))]
    path = planner.plan(grid.cell_to_world(a), np.array([b]))
    if path is None:
        pytest.skip("unreachable pair")
    pose = np.array([*path[0], 1.0])
    wps = list(path[1:])
    for _ in range(2000):
        act = follow(pose, wps, limits)
        if act is None:
            break
        assert (
            abs(act[0]) <= 0.25 + 1e-12 and abs(act[1]) <= max_left + 1e-12 and abs(act[2]) <= math.radians(30) + 1e-12
        )
        res = step_pose(grid, pose, act)
        assert not res.blocked
        pose = res.pose
    assert np.allclose(pose[:2], path[-1], atol=1e-6)


def test_camera_pose_conventions():
    T = T_world_cam(np.array([1.0, 2.0, math.pi / 2]), 1.5, 0.0)
    assert np.allclose(T[:3, 3], [1, 2, 1.5])
    assert np.allclose(T[:3, 2], [0, 1, 0])  # optical axis = heading (+y)
    assert np.allclose(T[:3, 1], [0, 0, -1])  # image down = world down
    assert np.allclose(T[:3, 0], [1, 0, 0])  # image right = the agent's right
    Tp = T_base_cam(1.5, 30.0)
    assert np.allclose(Tp[:3, 2], [math.cos(math.radians(30)), 0, -math.sin(math.radians(30))])
    assert np.allclose(Tp[:3, :3].T @ Tp[:3, :3], np.eye(3)) and np.linalg.det(Tp[:3, :3]) == pytest.approx(1.0)


def test_build_navgrid_on_a_toy_room():
    grid = build_navgrid((0, 0, 4, 3), [(0, 0, 4, 3)], [(1.9, 0.0, 2.1, 2.0)], agent_radius=0.2, resolution=0.05)
    # the wall stub splits the room except for the top 1 m: left and right connect only above y = 2.0 + r
    planner = Planner(grid)
    dist, _ = planner.distance_field(np.array([planner.cell_of([0.5, 0.5])]))
    d = dist[planner.cell_of([3.5, 0.5])]
    # geodesic must go around the stub: at least the detour over its top end
    detour = 2 * math.hypot(1.5, 2.0 + 0.2 - 0.5)
    assert detour * 0.95 <= d <= detour * 1.3
    assert not grid.is_free(np.array([2.0, 1.0]))
    assert not grid.is_free(np.array([0.1, 1.0]))  # too close to the outer boundary
