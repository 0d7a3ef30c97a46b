"""Perception profiles (spatial_memory.perception): each sensor model against hand-computed statistics,
frame-local ids, determinism, and the rule that noise reaches the agent, never the scorer."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import camera_yaw, pose_from_xy_yaw
from spatial_memory.perception import (
    CategoryModel,
    DepthModel,
    DetectorModel,
    OdometryModel,
    PerceptionProfile,
    corrupt_depth,
)
from spatial_memory.profiles import PROFILES, profile
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera

CATS = CategoryModel.from_groups([("sofa", "armchair"), ("mug", "cup")], ("vase", "book"))


@pytest.fixture(scope="module")
def tour():
    scene = apartment_scene()
    K = default_camera(96, 96)
    return scene, [scene.render(T, K, 96, 96, step=i) for i, T in enumerate(apartment_tour(30))]


def _flat(z: float, n: int = 128) -> CameraFrame:
    depth = np.full((n, n), z, dtype=np.float32)
    inst = np.zeros((n, n), dtype=np.int32)
    inst[20:100, 20:100] = 7  # one big object
    return CameraFrame(np.zeros((n, n, 3), np.uint8), depth, default_camera(n, n), np.eye(4), inst, {7: "sofa"})


def test_gt_profile_changes_nothing(tour):
    _, frames = tour
    s = PROFILES["gt"].stream("scene")
    assert PROFILES["gt"].exact
    for f in frames[:3]:
        assert s(f) is f


def test_depth_noise_grows_with_range_drops_pixels_and_invalidates_edges():
    m = DepthModel(sigma_const=0.01, sigma_quad=0.02, dropout=0.1)
    rng = np.random.default_rng(0)
    for z in (1.0, 3.0):
        d = np.full((200, 200), z, dtype=np.float32)
        out = corrupt_depth(d, m, rng)
        valid = out > 0
        assert abs(valid.mean() - 0.9) < 0.01  # the dropout fraction
        expected = 0.01 + 0.02 * z**2  # hand-computed sigma(z)
        assert abs(np.std(out[valid] - z) / expected - 1) < 0.05
        assert abs(np.mean(out[valid] - z)) < 0.05 * expected
    # a depth edge: pixels next to a 1 m jump get no reading, the rest do
    d = np.full((50, 50), 2.0, dtype=np.float32)
    d[:, 25:] = 3.0
    out = corrupt_depth(d, DepthModel(edge_rel=0.1, edge_px=2), rng)
    assert (out[:, 23:27] == 0).all() and (out[:, :22] > 0).all() and (out[:, 28:] > 0).all()
    # beyond range: nothing
    assert (corrupt_depth(np.full((4, 4), 9.0, np.float32), DepthModel(max_range=6.0), rng) == 0).all()


def test_correlated_depth_noise_is_shared_by_neighbours():
    rng = np.random.default_rng(1)
    d = np.full((128, 128), 2.0, dtype=np.float32)
    white = corrupt_depth(d, DepthModel(sigma_quad=0.01), rng) - 2.0
    corr = corrupt_depth(d, DepthModel(sigma_quad=0.01, correlated=1.0, corr_px=8.0), rng) - 2.0

    def neighbour_corr(e):
        return float(np.corrcoef(e[:, :-1].ravel(), e[:, 1:].ravel())[0, 1])

    assert abs(neighbour_corr(white)) < 0.05 and neighbour_corr(corr) > 0.8
    assert abs(np.std(corr) / 0.04 - 1) < 0.15  # same sigma(2 m) = 0.01 * 4


def test_detector_misses_confuses_and_hallucinates_at_the_configured_rates():
    det = DetectorModel(miss_rate=0.2, confusion=0.3, false_positives=2.0, fp_pixels=(60, 200))
    p = PerceptionProfile("t", detector=det)
    frame = _flat(2.0)
    n, found, confused, fps, fp_labels = 400, 0, 0, 0, set()
    s = p.stream(("scene", "x"), CATS)
    for _ in range(n):
        out = s(frame)
        big = [i for i in out.labels if np.count_nonzero(out.instance == i) > 3000]
        found += len(big)
        confused += sum(out.labels[i] != "sofa" for i in big)
        small = [i for i in out.labels if i not in big]
        fps += len(small)
        fp_labels |= {out.labels[i] for i in small}
    assert abs(found / n - 0.8) < 0.06  # 1 - miss_rate
    assert abs(confused / found - 0.3) < 0.08
    assert {out.labels[i] for i in big} <= {"sofa", "armchair"}  # confusion only into similar classes
    assert abs(fps / n - 2.0) < 0.3  # Poisson(2) false positives (a few seeds find no surface: none)
    assert fp_labels <= {"vase", "book", "sofa", "armchair", "mug", "cup"}


def test_small_segments_are_missed_more_and_masks_err_only_near_their_boundary():
    det = DetectorModel(small_pixels=1000, mask_px=3, mask_jitter=0.3)
    p = PerceptionProfile("t", detector=det)
    s = p.stream("scene", CATS)
    frame = _flat(2.0)
    inst = np.zeros_like(frame.instance)
    inst[20:30, 20:30] = 7
    small = CameraFrame(frame.rgb, frame.depth, frame.K, frame.T_world_cam, inst, frame.labels)
    n_small = int(np.count_nonzero(small.instance))  # 10 x 10 = 100 pixels: detected about 10 % of the time
    seen = sum(bool(s(small).labels) for _ in range(300))
    assert n_small == 100 and abs(seen / 300 - 0.1) < 0.05
    truth = frame.instance == 7
    from scipy import ndimage

    inner, outer = ndimage.binary_erosion(truth, iterations=5), ndimage.binary_dilation(truth, iterations=5)
    for _ in range(20):
        out = s(frame)
        m = out.instance > 0
        assert m[inner].all() and not m[~outer].any()


def test_ids_are_frame_local(tour):
    """No id survives from one frame to the next: an id that appears in two frames never marks the same
    true object in both (ids are fresh random numbers per frame)."""
    _, frames = tour
    s = PROFILES["realistic"].stream(("apartment", "video"), CATS)
    seen: dict[tuple[int, int], int] = {}  # (id, true object under it) -> frames
    detections = 0
    for f in frames:
        out = s(f)
        for i in out.labels:
            under = f.instance[out.instance == i]
            if (under > 0).any():
                key = (i, int(np.bincount(under[under > 0]).argmax()))
                seen[key] = seen.get(key, 0) + 1
                detections += 1
    assert detections >= 25  # the objects were detected, again and again ...
    assert max(seen.values()) == 1  # ... but never twice under the same id


def test_label_tables_say_nothing_of_the_true_ids_or_of_false_positives(tour):
    """A frame's table lists its detections by their (random) ids, not in the simulator's instance-id
    order with false positives last: read in table order, the true ids under the detections are not
    sorted, and false positives (nothing true under them) are not always at the end."""
    _, frames = tour
    det = DetectorModel(miss_rate=0.0, small_pixels=0, false_positives=2.0)
    s = PerceptionProfile("t", detector=det).stream(("apartment", "order"), CATS)
    unsorted = fp_not_last = tables = 0
    for f in frames:
        out = s(f)
        trues = []
        for i in out.labels:  # table order
            under = f.instance[out.instance == i]
            under = under[under > 0]
            trues.append(int(np.bincount(under).argmax()) if len(under) else None)
        assert list(out.labels) == sorted(out.labels)
        real = [t for t in trues if t is not None]
        if len(real) >= 3:
            tables += 1
            unsorted += real != sorted(real)
        if None in trues and len(real) >= 2:
            fp_not_last += trues.index(None) < len(real)
    assert tables >= 10 and unsorted >= tables // 2 and fp_not_last >= 3


def test_odometry_drifts_by_dead_reckoning(tour):
    _, frames = tour
    m = OdometryModel(sigma_xy_m=0.01, sigma_yaw_deg=0.5)
    p = PerceptionProfile("t", odometry=m)
    # a straight walk along x, 1 m per frame, camera level: the drift of the position across the walk is
    # driven by the accumulated heading error (dead reckoning), so it grows faster than sqrt(n)
    poses = [pose_from_xy_yaw(float(k), 0.0, 0.0, 1.5) for k in range(60)]
    base = frames[0]
    errs_y, errs_yaw = [], []
    for seed in range(40):
        s = p.with_seed(seed).stream("walk")
        for k, T in enumerate(poses):
            out = s(CameraFrame(base.rgb, base.depth, base.K, T, base.instance, base.labels, k))
        assert np.allclose(s.T_drift[2], [0, 0, 1, 0]) and np.allclose(s.T_drift[:3, 2], [0, 0, 1])  # planar
        errs_y.append(out.T_world_cam[1, 3])
        errs_yaw.append(np.degrees(camera_yaw(out.T_world_cam)))
    # heading: a random walk of 59 steps of 0.5 degrees -> std 0.5 * sqrt(59) = 3.8 degrees
    assert 2.8 < np.std(errs_yaw) < 4.9
    # lateral: sum over steps of (accumulated heading) x 1 m -> std ~ 0.5 deg * sqrt(sum k^2) = 0.0087 * 264 m
    assert 1.4 < np.std(errs_y) < 3.2
    first = p.stream("walk")(CameraFrame(base.rgb, base.depth, base.K, poses[0], base.instance, base.labels))
    assert np.allclose(first.T_world_cam, poses[0])  # the odometry starts at the true pose


def test_streams_are_deterministic_per_seed_and_key(tour):
    _, frames = tour
    p = PROFILES["harsh"]
    a = [p.stream(("s", 1), CATS)(f) for f in frames[:5]]
    b = [p.stream(("s", 1), CATS)(f) for f in frames[:5]]
    c = [p.with_seed(3).stream(("s", 1), CATS)(f) for f in frames[:5]]
    for x, y, z in zip(a, b, c):
        assert np.array_equal(x.depth, y.depth) and np.array_equal(x.instance, y.instance) and x.labels == y.labels
        assert not np.array_equal(x.depth, z.depth)
    assert np.allclose(a[-1].T_world_cam, b[-1].T_world_cam)


def test_profiles_from_config_and_bad_values():
    assert profile("realistic") is PROFILES["realistic"]
    p = profile({"name": "realistic", "seed": 4, "overrides": {"depth": {"sigma_quad": 0.02}, "odometry": None}})
    assert (
        p.seed == 4
        and p.depth.sigma_quad == 0.02
        and p.odometry is None
        and p.detector == PROFILES["realistic"].detector
    )
    with pytest.raises(ValueError, match="unknown perception profile"):
        profile("perfect")
    with pytest.raises(ValueError, match="sigma_quad"):
        profile({"name": "harsh", "overrides": {"depth": {"sigma_quad": -1}}})
    with pytest.raises(ValueError, match=r"unknown perception depth option\(s\) \[.sigma.\]; valid options: .*sigma_q"):
        profile({"name": "harsh", "overrides": {"depth": {"sigma": 1}}})


def test_robot_sensors_drift_the_state_with_the_camera():
    from envs.observation import Observation
    from envs.perception import RobotSensors
    from envs.spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec

    spec = EnvSpec(
        family="house",
        action=ActionSpec((-1, -1, -1), (1, 1, 1), ("forward_m", "left_m", "yaw_rad")),
        state=ArraySpec((3,), "float64", ("x_m", "y_m", "yaw_rad")),
        cameras=(CameraSpec("ego", 16, 16, depth=True, instance=True),),
    )
    sensors = RobotSensors(PROFILES["harsh"], ("scene", 0), spec)
    rgb = np.zeros((16, 16, 3), np.uint8)
    depth = np.full((16, 16), 2.0, np.float32)
    for k in range(30):
        x, yaw = 0.3 * k, 0.1 * k
        T = pose_from_xy_yaw(x, 0.0, yaw, 1.5)
        cam = CameraFrame(rgb, depth, default_camera(16, 16), T, np.zeros((16, 16), np.int32), {})
        obs = sensors(Observation({"ego": cam}, np.array([x, 0.0, yaw]), "go", k))
        Tr = obs.cameras["ego"].T_world_cam
        # the state is the drifted camera's floor pose: same position, same heading
        assert np.allclose(obs.state[:2], Tr[:2, 3], atol=1e-9)
        assert abs(np.angle(np.exp(1j * (obs.state[2] - camera_yaw(Tr))))) < 1e-9
    assert not np.allclose(obs.state, [x, 0.0, yaw])  # it did drift
