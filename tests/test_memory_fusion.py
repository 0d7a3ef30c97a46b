"""Fusion on synthetic box scenes rendered by a pinhole ray caster: objects, association modes,
detector boxes, moving objects, trajectory and bounded growth."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory import MemoryConfig, SpatialMemory, TopDownFrame
from spatial_memory.geometry import (
    camera_box_to_vst,
    egocentric_bearing,
    invert_T,
    look_at,
    pose_from_xy_yaw,
    rot_z,
    wrap_deg,
)
from spatial_memory.synthetic import BoxScene, SceneBox, apartment_scene, apartment_tour, default_camera, tabletop_scene

VOXEL = 0.05
SIZE = 64


def orbit_scene() -> BoxScene:
    """A 6 x 6 m room with three objects near its middle, two of them of the same category."""
    boxes = [
        SceneBox(np.array([0.0, 0.0, -0.05]), np.array([6.4, 6.4, 0.1]), colour=(150, 110, 80), category="floor"),
        SceneBox(np.array([0.5, 0.2, 0.4]), np.array([0.8, 0.5, 0.8]), 0.4, (200, 60, 60), "cabinet", 1),
        SceneBox(np.array([-0.6, 0.5, 0.25]), np.array([0.4, 0.4, 0.5]), 0.0, (60, 200, 60), "chair", 2),
        SceneBox(np.array([0.0, -0.8, 0.25]), np.array([0.4, 0.4, 0.5]), 0.0, (60, 60, 200), "chair", 3),
    ]
    return BoxScene(boxes, (-3.0, -3.0, 3.0, 3.0))


def orbit_poses(n: int = 24, radius: float = 2.5, height: float = 1.6) -> list[np.ndarray]:
    return [
        look_at([radius * np.cos(a), radius * np.sin(a), height], [0.0, 0.0, 0.3])
        for a in np.linspace(0, 2 * np.pi, n, endpoint=False)
    ]


@pytest.fixture(scope="module")
def orbit():
    scene = orbit_scene()
    K = default_camera(SIZE, SIZE, 70.0)
    frames = [scene.render(T, K, SIZE, SIZE, step=i) for i, T in enumerate(orbit_poses())]
    return scene, frames


@pytest.fixture(scope="module")
def orbit_memory(orbit):
    mem = SpatialMemory(VOXEL)
    for f in orbit[1]:
        mem.integrate(f)
    return mem


def test_objects_recovered_within_a_voxel(orbit, orbit_memory):
    scene, _ = orbit
    mem = orbit_memory
    assert sorted(o.category for o in mem.objects()) == ["cabinet", "chair", "chair"]
    for box in scene.objects():
        obj = mem.object(box.instance_id)
        assert obj.category == box.category
        assert np.linalg.norm(obj.center - box.center) <= VOXEL, (obj.id, obj.center, box.center)
        # sizes: the footprint may come out turned by 90 degrees (a box is symmetric), so compare sorted
        assert np.abs(np.sort(obj.size[:2]) - np.sort(box.size[:2])).max() <= 2 * VOXEL
        assert abs(obj.size[2] - box.size[2]) <= 2 * VOXEL
        assert obj.n_observations > 10 and obj.first_seen == 0 and obj.last_seen >= obj.first_seen
    cab = mem.object("cabinet")
    assert abs(wrap_deg(np.degrees(cab.yaw - 0.4) * 4) / 4) < 3.0  # yaw modulo 90 degrees


def test_egocentric_matches_analytic_values(orbit, orbit_memory):
    scene, frames = orbit
    mem = orbit_memory
    for T in [frames[-1].T_world_cam, pose_from_xy_yaw(2.0, -2.0, 2.3, 1.5), pose_from_xy_yaw(-2.5, 0.0, 0.0, 1.5)]:
        for box in scene.objects():
            d, r = mem.egocentric(box.instance_id, T)
            td, tr = egocentric_bearing(T, box.center)
            assert abs(wrap_deg(d - td)) < 2.0 and abs(r - tr) < VOXEL
    # default pose = the latest frame
    assert mem.egocentric("cabinet") == mem.egocentric("cabinet", frames[-1].T_world_cam)


def test_direction_sign_left_positive(orbit_memory):
    mem = orbit_memory
    cab = mem.object("cabinet").center
    # stand 3 m away looking 30 degrees to the right of the cabinet: it is on the left
    T = pose_from_xy_yaw(cab[0] - 3.0, cab[1], np.radians(-30), 1.5)
    d, r = mem.egocentric("cabinet", T)
    assert d == pytest.approx(30.0, abs=2.0) and r == pytest.approx(3.0, abs=VOXEL)
    T = pose_from_xy_yaw(cab[0] - 3.0, cab[1], np.radians(30), 1.5)
    assert mem.egocentric("cabinet", T)[0] == pytest.approx(-30.0, abs=2.0)
    T = pose_from_xy_yaw(cab[0] - 3.0, cab[1], np.pi, 1.5)  # facing away: behind is 180, never -180
    assert abs(mem.egocentric("cabinet", T)[0]) > 175


def test_unknown_and_ambiguous_targets_list_candidates(orbit_memory):
    mem = orbit_memory
    with pytest.raises(KeyError, match="ambiguous.*chair_1.*chair_2"):
        mem.egocentric("chair")
    with pytest.raises(KeyError, match="no object 'sofa'.*cabinet_1"):
        mem.object("sofa")
    with pytest.raises(KeyError, match="instance id 99"):
        mem.object(99)
    assert mem.object("chair_2").category == "chair"


def test_proximity_association_with_unstable_ids(orbit):
    """Detector mode: ids change every frame, objects are still tracked one to one."""
    scene, frames = orbit
    mem = SpatialMemory(VOXEL, association="proximity")
    rng = np.random.default_rng(0)
    for f in frames:
        perm = rng.permutation(50)[:4] + 10  # fresh ids each frame
        inst = np.where(f.instance > 0, perm[f.instance], 0).astype(np.int32)
        labels = {int(perm[i]): c for i, c in f.labels.items()}
        mem.integrate(
            type(f)(
                rgb=f.rgb, depth=f.depth, K=f.K, T_world_cam=f.T_world_cam, instance=inst, labels=labels, step=f.step
            )
        )
    objs = mem.objects()
    assert sorted(o.id for o in objs) == ["cabinet_1", "chair_1", "chair_2"]
    for box in scene.objects():
        nearest = min(np.linalg.norm(o.center - box.center) for o in objs if o.category == box.category)
        assert nearest <= 2 * VOXEL
    assert all(o.instance_id is None for o in objs)


def test_integrate_boxes_builds_the_registry(orbit):
    """VST 9-DoF boxes (camera frame, angles / 180) with noise fuse into one object per instance."""
    scene, frames = orbit
    mem = SpatialMemory(VOXEL)
    rng = np.random.default_rng(1)
    for f in frames:
        T_cam_world = invert_T(f.T_world_cam)
        dets = []
        for box in scene.objects():
            c_cam = T_cam_world[:3, :3] @ box.center + T_cam_world[:3, 3]
            R_cam_box = T_cam_world[:3, :3] @ rot_z(box.yaw)
            b9 = camera_box_to_vst(c_cam + rng.normal(0, 0.02, 3), box.size + rng.normal(0, 0.02, 3), R_cam_box)
            dets.append({"label": box.category, "bbox_3d": b9.tolist()})
        ids = mem.integrate_boxes(dets, f.T_world_cam, f.step, record_pose=True)
        assert len(ids) == 3
    objs = {o.id: o for o in mem.objects()}
    assert sorted(objs) == ["cabinet_1", "chair_1", "chair_2"]
    cab = objs["cabinet_1"]
    gt = scene.object("cabinet")
    assert np.linalg.norm(cab.center - gt.center) < 0.02
    assert np.abs(np.sort(cab.size[:2]) - np.sort(gt.size[:2])).max() < 0.03
    assert abs(wrap_deg(np.degrees(cab.yaw - gt.yaw) * 4) / 4) < 2.0
    assert cab.n_observations == len(frames)
    assert len(mem.trajectory()[0]) == len(frames)


def test_integrate_boxes_bad_input(orbit):
    mem = SpatialMemory(VOXEL)
    T = orbit[1][0].T_world_cam
    with pytest.raises(ValueError, match="category"):
        mem.integrate_boxes([[0, 0, 1, 1, 1, 1, 0, 0, 0]], T, 0)
    with pytest.raises(ValueError, match="VST box"):
        mem.integrate_boxes([("chair", [0, 0, 1])], T, 0)
    with pytest.raises(ValueError, match="2 categories"):
        mem.integrate_boxes([[0, 0, 1, 1, 1, 1, 0, 0, 0]], T, 0, categories=["a", "b"])
    assert mem.integrate_boxes([[0, 0, 2, 1, 1, 1, 0, 0, 0]], T, 0, categories=["chair"]) == ["chair_1"]


def test_moved_object_is_followed_and_its_old_place_carved():
    scene = tabletop_scene()
    K = default_camera(SIZE, SIZE, 60.0)
    poses = [
        look_at([0.9 * np.cos(a), 0.9 * np.sin(a), 1.6], [0.0, 0.0, 0.9])
        for a in np.linspace(0, 2 * np.pi, 12, endpoint=False)
    ]
    mem = SpatialMemory(config=MemoryConfig.tabletop(carve_every=1))
    for i, T in enumerate(poses):
        mem.integrate(scene.render(T, K, SIZE, SIZE, step=i))
    bowl = scene.object("bowl")
    assert np.linalg.norm(mem.object("bowl").center - bowl.center) < 0.01
    moved = BoxScene(
        [
            b
            if b.category != "bowl"
            else SceneBox(b.center + [0.3, -0.1, 0.0], b.size, b.yaw, b.colour, b.category, b.instance_id)
            for b in scene.boxes
        ],
        scene.bounds,
    )
    for i, T in enumerate(poses):
        mem.integrate(moved.render(T, K, SIZE, SIZE, step=100 + i))
    assert np.linalg.norm(mem.object("bowl").center - moved.object("bowl").center) < 0.01
    # the old place shows the table again on the easy map
    frame = TopDownFrame(-0.6, -0.5, 0.6, 0.5)
    lay = mem.layers(frame)
    u, v = frame.world_to_pixel(bowl.center[:2]).astype(int)
    assert lay.top_z[v, u] < 0.91  # table top at 0.9 m, the bowl reached 0.96 m


def test_revisits_do_not_grow_the_map(orbit):
    _, frames = orbit
    mem = SpatialMemory(VOXEL)
    for f in frames:
        mem.integrate(f)
    n_vox, nbytes = len(mem.voxels), mem.voxels.nbytes
    for f in frames:
        mem.integrate(f)
    assert len(mem.voxels) == n_vox and mem.voxels.nbytes == nbytes
    assert len(mem.objects()) == 3
    assert all(o.n_points <= mem.config.max_points for o in mem.objects())


def test_trajectory_and_agent_pose(orbit):
    _, frames = orbit
    mem = SpatialMemory(VOXEL)
    with pytest.raises(LookupError, match="integrate a frame first"):
        mem.agent_pose()
    for f in frames[:5]:
        mem.integrate(f)
    mem.integrate(frames[5], record_pose=False)  # e.g. a wrist camera
    poses, steps = mem.trajectory()
    assert poses.shape == (5, 4, 4) and steps.tolist() == [0, 1, 2, 3, 4]
    pose = mem.agent_pose()
    np.testing.assert_allclose(pose.T_world_cam, frames[4].T_world_cam)
    np.testing.assert_allclose(pose.position, frames[4].T_world_cam[:3, 3])
    assert pose.step == 4
    fwd = frames[4].T_world_cam[:3, 2]
    assert pose.heading_deg == pytest.approx(wrap_deg(np.degrees(np.arctan2(fwd[1], fwd[0])) - 90))


def test_apartment_tour_finds_every_object():
    scene = apartment_scene()
    K = default_camera(48, 48)
    mem = SpatialMemory(VOXEL)
    for i, T in enumerate(apartment_tour(28)):
        mem.integrate(scene.render(T, K, 48, 48, step=i))
    assert sorted(o.category for o in mem.objects()) == sorted(b.category for b in scene.objects())
    for box in scene.objects():
        assert np.linalg.norm(mem.object(box.category).center[:2] - box.center[:2]) < 0.5


def test_egocentric_rejects_bad_poses(orbit_memory):
    with pytest.raises(ValueError, match="egocentric: T_world_cam"):
        orbit_memory.egocentric("cabinet", np.full((4, 4), np.nan))
    with pytest.raises(ValueError, match="egocentric: T_world_cam"):
        orbit_memory.egocentric("cabinet", [[1, 2], [3, 4]])


@pytest.mark.parametrize("flip_v", [False, True])
def test_mirrored_images_with_negative_focal_length_fuse_identically(orbit, flip_v):
    """LIBERO's 180-degree protocol rotation yields a mirrored image: fx < 0 describes it exactly."""
    _, frames = orbit
    plain, mirrored = SpatialMemory(VOXEL), SpatialMemory(VOXEL)
    for f in frames[:6]:
        K = f.K.copy()
        K[0, 0], K[0, 2] = -K[0, 0], (f.width - 1) - K[0, 2]
        sl = (slice(None, None, -1) if flip_v else slice(None), slice(None, None, -1))
        if flip_v:
            K[1, 1], K[1, 2] = -K[1, 1], (f.height - 1) - K[1, 2]
        m = type(f)(
            rgb=np.ascontiguousarray(f.rgb[sl]),
            depth=np.ascontiguousarray(f.depth[sl]),
            K=K,
            T_world_cam=f.T_world_cam,
            instance=np.ascontiguousarray(f.instance[sl]),
            labels=f.labels,
            step=f.step,
        )
        plain.integrate(f)
        mirrored.integrate(m)
    a, b = plain.voxels, mirrored.voxels
    assert len(a) == len(b)
    key = lambda vm: np.lexsort(vm.field("ijk").T)  # noqa: E731
    np.testing.assert_array_equal(a.field("ijk")[key(a)], b.field("ijk")[key(b)])
    np.testing.assert_array_equal(a.field("hits")[key(a)], b.field("hits")[key(b)])
    for o in plain.objects():
        np.testing.assert_allclose(mirrored.object(o.id).center, o.center, atol=VOXEL / 2)  # other pixels sampled


