"""envs/house: exploration route (GST's exploration video), clips, and what GST generation needs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs.house.config import HouseConfig
from envs.house.env import HouseEnv
from envs.house.exploration import sample_clips
from spatial_memory.geometry import box_distance


def _centre_size(rect) -> tuple[np.ndarray, np.ndarray]:
    x0, y0, x1, y1 = rect
    return np.array([(x0 + x1) / 2, (y0 + y1) / 2]), np.array([x1 - x0, y1 - y0])


@pytest.fixture(scope="module")
def env_route():
    env = HouseEnv(HouseConfig(seed=900003))
    env.reset(options={"trial": 0})
    route = env.exploration_route()
    yield env, route
    env.close()


def test_route_visits_every_room_and_is_deterministic(env_route):
    env, route = env_route
    visited = {r for r in route.rooms if r is not None}
    assert visited == {r.name for r in env.scene.spec.rooms}
    assert np.allclose(route.poses[0], env.episode.start)
    again = env.exploration_route(start=env.episode.start)
    assert np.array_equal(again.poses, route.poses)
    # every viewpoint is followed by a full look-around
    assert len(route.viewpoints) >= len(env.scene.spec.rooms) + 1


def test_route_is_smooth_and_collision_free(env_route):
    env, route = env_route
    cfg = env.cfg
    assert len(route.actions) == len(route.poses) - 1
    assert np.all(np.abs(route.actions[:, 0]) <= cfg.max_forward_m + 1e-12)
    assert np.all(np.abs(route.actions[:, 1]) <= cfg.max_left_m + 1e-12)
    assert np.all(np.abs(route.actions[:, 2]) <= math.radians(30) + 1e-12)
    step = np.hypot(*np.diff(route.poses[:, :2], axis=0).T)
    assert step.max() <= math.hypot(cfg.max_forward_m, cfg.max_left_m) + 1e-9
    rects = env.scene.spec.obstacle_rects()
    for p in route.poses[::3]:
        assert min(box_distance(p[:2], *_centre_size(r)) for r in rects) >= cfg.agent_radius - 1e-9


def test_route_replays_exactly_through_env_step(env_route):
    env, route = env_route
    env.reset(options={"trial": 0})
    for a in route.actions[:60]:  # a prefix keeps the test fast; the route is one kinematic chain
        _, _, term, _, info = env.step(a)
        assert not info["blocked"]
        if term:
            break
    n = len(env.trajectory)
    assert n >= 2
    assert np.allclose(env.trajectory, route.poses[:n], atol=1e-9)


def test_route_frames_cover_most_objects(env_route):
    env, route = env_route
    frames = env.route_frames(route, stride=3)
    assert len(frames) == math.ceil(len(route.poses) / 3)
    assert [f.step for f in frames[:3]] == [0, 3, 6]
    seen = set()
    for f in frames:
        seen |= set(f.labels)
    assert len(seen) >= 0.8 * len(env.scene.spec.items)
    # frames are in the episode's odometry frame: the first is the start pose
    assert np.allclose(frames[0].T_world_cam[:2, 3], 0.0)


def test_clips(env_route):
    env, route = env_route
    clips = env.clips(route, num=4, length=16, min_travel_m=1.5, seed=1)
    assert 1 <= len(clips) <= 4
    for c in clips:
        assert c.end - c.start == 16 and np.array_equal(c.poses, route.poses[c.start : c.end])
        assert c.length_m >= 1.5
    for a, b in zip(clips, clips[1:]):
        assert a.end <= b.start  # no overlap
    assert [c.start for c in clips] == [c.start for c in sample_clips(route, 4, 16, 1.5, seed=1)]
    with pytest.raises(ValueError, match="length"):
        sample_clips(route, 1, length=1)
    with pytest.raises(ValueError, match="not on a free cell"):
        env.exploration_route(start=np.array([-3.0, -3.0, 0.0]))


def test_gst_material(env_route):
    """What GST question generation reads: maps on one frame, scene truth, unique targets."""
    env, route = env_route
    frame = env.topdown_frame()
    assert (frame.width, frame.height) == (640, 512)
    x0, y0, x1, y1 = frame.bounds
    W, H = env.scene.spec.size
    assert x0 <= 0 and y0 <= 0 and x1 >= W and y1 >= H
    maps = {lvl: env.topdown_map(lvl) for lvl in ("easy", "medium", "hard")}
    assert all(m.shape == (512, 640, 3) and m.dtype == np.uint8 for m in maps.values())
    assert (maps["hard"] == 0).sum() < (maps["medium"] == 0).sum()  # hard draws a subset (walls only)
    truth = env.scene_truth()
    assert len(truth.rooms) == len(env.scene.spec.rooms) and truth.navigable is env.scene.grid
    assert {o.instance_id for o in truth.objects} == set(range(1, len(truth.objects) + 1))
    for o in truth.objects[:5]:
        assert np.allclose(o.position, o.box.center)
