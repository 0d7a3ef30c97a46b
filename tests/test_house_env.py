"""envs/house: the env (rendering, odometry frame, back-projection, actions, task, expert)."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from envs.base import Observation, SceneTruth
from envs.ground_nav.agent import T_base_cam, T_world_base
from envs.house.catalog import WALL_HEIGHT, WALL_THICKNESS
from envs.house.config import HouseConfig
from envs.house.env import HouseEnv
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import backproject, transform_points

SEED = 900001


@pytest.fixture(scope="module")
def env():
    e = HouseEnv(HouseConfig(seed=SEED))
    yield e
    e.close()


def world_points(env: HouseEnv, frame: CameraFrame) -> np.ndarray:
    p_cam = backproject(frame.depth, frame.K).reshape(-1, 3)
    return transform_points(env.T_world_odom @ frame.T_world_cam, p_cam)


def test_no_gl_context_before_first_render():
    e = HouseEnv(HouseConfig(seed=SEED))
    try:
        assert not e.scene.renderer.is_open  # survives fork into worker processes
    finally:
        e.close()


def test_reset_observation_in_odometry_frame(env):
    obs, info = env.reset(options={"trial": 0})
    assert isinstance(obs, Observation) and set(obs.cameras) == {"ego"}
    f = obs.cameras["ego"]
    assert f.rgb.shape == (256, 256, 3) and f.rgb.dtype == np.uint8
    assert f.depth.dtype == np.float32 and f.instance.dtype == np.int32
    assert np.allclose(obs.state, 0.0)
    assert np.allclose(f.T_world_cam, T_base_cam(1.5, 0.0))  # the camera at reset, in odometry
    truth = env.scene_truth()
    assert isinstance(truth, SceneTruth)
    assert np.allclose(truth.T_world_odom, T_world_base(env.episode.start))
    assert np.allclose(truth.T_world_agent, T_world_base(env.agent_pose()))
    assert obs.instruction == env.instruction == f"go to the {env.episode.category.replace('_', ' ')}"
    assert set(info) >= {"success", "blocked", "target", "target_distance_m", "target_visible_fraction"}
    # labels cover exactly the ids in view; structure is 0
    ids = set(np.unique(f.instance).tolist()) - {0}
    assert set(f.labels) == ids
    cats = {o.instance_id: o.category for o in truth.objects}
    assert all(f.labels[i] == cats[i] for i in ids)


def test_odometry_follows_motion(env):
    obs, _ = env.reset(options={"trial": 1})
    start = env.agent_pose()
    for a in ([0.0, 0.0, 0.5], [0.2, 0.0, 0.0], [0.0, 0.1, -0.2]):
        obs, *_ = env.step(np.array(a))
    # odometry = the true motion expressed relative to the start pose
    T = np.linalg.inv(T_world_base(start)) @ T_world_base(env.agent_pose())
    assert np.allclose(obs.state, [T[0, 3], T[1, 3], math.atan2(T[1, 0], T[0, 0])])
    assert np.allclose(obs.cameras["ego"].T_world_cam, T @ T_base_cam(1.5, 0.0))
    assert np.allclose(env.world_pose(obs.state), env.agent_pose())


def test_the_motion_sensor_is_the_base_s_wheel_odometry_of_the_last_step(env):
    """``sensors["motion"]``: what the base achieved in the last step, in the frame of its pose before it --
    the command where nothing is in the way, less when a bump stops it; zeros at reset."""
    obs, _ = env.reset(options={"trial": 2})
    assert np.array_equal(obs.sensors["motion"], np.zeros(3))
    assert env.env_spec.sensors["motion"].shape == (3,)
    rng = np.random.default_rng(0)
    free = bumps = 0
    for _ in range(60):
        a = rng.uniform([-0.1, -0.25, -0.5], [0.25, 0.25, 0.5])
        before = env.agent_pose()
        obs, _, _, _, info = env.step(a)
        after = env.agent_pose()
        # the achieved motion, written out: the world displacement turned into the old heading's frame
        c, s = math.cos(before[2]), math.sin(before[2])
        dx, dy = after[0] - before[0], after[1] - before[1]
        dyaw = math.atan2(math.sin(after[2] - before[2]), math.cos(after[2] - before[2]))
        np.testing.assert_allclose(obs.sensors["motion"], [c * dx + s * dy, -s * dx + c * dy, dyaw], atol=1e-9)
        if info["blocked"]:
            bumps += 1
            assert np.linalg.norm(obs.sensors["motion"][:2]) < np.linalg.norm(a[:2]) - 1e-6
        else:
            free += 1
            np.testing.assert_allclose(obs.sensors["motion"], a, atol=1e-9)
    assert free > 10


def test_camera_pose_matches_mujoco(env):
    env.reset(options={"trial": 2})
    env.step(np.array([0.1, 0.05, 0.3]))
    sc = env.scene
    cam = sc.compiled.ego_cam
    T = sc.T_world_cam(env.agent_pose())
    assert np.allclose(T[:3, 3], sc.data.cam_xpos[cam])
    assert np.allclose(T[:3, :3], sc.data.cam_xmat[cam].reshape(3, 3) @ np.diag([1, -1, -1]))  # OpenGL -> OpenCV axes


def test_backprojection_lands_in_the_labelled_box(env):
    """>= 99 % of labelled pixels back-project (depth, K, T_world_cam) to within 2 cm of their object's box."""
    obs, _ = env.reset(options={"trial": 0})
    truth = {o.instance_id: o for o in env.scene_truth().objects}
    expert = env.expert()
    expert.reset()
    total = inside = 0
    per_object = []
    rng = np.random.default_rng(0)
    frames = [obs.cameras["ego"]]
    for _ in range(25):
        obs, _, term, trunc, _ = env.step(expert.act(obs))
        frames.append(obs.cameras["ego"])
        if term or trunc:
            break
    grid = env.scene.grid
    free = np.argwhere(env.scene.main_component)
    for rc in free[rng.choice(len(free), 8, replace=False)]:
        xy = grid.cell_to_world(rc)
        frames.append(env.render_pose(np.array([xy[0], xy[1], rng.uniform(-np.pi, np.pi)])))
    for f in frames:
        p = world_points(env, f)
        inst = f.instance.ravel()
        for iid in np.unique(inst):
            if iid == 0:
                continue
            m = inst == iid
            ok = truth[int(iid)].box.contains(p[m], margin=0.02)
            total += m.sum()
            inside += ok.sum()
            per_object.append(ok.mean())
    assert total > 10_000
    assert inside / total >= 0.99
    assert np.median(per_object) >= 0.99


