"""envs/omnigibson end to end: without OmniGibson (clear errors), and on a FAKE OmniGibson.

OmniGibson cannot be installed here, so most tests run the real adapter -- family, env, scene, sim
boundary, unchanged -- on ``tests/fake_omnigibson``: a FAKE ``omnigibson`` package with the API of
OmniGibson 1.1.1 and its documented output formats, rendering procedural two-room scenes with a
numpy ray caster. Expectations come from the fake's own geometry (its objects' boxes, walls, the
camera mount of its robot), never from the adapter's outputs. The test at the end runs on a real
OmniGibson only, and is skipped here.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

from envs.registry import list_tasks, make_env, require
from spatial_memory.geometry import backproject, transform_points
from tests.conftest import ROOT, VENV_BIN, cli_env

FAKE = ROOT / "tests" / "fake_omnigibson"
SMALL = {"name": "omnigibson", "scene": "Rs_int", "width": 64, "height": 64, "num_trials": 3, "max_steps": 80}


def _real_omnigibson_installed() -> bool:
    return importlib.util.find_spec("omnigibson") is not None


# ------------------------------------------------------------------------------------------- without OmniGibson
@pytest.mark.skipif(_real_omnigibson_installed(), reason="OmniGibson is installed: nothing is missing")
def test_without_omnigibson_tasks_list_and_envs_fail_at_once_with_install_steps():
    tasks = list_tasks({"name": "omnigibson", "split": "val"})
    assert [t.name for t in tasks] == [
        "omnigibson_Benevolence_0_int",
        "omnigibson_Pomaria_0_int",
        "omnigibson_grocery_store_cafe",
        "omnigibson_hotel_suite_small",
        "omnigibson_school_biology",
    ]
    for call in (lambda: make_env({"name": "omnigibson"}), lambda: require({"name": "omnigibson"})):
        with pytest.raises(ValueError, match="OmniGibson is not installed") as err:
            call()
        assert "pip install omnigibson==1.1.1" in str(err.value) and "python -m omnigibson.install" in str(err.value)
    assert "omnigibson" not in sys.modules


@pytest.mark.skipif(_real_omnigibson_installed(), reason="OmniGibson is installed: nothing is missing")
def test_vla_rollout_env_omnigibson_stops_before_any_episode(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run(
        [str(VENV_BIN / "vla-rollout"), "env=omnigibson", "agent=random", f"out={out}"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "OmniGibson is not installed" in r.stderr and "python -m omnigibson.install" in r.stderr
    assert not (out / "episodes.jsonl").exists()


def test_the_hydra_group_is_the_dataclass_defaults():
    from envs.omnigibson.config import OmniGibsonConfig
    from vla.config import compose

    cfg = compose("rollout", ["env=omnigibson", "env.scene=Rs_int"])
    assert cfg["env"] == {"name": "omnigibson", **OmniGibsonConfig(scene="Rs_int").to_dict()}
    with pytest.raises(ValueError, match="env.bogus"):
        compose("rollout", ["env=omnigibson", "env.bogus=1"])


# ------------------------------------------------------------------------------------------- on the FAKE OmniGibson
@pytest.fixture(scope="module")
def fake_og():
    if _real_omnigibson_installed():
        pytest.skip("a real OmniGibson is installed; the fake would shadow it")
    sys.path.insert(0, str(FAKE))
    try:
        og = importlib.import_module("omnigibson")
        assert og.FAKE
        yield og
    finally:
        sys.path.remove(str(FAKE))
        for name in [m for m in sys.modules if m == "omnigibson" or m.startswith("omnigibson.")]:
            del sys.modules[name]


@pytest.fixture()
def env(fake_og):  # one process holds one OmniGibson scene: every test gets its own (close() clears the stage)
    e = make_env(SMALL)
    yield e
    e.close()


def _fake_scene(env):
    return env.sim.scene  # the fake's own scene object: its boxes are the independent truth here


def test_reset_gives_a_valid_observation_in_the_odometry_frame(env):
    from envs.ground_nav.agent import T_base_cam

    obs, info = env.reset(options={"trial": 0})
    env.env_spec.check_observation(obs.to_dict())
    f = obs.cameras["ego"]
    assert f.rgb.shape == (64, 64, 3) and f.depth.dtype == np.float32 and f.instance.dtype == np.int32
    assert np.allclose(obs.state, 0.0) and np.allclose(f.T_world_cam, T_base_cam(1.5, 0.0), atol=1e-6)
    assert obs.instruction == env.instruction and info["target"] == env.episode.target_id
    ids = set(np.unique(f.instance).tolist()) - {0}
    assert set(f.labels) == ids
    fake = {o.name: o for o in _fake_scene(env).objects}
    truth = env.scene_truth()
    for o in truth.objects:  # every object of the fake's registry that is not structure, with its own box
        assert fake[o.id].category == o.category and fake[o.id].category not in ("floors", "walls", "ceilings")
        assert np.allclose(o.box.center, fake[o.id].center, atol=1e-5) and np.allclose(o.box.size, fake[o.id].size)
    assert [o.instance_id for o in sorted(truth.objects, key=lambda o: o.id)] == list(range(1, len(truth.objects) + 1))


def test_back_projected_pixels_land_on_the_objects_they_are_labelled_with(env):
    """The whole camera chain -- USD pose to OpenCV, intrinsics from the aperture, the odometry frame,
    the id remapping -- against the fake scene's geometry."""
    fake = {o.name: o for o in _fake_scene(env).objects}
    truth = env.scene_truth()
    by_id = {o.instance_id: o for o in truth.objects}
    checked = 0
    for pose in ([0.0, 0.0, 0.0], [0.2, 0.0, 1.0], [0.0, 0.0, 2.5], [0.0, 0.1, -2.0]):
        frame = env.render_pose(env.world_pose(np.array(pose)))
        ok = frame.valid_depth
        p = transform_points(truth.T_world_odom @ frame.T_world_cam, backproject(frame.depth, frame.K)[ok])
        inst = frame.instance[ok]
        for iid in set(inst.tolist()) - {0}:
            o = fake[by_id[iid].id]
            box = by_id[iid].box
            assert box.contains(p[inst == iid], margin=0.03).mean() > 0.97, o.name
            checked += 1
        floor = (inst == 0) & (np.abs(p[:, 2]) < 0.03)  # structure: floor (z = 0) or walls (at the room's sides)
        walls = (inst == 0) & ~floor
        assert floor.any() or walls.any()
        assert np.all((p[walls, 2] > -0.03) & (p[walls, 2] < 2.63))
    assert checked >= 2


