"""SpatialMemory.localize: the pose of a view that comes without one (synthetic scenes, known truth)."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory import CameraFrame, LocalizeConfig, Localization, SpatialMemory, TopDownFrame
from spatial_memory.geometry import camera_yaw, make_T, pose_from_xy_yaw, rot_z, wrap_deg
from spatial_memory.scanmatch import map_index
from spatial_memory.synthetic import (
    BoxScene,
    SceneBox,
    apartment_scene,
    apartment_tour,
    default_camera,
    odometry_transform,
    reframe,
)

SIZE = 80
PITCH = np.radians(10.0)  # the tour's head camera looks 10 degrees down


def build(association: str = "instance", seed: int = 3, n_frames: int = 48):
    rng = np.random.default_rng(seed)
    scene = apartment_scene()
    K = default_camera(SIZE, SIZE)
    T_odom_world = odometry_transform(rng)
    mem = SpatialMemory(0.05, association=association)
    for i, T in enumerate(apartment_tour(n_frames)):
        mem.integrate(reframe(scene.render(T, K, SIZE, SIZE, step=i), T_odom_world))
    return scene, mem, T_odom_world, rng


@pytest.fixture(scope="module")
def world():
    return build()


def views(scene: BoxScene, T_odom_world: np.ndarray, rng: np.random.Generator, n: int) -> list[CameraFrame]:
    """Views at random free positions and headings (off the tour), poses in the odometry frame."""
    K = default_camera(SIZE, SIZE)
    out = []
    for p in scene.free_positions(n, rng):
        T = pose_from_xy_yaw(p[0], p[1], rng.uniform(-np.pi, np.pi), 1.5, PITCH)
        out.append(reframe(scene.render(T, K, SIZE, SIZE), T_odom_world))
    return out


def pose_error(T_est: np.ndarray, T_true: np.ndarray) -> tuple[float, float]:
    return float(np.hypot(*(T_est[:2, 3] - T_true[:2, 3]))), abs(
        wrap_deg(np.degrees(camera_yaw(T_est) - camera_yaw(T_true)))
    )


def without_pose(
    frame: CameraFrame, T: np.ndarray | None = None, labels: dict | None = None, instance=None
) -> CameraFrame:
    return CameraFrame(
        frame.rgb,
        frame.depth,
        frame.K,
        np.eye(4) if T is None else T,
        frame.instance if instance is None else instance,
        frame.labels if labels is None else labels,
        frame.step,
    )


def n_objects_visible(frame: CameraFrame, min_pixels: int = 20) -> int:
    ids, counts = np.unique(frame.instance, return_counts=True)
    return int(((ids > 0) & (counts >= min_pixels)).sum())


def test_off_trajectory_views_are_localised(world):
    scene, mem, T_ow, _ = world
    rng = np.random.default_rng(11)
    results = []
    for f in views(scene, T_ow, rng, 10):
        loc = mem.localize(without_pose(f))
        assert isinstance(loc, Localization) and loc.T_world_cam.shape == (4, 4)
        e_pos, e_yaw = pose_error(loc.T_world_cam, f.T_world_cam)
        good = e_pos <= 0.2 and e_yaw <= 5.0
        results.append((good, loc.ok, n_objects_visible(f)))
        if loc.ok:  # confident answers are right
            assert good, (e_pos, e_yaw, loc)
        assert 0.0 <= loc.confidence <= 1.0
    good = np.array([r[0] for r in results])
    with_objects = np.array([r[2] >= 2 for r in results])
    assert good.mean() >= 0.7, results
    assert good[with_objects].mean() >= 0.9, results


def test_the_frame_pose_is_ignored(world):
    scene, mem, T_ow, _ = world
    f = views(scene, T_ow, np.random.default_rng(5), 1)[0]
    a = mem.localize(without_pose(f, np.eye(4)))
    b = mem.localize(without_pose(f, make_T(rot_z(2.0), [40.0, -3.0, 7.0])))
    np.testing.assert_allclose(a.T_world_cam, b.T_world_cam)


def test_result_is_consistent(world):
    scene, mem, T_ow, _ = world
    f = views(scene, T_ow, np.random.default_rng(2), 1)[0]
    loc = mem.localize(without_pose(f))
    assert loc.method in ("objects", "geometry", "objects+geometry", "failed")
    assert loc.heading_deg == pytest.approx(TopDownFrame.yaw_to_map_heading(loc.yaw))
    np.testing.assert_allclose(loc.position, loc.T_world_cam[:3, 3])
    R = loc.T_world_cam[:3, :3]
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-9)
    # the camera keeps the tour's height and tilt (the prior for an unknown pose)
    assert loc.T_world_cam[2, 3] == pytest.approx(1.5, abs=0.01)
    assert np.degrees(np.arcsin(-R[2, 2])) == pytest.approx(10.0, abs=0.5)


def test_detector_mode_matches_objects_by_category():
    """association="proximity": mask ids are per frame, so the view's ids mean nothing to the memory."""
    scene, mem, T_ow, rng = build("proximity", seed=4)
    good, total = 0, 0
    for f in views(scene, T_ow, np.random.default_rng(21), 8):
        if n_objects_visible(f) < 2:
            continue
        # renumber the view's instances: the memory must go by category
        remap = {i: 100 + 7 * i for i in f.labels}
        inst = np.vectorize(lambda i: remap.get(int(i), 0))(f.instance).astype(np.int32)
        loc = mem.localize(without_pose(f, labels={remap[i]: c for i, c in f.labels.items()}, instance=inst))
        e_pos, e_yaw = pose_error(loc.T_world_cam, f.T_world_cam)
        total += 1
        good += e_pos <= 0.2 and e_yaw <= 5.0
        if loc.ok:
            assert e_pos <= 0.2 and e_yaw <= 5.0
    assert total >= 3 and good / total >= 0.75