def test_depth_and_segmentation_match_mujoco_renderer(env):
    """Our two-pass rendering equals mujoco.Renderer's depth and segmentation (an independent implementation)."""
    env.reset(options={"trial": 3})
    f = env.render_pose(env.agent_pose())
    sc = env.scene
    sc.set_agent(env.agent_pose())
    r = mujoco.Renderer(sc.model, 256, 256)
    try:
        opt = mujoco.MjvOption()
        opt.geomgroup[:] = [1, 1, 1, 1, 0, 0]
        r.update_scene(sc.data, camera="ego", scene_option=opt)
        r.enable_depth_rendering()
        depth = r.render()
        r.enable_segmentation_rendering()
        seg = r.render()
    finally:
        r.close()
    assert np.allclose(f.depth, depth, rtol=1e-5, atol=1e-5)
    geom = np.where(seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)
    expected = np.where(geom >= 0, sc.compiled.geom_instance[np.maximum(geom, 0)], 0)
    assert np.array_equal(f.instance, expected)


def test_depth_is_metric_against_a_wall(env):
    """Facing a wall head-on, the z-depth of wall pixels equals the distance to the wall surface."""
    sc = env.scene
    grid = sc.grid
    for room in sc.spec.rooms:
        x0, y0, x1, y1 = room.rect
        wall_x = x1 - WALL_THICKNESS / 2  # inner face of the east wall
        for y in np.arange(y0 + 0.5, y1 - 0.5, 0.1):
            for x in np.arange(x1 - 1.0, x0, -0.1):
                if not grid.is_free(np.array([x, y])):
                    continue
                f = env.render_pose(np.array([x, y, 0.0]))
                band = f.instance[118:138, 118:138] == 0
                d = f.depth[118:138, 118:138][band]
                if band.all() and np.ptp(d) < 1e-3:
                    assert np.allclose(d, wall_x - x, atol=2e-3)
                    return
                break
    pytest.fail("no clear view of a wall found")


def test_ceiling_in_ego_view_only(env):
    env.reset(options={"trial": 0})
    f = env.render_pose(env.agent_pose())
    p = world_points(env, f).reshape(256, 256, 3)
    top = p[:20].reshape(-1, 3)  # upper rows look 35-45 degrees up: ceiling (or a tall wall)
    assert np.mean(np.abs(top[:, 2] - WALL_HEIGHT) < 0.01) > 0.3
    img = env.topdown_map("easy")
    assert img.shape == (512, 640, 3)
    geoms = env.scene._topdown_cache["_geoms"]
    names = [env.scene.model.geom(int(g)).name for g in np.unique(geoms) if g >= 0]
    assert not any(n.startswith("ceiling") for n in names)
    assert any(n.startswith("floor") for n in names) and any(n.startswith("wall") for n in names)