def test_steps_move_the_camera_and_walls_stop_it(env):
    env.reset(options={"trial": 1})
    start = env.agent_pose()
    obs, _, _, _, info = env.step([0.0, 0.0, 0.5])
    assert np.allclose(obs.state, [0.0, 0.0, 0.5], atol=1e-9) and not info["blocked"]
    blocked = False
    for _ in range(60):
        obs, _, term, trunc, info = env.step([0.25, 0.0, 0.0])
        blocked |= info["blocked"]
        if term or trunc:
            break
    assert blocked or info["success"]
    grid = env.scene.grid
    walls = [o for o in _fake_scene(env).objects if o.category == "walls"]
    for xy in env.trajectory[:, :2]:  # never closer to a wall than the agent's radius
        assert grid.is_free(xy)
        for w in walls:
            d = np.maximum(np.abs(xy - w.center[:2]) - w.size[:2] / 2, 0)
            assert np.hypot(*d) >= env.cfg.agent_radius - 1e-6
    assert np.hypot(*(env.agent_pose()[:2] - start[:2])) > 0.2


def test_free_cells_keep_the_agent_clear_of_walls_and_furniture(env):
    grid, radius = env.scene.grid, env.cfg.agent_radius
    rc = np.argwhere(grid.free)
    xy = grid.cell_to_world(rc)
    for o in _fake_scene(env).objects:
        if o.category in ("floors", "ceilings") or not hasattr(o, "size"):
            continue
        local = (xy - o.center[:2]) @ o.R[:2, :2]
        d = np.hypot(*np.maximum(np.abs(local) - o.size[:2] / 2, 0).T)
        assert d.min() >= radius - 1e-6, o.name
    assert len(rc) > 500