def _carve_reference(vm, T_cam_world, K, depth, margin_abs, margin_rel):
    """Voxel carving by its rule, voxel by voxel (numpy), behind the same block test as the kernel's
    (blocks behind the camera or whose bounding circle misses the image are not visited)."""
    from spatial_memory import _kernels as kern

    s, B = vm.voxel_size, kern.BLOCK
    H, W = depth.shape
    r = 0.5 * np.sqrt(3.0) * B * s
    hits = vm.field("hits").copy()
    ijk = vm.field("ijk").astype(np.float64)
    blocks = np.floor_divide(vm.field("ijk"), B)
    c = (blocks * B + 0.5 * B) * s @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = K[0, 0] * c[:, 0] / c[:, 2] + K[0, 2], K[1, 1] * c[:, 1] / c[:, 2] + K[1, 2]
        ru, rv = abs(K[0, 0]) * r / (c[:, 2] - r) + 1, abs(K[1, 1]) * r / (c[:, 2] - r) + 1
    out = (u + ru < -0.5) | (u - ru > W - 0.5) | (v + rv < -0.5) | (v - rv > H - 0.5)
    visit = (c[:, 2] >= -r) & ~((c[:, 2] > r) & out)
    p = (ijk + 0.5) * s @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
    front = p[:, 2] > 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        pu = np.floor(K[0, 0] * p[:, 0] / p[:, 2] + K[0, 2] + 0.5)
        pv = np.floor(K[1, 1] * p[:, 1] / p[:, 2] + K[1, 2] + 0.5)
    inside = front & (pu >= 0) & (pu < W) & (pv >= 0) & (pv < H)
    d = np.full(len(p), -1.0)
    d[inside] = depth[pv[inside].astype(int), pu[inside].astype(int)]
    d[~(np.isfinite(d) & (d > 0))] = -1.0
    seen_through = visit & (hits > 0) & (d > 0) & (d > p[:, 2] + margin_abs + margin_rel * p[:, 2])
    hits[seen_through] = hits[seen_through] // 2 - 1
    return hits


def test_voxel_carving_skips_only_blocks_it_cannot_carve():
    """Carving skips a block when no pixel it may project to measures beyond it; the result must be
    exactly the rule applied to every voxel (the skipped blocks held nothing to carve)."""
    scene, K = apartment_scene(), default_camera(96, 96)
    mem = SpatialMemory(carve_every=0)
    for T in apartment_tour(24):
        mem.integrate(scene.render(T, K, 96, 96))
    for T in apartment_tour(7)[1::2]:  # other views: some see through walls' far sides, some not
        frame = scene.render(T, K, 96, 96)
        depth = frame.depth.copy()
        depth[10:30, 40:60] = np.inf  # invalid pixels say nothing
        depth[50:70, 5:25] *= 1.6  # and a patch that measures beyond the surfaces: free space to carve
        vm = mem.voxels.copy()
        T_cam_world = np.linalg.inv(T)
        expected = _carve_reference(vm, T_cam_world, K, depth, 0.1, 0.03)
        vm.carve(T_cam_world, K, depth, 0.1, 0.03)
        assert np.array_equal(vm.field("hits"), expected)
        assert (expected != mem.voxels.field("hits")).any()  # something was carved