def test_easy_map_is_lit_before_any_reset():
    """The easy map of a freshly built env (as `vla-gst generate` renders its map pool) shows the whole
    apartment lit, not only what an unplaced light at the origin happens to reach."""
    e = HouseEnv(HouseConfig(seed=SEED))
    try:
        img = e.topdown_map("easy")
        drawn = e.scene._topdown_cache["_geoms"] >= 0
        dark = np.all(img < 25, axis=-1)
        assert drawn.mean() > 0.3
        assert dark[drawn].mean() < 0.05
    finally:
        e.close()


def test_topdown_alignment(env):
    iou = env.scene.topdown_alignment()
    assert iou["walls"] >= 0.97
    assert iou["items"] >= 0.85
    # independently: the pixel at each wall's centre shows that wall
    frame = env.topdown_frame()
    env.topdown_map("easy")
    geoms = env.scene._topdown_cache["_geoms"]
    model = env.scene.model
    for k, w in enumerate(env.scene.spec.walls[:10]):
        u, v = frame.world_to_pixel(np.array(w.center[:2])).astype(int)
        assert model.geom(int(geoms[v, u])).name == f"wall_{k}"


def test_geometry_maps(env):
    frame = env.topdown_frame()
    medium, hard = env.topdown_map("medium"), env.topdown_map("hard")
    for it in env.scene.spec.furniture[:8]:
        u, v = frame.world_to_pixel(np.array(it.position[:2])).astype(int)
        assert (medium[v, u] == 0).all() and (hard[v, u] == 255).all()
    w = env.scene.spec.walls[0]
    u, v = frame.world_to_pixel(np.array(w.center[:2])).astype(int)
    assert (hard[v, u] == 0).all() and (medium[v, u] == 0).all()
    u, v = frame.world_to_pixel(np.array([-0.3, -0.3])).astype(int)  # outside the apartment
    assert (hard[v, u] == 255).all()
    with pytest.raises(ValueError, match="unknown top-down level"):
        env.topdown_map("photo")


def test_actions_are_validated(env):
    env.reset(options={"trial": 0})
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([np.nan, 0, 0]))
    with pytest.raises(ValueError, match="numeric"):
        env.step("forward")
    before = env.agent_pose()
    _, _, _, _, info = env.step(np.array([5.0, 0.0, 3.0]))  # clipped to the limits
    moved = np.hypot(*(env.agent_pose()[:2] - before[:2]))
    assert moved <= 0.25 + 1e-9
    assert abs(((env.agent_pose()[2] - before[2]) + np.pi) % (2 * np.pi) - np.pi) == pytest.approx(math.radians(30))


def test_reset_options_are_validated(env):
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"trail": 1})
    with pytest.raises(ValueError, match="non-negative int"):
        env.reset(options={"trial": -1})
    with pytest.raises(ValueError, match="unknown target object 'unicorn_1'"):
        env.reset(options={"target": "unicorn_1"})
    with pytest.raises(ValueError, match="not on a free cell"):
        env.reset(options={"start": [-5.0, -5.0, 0.0]})
    with pytest.raises(RuntimeError, match="reset"):
        HouseEnv(HouseConfig(seed=SEED)).step(np.zeros(3))


def test_trials_are_deterministic(env):
    a, _ = env.reset(options={"trial": 4})
    ep_a = env.episode
    other = HouseEnv(HouseConfig(seed=SEED))
    try:
        b, _ = other.reset(options={"trial": 4})
        assert other.episode.target_id == ep_a.target_id and np.allclose(other.episode.start, ep_a.start)
        assert np.array_equal(a.cameras["ego"].rgb, b.cameras["ego"].rgb)
        assert np.array_equal(a.cameras["ego"].depth, b.cameras["ego"].depth)
    finally:
        other.close()
    starts = set()
    for k in range(5):
        env.reset(options={"trial": k})
        assert env.scene.spec.category_counts()[env.episode.category] == 1  # the target's name is unambiguous
        assert env.episode.geodesic_m >= env.cfg.min_start_distance_m
        starts.add(tuple(np.round(env.episode.start, 3)))
    assert len(starts) == 5