def test_topdown_maps_show_the_scene_where_it_is(env):
    frame = env.topdown_frame()
    easy, medium, hard = (env.topdown_map(lvl) for lvl in ("easy", "medium", "hard"))
    assert easy.shape == medium.shape == hard.shape == (512, 640, 3)
    for o in _fake_scene(env).objects:
        if not hasattr(o, "size") or o.category in ("floors", "ceilings"):
            continue
        u, v = frame.world_to_pixel(o.center[:2]).astype(int)
        if o.category == "walls":
            assert (hard[v, u] == 0).all() and (medium[v, u] == 0).all(), o.name
            continue
        assert (medium[v, u] == 0).all() and (hard[v, u] == 255).all(), o.name
        # easy: the top of the object, seen from above with the ceiling hidden (the fake shades tops by 0.92-1.0)
        assert np.all(np.abs(easy[v, u].astype(float) - o.colour) <= 0.09 * o.colour + 2), (o.name, easy[v, u])
    free = np.argwhere(env.scene.main_component)[::50]
    for x, y in env.scene.grid.cell_to_world(free):
        u, v = frame.world_to_pixel(np.array([x, y])).astype(int)
        assert (hard[v, u] == 255).all()


def test_the_expert_reaches_the_target(fake_og):
    from vla.agents import make_agent
    from vla.rollout.runtime import run_episode

    e = make_env({**SMALL, "scene": "Merom_0_int"})
    try:
        res = run_episode(
            e, make_agent({"name": "scripted"}, seed=0), {"env": "omnigibson", "task_id": 0, "trial": 0}, []
        )
        assert res.error is None and res.success, (res.steps, e.last_info)
    finally:
        e.close()
    assert fake_og.sim is None  # close() cleared the stage (og.clear)


def test_every_view_is_rendered_after_its_pose_is_set(env, fake_og):
    before = fake_og.sim.renders
    a = env.render_pose(np.array([0.0, 0.0, 0.0]))
    b = env.render_pose(np.array([0.0, 0.0, 1.5]))
    assert fake_og.sim.renders - before == 2 * env.cfg.render_settle
    assert not np.array_equal(a.depth, b.depth)


def test_mid_episode_gst_questions_are_answered_from_the_memory(fake_og):
    from vla.agents import make_agent
    from vla.gst.midepisode import GSTQuestioner
    from vla.rollout.runtime import run_episode

    env = make_env({**SMALL, "width": 96, "height": 96})  # targets must cover 150 pixels to count as seen
    try:
        q = GSTQuestioner({"at": [12], "per_subtask": 1})
        key = {"env": "omnigibson", "task_id": 0, "trial": 2}
        res = run_episode(env, make_agent({"name": "memory"}, seed=0), key, [q])
    finally:
        env.close()
    assert res.error is None
    rows = res.extra["gst_questions"]
    assert {r["subtask"] for r in rows} >= {"EDv", "EDs", "EDistv", "EDists", "Pos", "Ori"}
    assert np.mean([r["score"] for r in rows]) >= 0.8, res.extra["gst"]


def test_offline_material_replays_and_generates_questions(env):
    from vla.gst.generate import GenConfig, QuestionGenerator

    env.reset(options={"trial": 0})
    route = env.exploration_route()
    pose = route.poses[0].copy()
    for a in route.actions:  # the route is made of the env's own kinematics
        from envs.ground_nav.agent import step_pose

        pose = step_pose(env.scene.grid, pose, a).pose
    assert np.allclose(pose, route.poses[-1])
    visited = env.scene.grid.world_to_cell(route.poses[:, :2])
    main = np.argwhere(env.scene.main_component)
    near = np.min(np.hypot(*(main[:, None, :] - visited[None, ::4, :]).transpose(2, 0, 1)), axis=1)
    assert np.mean(near * env.scene.grid.resolution <= 2.6) > 0.95  # viewpoints cover the floor
    fam = importlib.import_module("envs.omnigibson.family").OmniGibsonFamily()
    material = fam.offline_material(env, env.gst_name, stride=3)
    gen = QuestionGenerator(GenConfig(views=2))
    gen.start_scene(0)
    questions = gen.scene_offline(material, {env.gst_name: material.maps})
    assert {q.subtask for q in questions} >= {"EDv", "GPs", "Pos", "Traj"}


def test_maps_are_cached_under_the_names_vla_gst_uses(fake_og, tmp_path):
    e = make_env({**SMALL, "scene": "Ihlen_1_int", "map_cache": str(tmp_path)})
    try:
        img = e.topdown_map("medium")
        path = tmp_path / "omnigibson-test-Ihlen_1_int_medium.png"
        assert path.exists()
        import imageio.v2 as imageio

        assert np.array_equal(np.asarray(imageio.imread(path))[..., :3], img)
    finally:
        e.close()


