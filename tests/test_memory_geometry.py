"""Property tests of the geometry the memory is built on: transforms, pinhole maths, angles, VST
boxes and the top-down frame (docs/ARCHITECTURE.md §4 conventions)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatial_memory.geometry import (
    backproject,
    camera_box_to_vst,
    camera_yaw,
    egocentric_bearing,
    intrinsics_from_fovy,
    invert_T,
    look_at,
    make_T,
    pose_from_xy_yaw,
    project,
    rot_x,
    rot_y,
    rot_z,
    transform_points,
    vst_box_to_camera,
    wrap_deg,
)
from spatial_memory.topdown import TopDownFrame

fast = settings(max_examples=60, deadline=None)

angles = st.floats(-np.pi, np.pi, allow_nan=False)
coords = st.floats(-50, 50, allow_nan=False)


def random_T(a: float, b: float, c: float, x: float, y: float, z: float) -> np.ndarray:
    return make_T(rot_z(a) @ rot_y(b) @ rot_x(c), [x, y, z])


@fast
@given(angles, angles, angles, coords, coords, coords)
def test_invert_T_round_trip(a, b, c, x, y, z):
    T_world_cam = random_T(a, b, c, x, y, z)
    np.testing.assert_allclose(invert_T(T_world_cam) @ T_world_cam, np.eye(4), atol=1e-9)
    p_cam = np.array([[1.0, -2.0, 3.0], [0.5, 0.5, 0.5]])
    p_world = transform_points(T_world_cam, p_cam)
    np.testing.assert_allclose(transform_points(invert_T(T_world_cam), p_world), p_cam, atol=1e-9)


@fast
@given(st.floats(30, 120), st.sampled_from([1.0, -1.0]), st.integers(8, 64), st.integers(8, 64))
def test_backproject_then_project_is_identity_even_mirrored(fovy, sign, w, h):
    K = intrinsics_from_fovy(fovy, w, h)
    K[0, 0] *= sign  # LIBERO's 180-degree protocol rotation gives a mirrored image: fx < 0
    depth = np.random.default_rng(0).uniform(0.5, 5.0, (h, w))
    p_cam = backproject(depth, K).reshape(-1, 3)
    v, u = np.mgrid[0:h, 0:w]
    np.testing.assert_allclose(project(K, p_cam), np.stack([u.ravel(), v.ravel()], -1), atol=1e-9)
    np.testing.assert_allclose(p_cam[:, 2], depth.ravel())


@fast
@given(st.floats(-1e4, 1e4, allow_nan=False))
def test_wrap_deg_range_and_equivalence(a):
    w = wrap_deg(a)
    assert -180.0 < w <= 180.0
    assert np.isclose(np.cos(np.radians(w)), np.cos(np.radians(a)), atol=1e-6)
    assert np.isclose(np.sin(np.radians(w)), np.sin(np.radians(a)), atol=1e-6)


def test_wrap_deg_boundaries():
    assert wrap_deg(-180.0) == 180.0 and wrap_deg(180.0) == 180.0 and wrap_deg(540.0) == 180.0
    np.testing.assert_array_equal(wrap_deg(np.array([-180.0, 0.0, 360.0])), [180.0, 0.0, 0.0])


@fast
@given(coords, coords, angles, st.floats(0.1, 20.0), st.floats(-179, 179))
def test_egocentric_bearing_matches_analytic(x, y, yaw, dist, bearing_deg):
    """A point placed at a known bearing (left positive) and distance is read back exactly."""
    T_world_cam = pose_from_xy_yaw(x, y, yaw, 1.5, pitch_down_rad=0.3)
    a = yaw + np.radians(bearing_deg)
    p_world = np.array([x + dist * np.cos(a), y + dist * np.sin(a), 0.3])
    d, r = egocentric_bearing(T_world_cam, p_world)
    assert abs(wrap_deg(d - bearing_deg)) < 1e-6
    assert r == pytest.approx(dist, rel=1e-9)


def test_left_is_positive_in_camera_terms():
    """A point left in the image (negative x_cam) has a positive direction; right is negative."""
    T_world_cam = pose_from_xy_yaw(0, 0, 0.7, 1.5)
    left = transform_points(T_world_cam, np.array([[-1.0, 0.0, 3.0]]))[0]
    right = transform_points(T_world_cam, np.array([[1.0, 0.0, 3.0]]))[0]
    assert egocentric_bearing(T_world_cam, left)[0] > 0 > egocentric_bearing(T_world_cam, right)[0]


def test_camera_yaw_of_a_camera_looking_straight_down_uses_image_up():
    T = look_at([0, 0, 2.0], [0, 0, 0], up_world=[0, 1, 0])  # image up = world +y
    assert camera_yaw(T) == pytest.approx(np.pi / 2)


@fast
@given(angles, angles, angles, coords, coords, coords)
def test_look_at_is_a_proper_opencv_pose(a, b, c, x, y, z):
    eye = np.array([x, y, z])
    target = eye + np.array([np.cos(a) * np.cos(b), np.sin(a) * np.cos(b), np.sin(b) * 0.9])
    T = look_at(eye, target)
    R = T[:3, :3]
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-9)
    assert np.linalg.det(R) == pytest.approx(1.0)
    np.testing.assert_allclose(R[:, 2], (target - eye) / np.linalg.norm(target - eye), atol=1e-9)
    assert R[2, 1] <= 1e-9  # image y (down) never points up


@fast
@given(st.floats(-0.49, 0.49), st.floats(-0.99, 0.99), st.floats(-0.99, 0.99))
def test_vst_box_round_trip(pitch, yaw, roll):
    box9 = np.array([0.3, -0.2, 2.5, 0.4, 0.5, 0.6, pitch, yaw, roll])
    c, s, R = vst_box_to_camera(box9)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-9)
    back = camera_box_to_vst(c, s, R)
    _, _, R2 = vst_box_to_camera(back)
    np.testing.assert_allclose(R2, R, atol=1e-9)
    np.testing.assert_allclose(back[:6], box9[:6])


def test_vst_box_convention_matches_qwen_cookbook():
    """Box point rotated about x by pitch, then y by yaw, then z by roll (Qwen-VL 3D grounding)."""
    pitch, yaw, roll = 30.0, 40.0, 50.0
    _, _, R = vst_box_to_camera([0, 0, 1, 1, 1, 1, pitch / 180, yaw / 180, roll / 180])
    p = np.array([0.1, 0.2, 0.3])
    x0, y0, z0 = p
    P, Y, Rl = np.radians([pitch, yaw, roll])
    y1, z1 = y0 * np.cos(P) - z0 * np.sin(P), y0 * np.sin(P) + z0 * np.cos(P)
    x2, z2 = x0 * np.cos(Y) + z1 * np.sin(Y), -x0 * np.sin(Y) + z1 * np.cos(Y)
    x3, y3 = x2 * np.cos(Rl) - y1 * np.sin(Rl), x2 * np.sin(Rl) + y1 * np.cos(Rl)
    np.testing.assert_allclose(R @ p, [x3, y3, z2], atol=1e-12)


@pytest.mark.parametrize("bad", [[1, 2, 3], [0, 0, 1, -1, 1, 1, 0, 0, 0], [0, 0, np.nan, 1, 1, 1, 0, 0, 0]])
def test_vst_box_rejects_malformed(bad):
    with pytest.raises(ValueError, match="VST box"):
        vst_box_to_camera(bad)


# ------------------------------------------------------------------------------------- top-down
frames_st = st.builds(
    lambda x, y, w, h: TopDownFrame(x, y, x + w, y + h),
    st.floats(-20, 20),
    st.floats(-20, 20),
    st.floats(0.5, 30),
    st.floats(0.5, 30),
)


@fast
@given(frames_st, st.floats(0, 1), st.floats(0, 1))
def test_world_pixel_round_trip(frame, fu, fv):
    x0, y0, x1, y1 = frame.bounds
    xy = np.array([x0 + fu * (x1 - x0), y0 + fv * (y1 - y0)])
    np.testing.assert_allclose(frame.pixel_to_world(frame.world_to_pixel(xy)), xy, atol=1e-9)


@fast
@given(frames_st, st.integers(0, 999), st.integers(0, 999))
def test_grid_world_grid_round_trip(frame, gx, gy):
    g = np.array([gx, gy])
    np.testing.assert_array_equal(frame.world_to_grid(frame.grid_to_world(g)), g)


@fast
@given(frames_st, st.floats(0, 1), st.floats(0, 1))
def test_world_grid_world_within_one_bin(frame, fu, fv):
    x0, y0, x1, y1 = frame.bounds
    xy = np.array([x0 + fu * (x1 - x0), y0 + fv * (y1 - y0)])
    back = frame.grid_to_world(frame.world_to_grid(xy))
    bin_m = np.array([frame.width, frame.height]) / 1000 * frame.metres_per_pixel
    assert np.all(np.abs(back - xy) <= bin_m / 2 + 1e-9)


def test_topdown_axes():
    """Image x = world +x, image y = world -y; the box is centred and scale is uniform."""
    f = TopDownFrame(0, 0, 10, 8)
    assert f.metres_per_pixel == pytest.approx(10 / 640)
    u0, v0 = f.world_to_pixel(np.array([5.0, 4.0]))
    u1, v1 = f.world_to_pixel(np.array([6.0, 5.0]))
    assert (u0, v0) == pytest.approx((320, 256))
    assert u1 > u0 and v1 < v0
    np.testing.assert_array_equal(f.world_to_grid(np.array([5.0, 4.0])), [500, 500])


@fast
@given(angles)
def test_map_heading_round_trip_and_convention(yaw):
    h = TopDownFrame.yaw_to_map_heading(yaw)
    assert -180 < h <= 180
    assert abs(wrap_deg(np.degrees(TopDownFrame.map_heading_to_yaw(h)) - np.degrees(yaw))) < 1e-9


def test_map_heading_examples():
    assert TopDownFrame.yaw_to_map_heading(np.pi / 2) == 0.0  # facing +y = image up
    assert TopDownFrame.yaw_to_map_heading(np.pi) == pytest.approx(90.0)  # facing -x = image left: a left turn
    assert TopDownFrame.yaw_to_map_heading(0.0) == pytest.approx(-90.0)