def _box_distance(box, xy: np.ndarray) -> np.ndarray:
    """Horizontal distance from points (N, 2) to an oriented box's footprint, in the box's own frame."""
    d = (np.asarray(xy, dtype=np.float64) - box.center[:2]) @ np.asarray(box.R)[:2, :2]
    gap = np.maximum(np.abs(d) - np.asarray(box.size)[:2] / 2, 0.0)
    return np.hypot(gap[:, 0], gap[:, 1])


def test_success_needs_distance_and_visibility(env):
    """Poses chosen from the scene truth alone (the target's box, free cells), the target's pixels
    counted in the ego image: success exactly when near (<= success_radius_m) and visible."""
    env.reset(options={"trial": 0})
    truth = env.scene_truth()
    obj = truth.object(env.episode.target_id)
    cells = np.argwhere(env.scene.main_component)
    xy = truth.navigable.cell_to_world(cells)
    dist = _box_distance(obj.box, xy)
    radius, min_frac = env.cfg.success_radius_m, env.cfg.min_visible_fraction
    order = np.argsort(np.abs(dist - radius))  # closest to the success radius first

    def visit(lo, hi, turn):
        """(info, own distance, own visible fraction) at the free cell in [lo, hi] m of the box nearest the
        radius (facing the box's centre, turned by ``turn``) whose view shows the target clearly, or hides it."""
        for k in [k for k in order if lo <= dist[k] <= hi][:40]:
            c = obj.box.center
            facing = math.atan2(c[1] - xy[k][1], c[0] - xy[k][0]) + turn
            obs, info = env.reset(options={"trial": 0, "start": [xy[k][0], xy[k][1], facing]})
            frac = np.mean(obs.cameras["ego"].instance == obj.instance_id)
            if (frac >= 3 * min_frac) if turn == 0.0 else (frac == 0.0):
                return info, dist[k], frac
        pytest.fail(f"no pose {lo}-{hi} m from {obj.id} found")

    info, d, frac = visit(radius - 0.4, radius - 0.05, 0.0)  # near (just inside the radius) and in view
    assert info["success"] and info["target_distance_m"] == pytest.approx(d, abs=1e-6)
    assert info["target_visible_fraction"] == pytest.approx(frac)
    info, d, frac = visit(radius + 0.05, radius + 0.5, 0.0)  # in view, just too far
    assert not info["success"] and info["target_distance_m"] == pytest.approx(d, abs=1e-6)
    info, d, frac = visit(0.3, radius - 0.05, math.pi)  # near, looking away
    assert not info["success"] and info["target_visible_fraction"] == 0.0


def test_expert_reaches_targets(env):
    ok = 0
    for trial in (5, 6):
        obs, _ = env.reset(options={"trial": trial})
        expert = env.expert()
        expert.reset()
        for _ in range(env.max_episode_steps):
            obs, reward, term, trunc, info = env.step(expert.act(obs))
            assert not info["blocked"]
            if term or trunc:
                break
        ok += info["success"]
        assert term == info["success"] and reward == float(info["success"])
    assert ok == 2


def test_video_frame(env):
    env.reset(options={"trial": 0})
    env.step(np.array([0.2, 0.0, 0.2]))
    img = env.render()
    assert img.shape == (512, 512 + 640, 3) and img.dtype == np.uint8
    assert np.array_equal(env.video_frame(None), img)
    # the trajectory is drawn in red on the map half
    red = (img[:, 512:, 0] > 200) & (img[:, 512:, 1] < 60) & (img[:, 512:, 2] < 60)
    assert red.any()


FORK_SCRIPT = """
import multiprocessing as mp
import numpy as np
from envs.house.config import HouseConfig
from envs.house.env import HouseEnv

env = HouseEnv(HouseConfig(seed=%d))

def child(q):
    obs, _ = env.reset(options={"trial": 0})
    obs, *_ = env.step(np.array([0.1, 0.0, 0.1]))
    q.put((obs.cameras["ego"].rgb.shape, float(obs.cameras["ego"].depth[128, 128])))
    env.close()

ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
shape, depth = q.get(timeout=120)
p.join(timeout=30)
assert p.exitcode == 0, p.exitcode
assert shape == (256, 256, 3) and np.isfinite(depth) and depth > 0, (shape, depth)
assert not env.scene.renderer.is_open
env.close()
print("ok")
"""


def test_env_survives_fork(repo_root):
    """An env made in a parent that has not rendered yet renders in a forked worker.

    Runs in a fresh interpreter: forking a process that already holds a GL context (as this test
    process does) can deadlock the child, so workers must be forked before the parent renders.
    """
    import subprocess
    import sys

    from tests.conftest import cli_env

    out = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT % SEED],
        cwd=repo_root,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
