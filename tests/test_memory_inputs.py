"""The memory as a policy input (vla/transforms/map_inputs.py) on the synthetic two-room apartment: the
object table's directions and distances against the scene's geometry, named objects first, and the
heading-up map (ego_up) that puts what lies ahead above the agent."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from envs.observation import Observation
from spatial_memory.geometry import pose_from_xy_yaw
from spatial_memory.synthetic import apartment_scene, default_camera
from vla.transforms.map_inputs import MemoryInputs, MemoryInputsConfig


def _look(inputs, scene, x, y, yaw, instruction, n=8):
    """Turn on the spot at (x, y) through a full circle (so the memory sees the room), ending at ``yaw``."""
    K = default_camera(96, 96)
    obs = None
    for k in range(n + 1):
        a = yaw + 2 * math.pi * (k - n) / n
        frame = scene.render(pose_from_xy_yaw(x, y, a, 1.5), K, 96, 96, step=k)
        obs = inputs(Observation(cameras={"ego": frame}, state=np.zeros(3), instruction=instruction, step=k))
    return obs.memory


@pytest.fixture(scope="module")
def scene():
    return apartment_scene()


def test_object_table_is_egocentric_and_names_the_instructed_object_first(scene):
    inputs = MemoryInputs(MemoryInputsConfig(memory="apartment", map_size=(64, 64)))
    inputs.reset(None)
    x, y, yaw = 2.0, 3.0, 0.0  # facing +x
    mem = _look(inputs, scene, x, y, yaw, "go to the table")
    cats = list(mem["objects/category"])
    assert cats[0] == "table"  # named in the instruction: first, although the sofa is nearer
    d = mem["objects/distance_m"]
    assert list(d[1:]) == sorted(d[1:])  # the rest: nearest first
    for cat in ("table", "sofa"):
        i = cats.index(cat)
        c = scene.object(cat).center
        want_dir = math.degrees(math.atan2(c[1] - y, c[0] - x) - yaw)
        assert abs(mem["objects/direction_deg"][i] - want_dir) < 6, cat  # left positive
        assert abs(mem["objects/distance_m"][i] - math.hypot(c[0] - x, c[1] - y)) < 0.3, cat
    assert "table:" in mem["text"].split(";")[0]


@pytest.mark.parametrize("yaw", [0.0, math.pi / 2, 2.5])
def test_heading_up_map_puts_what_is_ahead_above_the_agent(scene, yaw):
    cfg = MemoryInputsConfig(memory="apartment", map_size=(80, 80), map_frame="ego_up", map_extent_m=8.0)
    inputs = MemoryInputs(cfg)
    inputs.reset(None)
    x, y = 4.5, 4.0
    mem = _look(inputs, scene, x, y, yaw, "go to the bed")
    ax, ay = mem["agent/point"]
    assert abs(ax - 500) <= 15 and abs(ay - 500) <= 15 and mem["agent/heading_deg"] == 0.0  # the agent in the middle
    for i, cat in enumerate(mem["objects/category"]):
        c = mem["objects/center"][i]  # where the memory holds it (a partly seen object's centre is biased)
        dx, dy = c[0] - x, c[1] - y
        ahead, left = math.cos(yaw) * dx + math.sin(yaw) * dy, -math.sin(yaw) * dx + math.cos(yaw) * dy
        if max(abs(ahead), abs(left)) > 0.45 * cfg.map_extent_m:
            continue  # outside the window
        px, py = mem["objects/point"][i]
        # 1000 grid units span map_extent_m metres: ahead is up (smaller y), left is left (smaller x)
        assert abs((ay - py) * cfg.map_extent_m / 1000 - ahead) < 0.35, (cat, ahead)
        assert abs((ax - px) * cfg.map_extent_m / 1000 - left) < 0.35, (cat, left)
    img = mem["topdown"]
    assert img.shape == (80, 80, 3)
    green = np.argwhere((img[..., 1] > 150) & (img[..., 0] < 100) & (img[..., 2] < 100))  # the agent's arrow
    assert len(green) and abs(green[:, 0].mean() - 40) < 8 and abs(green[:, 1].mean() - 40) < 8


def test_configs_saved_before_perception_profiles_still_load():
    """A checkpoint's memory config from before the perception profiles: zero noise options are the gt
    profile; non-zero ones are refused with where the noise went."""
    old = {"inputs": ["topdown"], "depth_sigma": 0.0, "depth_dropout": 0.0, "pose_drift_m": 0.0, "pose_drift_deg": 0}
    assert MemoryInputsConfig.from_dict(old) == MemoryInputsConfig(inputs=("topdown",))
    with pytest.raises(ValueError, match="perception=realistic"):
        MemoryInputsConfig.from_dict({**old, "depth_sigma": 0.01})


def test_memory_inputs_are_built_by_the_policy_s_one_factory():
    """Every place that needs a session's memory inputs (agents, server, data caches, offline GST) gets
    them from ``vla.policy.memory_inputs``; a ``MemoryInputs(...)`` call anywhere else is a second
    way to build them (read from the source with ``ast``)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    home = {"vla/policy/__init__.py", "vla/transforms/map_inputs.py"}
    found = []
    for package in ("vla", "envs", "spatial_memory", "scripts", "analyses"):
        for f in sorted((root / package).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if rel in home:
                continue
            for node in ast.walk(ast.parse(f.read_text(), rel)):
                if isinstance(node, ast.Call):
                    fn = node.func
                    name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                    if name == "MemoryInputs":
                        found.append(f"{rel}:{node.lineno}")
    assert not found, f"MemoryInputs(...) built outside vla.policy.memory_inputs: {found}"


def test_origins_keep_where_a_moved_object_was_first_held():
    """``origins``: the memory follows a moved bowl (its centre goes with it) while the table's ``origin``
    keeps where it stood when first held; the text says so, and ``memory/origins`` gives the named objects'
    starts and displacements as numbers (the plate, not moved, has none)."""
    from spatial_memory import MemoryConfig
    from spatial_memory.geometry import look_at
    from spatial_memory.synthetic import BoxScene, SceneBox, tabletop_scene
    from vla.transforms.map_inputs import MEMORY_FEATURES, MOVE_RANGE_M, ORIGIN_RANGE_M

    scene = tabletop_scene()
    assert {"bowl", "plate"} <= {b.category for b in scene.boxes}
    K = default_camera(64, 64, 60.0)
    poses = [look_at([0.9 * np.cos(a), 0.9 * np.sin(a), 1.6], [0.0, 0.0, 0.9]) for a in np.linspace(0, 6, 12)]
    cfg = MemoryInputsConfig(
        memory="tabletop", inputs=("objects", "text", "origins"), memory_overrides={"carve_every": 1}
    )
    assert MemoryConfig.tabletop(carve_every=1) == cfg.memory_config(False)
    inputs = MemoryInputs(cfg)
    inputs.reset(None)
    shift = np.array([0.3, -0.1, 0.0])
    moved = BoxScene(
        [b if b.category != "bowl" else SceneBox(b.center + shift, b.size, b.yaw, b.colour, b.category, b.instance_id)
         for b in scene.boxes],
        scene.bounds,
    )  # fmt: skip
    step, obs = 0, None
    for sc in (scene, moved):
        for T in poses:
            frame = sc.render(T, K, 64, 64, step=step)
            o = Observation(
                cameras={"cam": frame}, state=np.zeros(3), instruction="put the bowl on the plate", step=step
            )
            obs, step = inputs(o), step + 1
    d = obs.to_dict()
    cats = [str(c) for c in d["memory/objects/category"]]
    b, p = cats.index("bowl"), cats.index("plate")
    assert np.linalg.norm(d["memory/objects/center"][b] - moved.object("bowl").center) < 0.02
    assert np.linalg.norm(d["memory/objects/origin"][b] - scene.object("bowl").center) < 0.02
    assert np.linalg.norm(d["memory/objects/origin"][p] - d["memory/objects/center"][p]) < 0.02
    bowl_row = [r for r in d["memory/text"].split("; ") if r.startswith("bowl")][0]
    assert re.search(r"first seen -(29|30|31) cm x \+(9|10|11) cm y from here", bowl_row), bowl_row
    assert "first seen" not in [r for r in d["memory/text"].split("; ") if r.startswith("plate")][0]
    f = MEMORY_FEATURES["memory/origins"].compute(d)
    assert f.shape == (21,) and f[0] == 1 and f[7] == 1 and not f[14:].any()  # bowl, plate; nothing else named
    np.testing.assert_allclose(f[1:4], scene.object("bowl").center / ORIGIN_RANGE_M, atol=0.02)
    np.testing.assert_allclose(f[4:7], -shift / MOVE_RANGE_M, atol=0.04)
    assert np.abs(f[11:14]).max() < 0.04  # the plate stayed
    with pytest.raises(ValueError, match="'origins' is a column of the object table"):
        MemoryInputsConfig(inputs=("text", "origins"))