def test_a_robot_carries_the_camera_where_its_model_mounts_it(fake_og):
    e = make_env({**SMALL, "robot": "Turtlebot"})
    try:
        obs, _ = e.reset(options={"trial": 0})
        robot = e.sim.robot
        assert robot.physics_steps >= 1
        T = e.scene_truth().T_world_odom @ obs.cameras["ego"].T_world_cam
        x, y, yaw = e.agent_pose()
        # the fake robot's camera: 0.1 m ahead of the base, 0.6 m up, looking along the base's heading
        assert np.allclose(T[:3, 3], [x + 0.1 * np.cos(yaw), y + 0.1 * np.sin(yaw), 0.6], atol=1e-5)
        assert np.allclose(T[:3, 2], [np.cos(yaw), np.sin(yaw), 0.0], atol=1e-5)
        e.env_spec.check_observation(obs.to_dict())
        with e.sim.hidden():
            assert not robot.visible
        assert robot.visible
    finally:
        e.close()


# ------------------------------------------------------------------------------------------- real OmniGibson only
@pytest.mark.skipif(
    not _real_omnigibson_installed(),
    reason="needs OmniGibson 1.1.1 with Isaac Sim (an RTX GPU); not installable here (docs/omnigibson.md)",
)
def test_on_real_omnigibson_pixels_land_on_their_objects():  # pragma: no cover - not run here
    e = make_env({"name": "omnigibson", "scene": "Rs_int", "num_trials": 1})
    try:
        obs, _ = e.reset(options={"trial": 0})
        e.env_spec.check_observation(obs.to_dict())
        truth = e.scene_truth()
        by_id = {o.instance_id: o for o in truth.objects}
        f = obs.cameras["ego"]
        p = transform_points(truth.T_world_odom @ f.T_world_cam, backproject(f.depth, f.K)[f.valid_depth])
        inst = f.instance[f.valid_depth]
        for iid in set(inst.tolist()) - {0}:
            assert by_id[iid].box.contains(p[inst == iid], margin=0.05).mean() > 0.9, by_id[iid].id
    finally:
        e.close()


# ------------------------------------------------------------------------------------------- the CLIs (slow)
@pytest.mark.slow
def test_vla_gst_and_vla_rollout_run_on_the_fake(tmp_path):
    """``vla-gst generate / eval`` and ``vla-rollout ... gst.at=`` with env=omnigibson, on the FAKE OmniGibson."""
    import json
    import os

    if _real_omnigibson_installed():
        pytest.skip("a real OmniGibson is installed; the fake would shadow it")
    env = cli_env()
    env["PYTHONPATH"] = str(FAKE) + os.pathsep + env["PYTHONPATH"]
    out = tmp_path / "gst"

    def run(*args):
        r = subprocess.run([str(VENV_BIN / args[0]), *args[1:]], capture_output=True, text=True, env=env, timeout=1800)
        assert r.returncode == 0, r.stderr[-3000:]
        return r

    small = ["env=omnigibson", "env.width=64", "env.height=64"]
    run("vla-gst", "generate", *small, "split=test", "scenes=4", f"out={out}", "progress=false", "gen.views=2")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["scenes"] == 4 and set(manifest["per_subtask"]) == {
        "EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos", "Ori", "TDS-E", "TDS-M", "TDS-H", "Traj"
    }  # fmt: skip
    run("vla-gst", "eval", "agent=memory", f"questions={out}", f"out={out / 'memory'}", "progress=false")
    scores = json.loads((out / "memory" / "scores.json").read_text())
    assert scores["overall"] >= 80, scores["per_subtask"]

    roll = tmp_path / "roll"
    run(
        "vla-rollout",
        "env=omnigibson",
        "env.scene=Rs_int",
        "env.width=96",
        "env.height=96",
        f"env.map_cache={out / 'maps'}",
        "agent=memory",
        "gst.at=[12]",
        "eval.trials_per_task=1",
        f"out={roll}",
        "progress=false",
    )
    rows = [json.loads(line) for line in (roll / "gst.jsonl").read_text().splitlines()]
    assert {"TDS-E", "TDS-M", "TDS-H"} & {r["subtask"] for r in rows}  # distractors came from the map cache
    summary = json.loads((roll / "summary.json").read_text())
    assert summary["episodes"] == 1 and "gst" in summary