def test_a_view_of_something_never_mapped_is_not_trusted(world):
    _, mem, _, _ = world
    # a small room with a pillar, nothing like the apartment
    boxes = [
        SceneBox(np.array([0.0, 0.0, -0.05]), np.array([6.0, 6.0, 0.1]), category="floor"),
        SceneBox(np.array([0.0, 2.0, 1.25]), np.array([4.0, 0.1, 2.5])),
        SceneBox(np.array([1.7, 0.5, 1.25]), np.array([0.1, 3.0, 2.5])),
        SceneBox(np.array([0.3, 1.2, 0.6]), np.array([0.3, 0.3, 1.2]), yaw=0.4, category="pillar", instance_id=77),
    ]
    other = BoxScene(boxes, (-3.0, -3.0, 3.0, 3.0))
    K = default_camera(SIZE, SIZE)
    f = other.render(pose_from_xy_yaw(-0.5, -0.5, np.radians(50), 1.5, PITCH), K, SIZE, SIZE)
    loc = mem.localize(f)
    assert not loc.ok and loc.confidence < 0.35 and loc.reason


def test_degenerate_inputs_fail_cleanly(world):
    scene, mem, T_ow, _ = world
    f = views(scene, T_ow, np.random.default_rng(3), 1)[0]
    blind = CameraFrame(f.rgb, np.zeros_like(f.depth), f.K, np.eye(4))
    loc = mem.localize(blind)
    assert loc.method == "failed" and not loc.ok and loc.confidence == 0.0 and "depth" in loc.reason
    assert np.isfinite(loc.T_world_cam).all()
    empty = SpatialMemory(0.05).localize(f)
    assert empty.method == "failed" and not empty.ok and "memory" in empty.reason
    with pytest.raises(TypeError):
        mem.localize(f.depth)


def test_index_follows_the_memory():
    """The cached index is rebuilt when the memory integrates more frames."""
    scene, mem, T_ow, rng = build(n_frames=12)
    f = views(scene, T_ow, np.random.default_rng(8), 1)[0]
    mem.localize(f)
    before = map_index(mem, LocalizeConfig())
    assert map_index(mem, LocalizeConfig()) is before  # kept while the memory is unchanged
    K = default_camera(SIZE, SIZE)
    for i, T in enumerate(apartment_tour(48)[12:24]):
        mem.integrate(reframe(scene.render(T, K, SIZE, SIZE, step=100 + i), T_ow))
    mem.localize(f)
    assert map_index(mem, LocalizeConfig()) is not before
    # a snapshot localises the same way as the live memory
    np.testing.assert_allclose(mem.snapshot().localize(f).T_world_cam, mem.localize(f).T_world_cam)


def test_config_knobs_take_effect(world):
    scene, mem, T_ow, _ = world
    f = views(scene, T_ow, np.random.default_rng(9), 1)[0]
    coarse = mem.localize(without_pose(f), LocalizeConfig(yaw_step_deg=10.0, candidates=4, refine=2))
    e_pos, e_yaw = pose_error(coarse.T_world_cam, f.T_world_cam)
    assert e_pos <= 0.2 and e_yaw <= 5.0, (e_pos, e_yaw)  # a coarser search still lands on the true pose
    # depth beyond max_range is not used: nothing in this view is within 0.3 m, so nothing is left to match
    assert not (f.depth < 0.3).any()
    near = mem.localize(without_pose(f), LocalizeConfig(max_range=0.3))
    assert near.method == "failed" and not near.ok and "too few valid depth points" in near.reason


@pytest.mark.slow
def test_localisation_statistics_over_many_views():
    """4 odometry frames x 15 views: success rate and precision of confident answers."""
    good, ok, ok_good, n = 0, 0, 0, 0
    for seed in range(4):
        scene, mem, T_ow, rng = build(seed=seed)
        for f in views(scene, T_ow, rng, 15):
            loc = mem.localize(without_pose(f))
            e_pos, e_yaw = pose_error(loc.T_world_cam, f.T_world_cam)
            g = e_pos <= 0.2 and e_yaw <= 5.0
            n += 1
            good += g
            ok += loc.ok
            ok_good += g and loc.ok
    assert good / n >= 0.75 and ok_good / max(ok, 1) >= 0.97, (good / n, ok / n, ok_good / max(ok, 1))
