"""envs/omnigibson/convert.py and topdown.py: OmniGibson 1.1.1's formats in our contracts, on synthetic arrays.

Every expectation is worked out by hand from the documented conventions (quaternions x, y, z, w;
USD cameras x right, y up, looking down -z; OmniGibson's intrinsics and map frames as its source
states them) or comes from a second implementation (scipy's rotations); none reads the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from envs.omnigibson.config import SCENES, SPLITS, OmniGibsonConfig
from envs.omnigibson.convert import (
    box_from_aabb,
    box_from_bbox,
    cv_camera_from_usd,
    depth_from_og,
    focal_length_for_hfov,
    frame_to_scene,
    instance_from_og,
    intrinsics,
    matrix_to_quat_xyzw,
    navgrid_from_trav_map,
    pose_to_T,
    quat_xyzw_to_matrix,
    resize_dataset_map,
    rgb_from_og,
    usd_camera_from_cv,
    vertical_aperture_for,
    wall_cells,
)
from envs.omnigibson.sim import env_config
from envs.omnigibson.topdown import T_world_down, cells_on_map, down_tiles, empty_easy, fill_gaps, scene_frame, splat
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import invert_T, project, transform_points
from spatial_memory.topdown import TopDownFrame

S2 = math.sqrt(0.5)


# ------------------------------------------------------------------------------------------- rotations
def test_quaternions_are_x_y_z_w():
    Rz = quat_xyzw_to_matrix([0.0, 0.0, S2, S2])  # +90 degrees about z
    assert np.allclose(Rz @ [1, 0, 0], [0, 1, 0]) and np.allclose(Rz @ [0, 1, 0], [-1, 0, 0])
    Rx = quat_xyzw_to_matrix([S2, 0.0, 0.0, S2])  # +90 degrees about x
    assert np.allclose(Rx @ [0, 1, 0], [0, 0, 1])
    assert np.allclose(quat_xyzw_to_matrix([0, 0, 0, 1]), np.eye(3))
    assert np.allclose(quat_xyzw_to_matrix([0, 0, 0, 2.0]), np.eye(3))  # normalised
    with pytest.raises(ValueError, match="quaternion"):
        quat_xyzw_to_matrix([0, 0, 0, 0])
    with pytest.raises(ValueError, match="quaternion"):
        quat_xyzw_to_matrix([0, 0, 1])


def test_matrix_to_quaternion_agrees_with_scipy_everywhere():
    rng = np.random.default_rng(0)
    rots = [Rotation.from_rotvec(v) for v in rng.normal(size=(200, 3)) * 2.0]
    rots += [Rotation.from_rotvec([math.pi, 0, 0]), Rotation.from_rotvec([0, math.pi - 1e-9, 0])]
    for r in rots:
        q = matrix_to_quat_xyzw(r.as_matrix())
        ref = r.as_quat()  # scipy: scalar last (x, y, z, w)
        ref = -ref if ref[3] < 0 else ref
        assert q[3] >= 0 and (np.allclose(q, ref, atol=1e-7) or (abs(q[3]) < 1e-7 and np.allclose(q, -ref, atol=1e-7)))
        assert np.allclose(quat_xyzw_to_matrix(q), r.as_matrix(), atol=1e-9)


# ------------------------------------------------------------------------------------------- cameras
def test_a_usd_camera_at_the_identity_looks_straight_down():
    """OmniGibson's tests/test_sensors.py: the viewer camera at orientation (0, 0, 0, 1) 1.5 m up sees the table."""
    T_cv = cv_camera_from_usd(pose_to_T([0.0, 0.0, 1.5], [0, 0, 0, 1]))
    p_world = np.array([[0.2, 0.1, 0.0]])  # on the floor, 0.2 east and 0.1 north of the camera
    p_cv = transform_points(invert_T(T_cv), p_world)[0]
    # USD camera coordinates of that point: (0.2, 0.1, -1.5) -- in front (-z), up-image is +y_usd = world north.
    # OpenCV: same x, y flipped (down), z flipped (forward).
    assert np.allclose(p_cv, [0.2, -0.1, 1.5])
    assert np.allclose(usd_camera_from_cv(T_cv), pose_to_T([0.0, 0.0, 1.5], [0, 0, 0, 1]))


def test_a_camera_looking_east_projects_like_omnigibson_with_half_a_pixel_shift():
    W, H, focal, ap = 320, 240, 17.0, 20.955
    # a USD camera looking along world +x, image up = world +z: x_usd = -y_world, y_usd = +z_world, z_usd = -x_world
    R_world_usd = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    q = Rotation.from_matrix(R_world_usd).as_quat()
    T_usd = pose_to_T([1.0, 2.0, 1.5], q)
    T_cv = cv_camera_from_usd(T_usd)
    assert np.allclose(T_cv[:3, 2], [1, 0, 0])  # optical axis east
    assert np.allclose(T_cv[:3, 1], [0, 0, -1])  # image down = world down
    assert np.allclose(T_cv[:3, 0], [0, -1, 0])  # image right = world south when facing east
    p_world = np.array([4.0, 1.5, 2.0])  # 3 m ahead, 0.5 m to the right, 0.5 m up
    # OmniGibson's pinhole (VisionSensor.intrinsic_matrix): fx = W/2 / tan(hfov/2) = W focal / ap, centre (W/2, H/2),
    # pixel edges at integers; in USD camera coordinates the point is (0.5, 0.5, -3)
    fx = (W / 2) / math.tan(math.atan(ap / (2 * focal)))
    u_og, v_og = W / 2 + fx * 0.5 / 3.0, H / 2 - fx * 0.5 / 3.0  # square pixels: fy = fx; image y runs down
    K = intrinsics(focal, ap, W, H)
    uv = project(K, transform_points(invert_T(T_cv), p_world[None]))[0]
    assert np.allclose(uv, [u_og - 0.5, v_og - 0.5])  # our pixel centres sit at integers


def test_intrinsics_fov_and_square_pixels():
    K = intrinsics(10.0, 20.0, 256, 256)
    assert np.allclose(K, [[128, 0, 127.5], [0, 128, 127.5], [0, 0, 1]])  # hfov 90: fx = W / 2
    assert focal_length_for_hfov(90.0, 20.955) == pytest.approx(10.4775)
    assert focal_length_for_hfov(60.0, 20.955) == pytest.approx(20.955 / (2 * math.tan(math.radians(30))))
    assert vertical_aperture_for(20.955, 320, 240) == pytest.approx(15.71625)
    K = intrinsics(17.0, 20.955, 320, 240)
    assert K[0, 0] == K[1, 1] == pytest.approx(320 * 17.0 / 20.955)
    with pytest.raises(ValueError, match="positive"):
        intrinsics(0.0, 20.955, 64, 64)


# ------------------------------------------------------------------------------------------- images
def test_rgb_depth_and_their_bad_inputs():
    rgba = np.zeros((2, 3, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 7, 255
    rgb = rgb_from_og(rgba)
    assert rgb.shape == (2, 3, 3) and rgb.dtype == np.uint8 and (rgb[..., 0] == 7).all() and (rgb[..., 1:] == 0).all()
    with pytest.raises(ValueError, match="uint8 HxWx4"):
        rgb_from_og(rgba.astype(np.float32))
    d = np.array([[1.5, np.inf, np.nan], [-1.0, 0.0, 40.0]], np.float32)
    out = depth_from_og(d, max_depth_m=30.0)
    assert out.dtype == np.float32 and out.tolist() == [[1.5, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert depth_from_og(d)[1, 2] == 40.0
    with pytest.raises(ValueError, match="depth_linear"):
        depth_from_og(np.zeros((2, 2), np.int32))


def test_instance_segmentation_is_remapped_to_stable_ids_with_structure_zero():
    seg = np.array([[0, 1, 5, 5], [7, 9, 12, 13]], dtype=np.int32)
    info = {0: "background", 1: "unlabelled", 5: "sofa_0", 7: "walls_xyz_0", 9: "water", 12: "bed_1"}  # 13 missing
    ids = {"bed_1": 2, "sofa_0": 1}
    cats = {1: "sofa", 2: "bed"}
    inst, labels = instance_from_og(seg, info, ids, cats)
    assert inst.dtype == np.int32 and inst.tolist() == [[0, 0, 1, 1], [0, 0, 2, 0]]
    assert labels == {1: "sofa", 2: "bed"}
    inst2, _ = instance_from_og(seg.astype(np.uint32), {str(k): v for k, v in info.items()}, ids, cats)  # string keys
    assert inst2.tolist() == inst.tolist()
    with pytest.raises(ValueError, match="seg_instance"):
        instance_from_og(np.zeros((2, 2), np.float32), info, ids, cats)


# ------------------------------------------------------------------------------------------- objects
def test_boxes_from_base_aligned_bboxes_and_aabbs():
    box = box_from_bbox([1.0, 2.0, 0.5], [0.0, 0.0, S2, S2], [2.0, 1.0, 1.0])  # 2 m long along its x, turned 90 deg
    c = box.corners()
    assert np.allclose(c.min(axis=0), [0.5, 1.0, 0.0]) and np.allclose(c.max(axis=0), [1.5, 3.0, 1.0])
    assert box.contains(np.array([[1.0, 2.9, 0.5]]))[0] and not box.contains(np.array([[1.9, 2.0, 0.5]]))[0]
    a = box_from_aabb([0, 0, 0], [1, 2, 3])
    assert np.allclose(a.center, [0.5, 1, 1.5]) and np.allclose(a.size, [1, 2, 3]) and np.allclose(a.R, np.eye(3))
    with pytest.raises(ValueError, match="lo <= hi"):
        box_from_aabb([0, 0, 0], [-1, 2, 3])


def test_poses_move_into_a_displaced_scene_frame():
    T_world_scene = pose_to_T([10.0, 0.0, 0.0], [0, 0, S2, S2])  # a second scene 10 m east, turned 90 degrees
    T_world_x = pose_to_T([10.0, 1.0, 0.0], [0, 0, 0, 1])  # 1 m north of its origin = 1 m along its own x
    T = frame_to_scene(T_world_scene, T_world_x)
    assert np.allclose(T[:3, 3], [1.0, 0.0, 0.0])
    assert np.allclose(T[:3, :3] @ [1, 0, 0], [0, -1, 0])


# ------------------------------------------------------------------------------------------- maps
def test_the_navigable_grid_is_the_traversable_map_in_its_own_frame():
    S, res = 10, 0.1
    trav = np.full((S, S), 255, np.uint8)
    trav[:, 7] = 0  # a wall along column 7
    grid = navgrid_from_trav_map(trav, res, agent_radius=0.05)
    assert grid.x0 == grid.y0 == pytest.approx(-0.5)
    # OmniGibson's map_to_world((row, col)) = ((col - S/2) res, (row - S/2) res) is the cell's lower corner
    r, c = 2, 3
    assert np.allclose(grid.cell_to_world(np.array([r, c])), [(c - S / 2) * res + res / 2, (r - S / 2) * res + res / 2])
    # and its world_to_map truncates (xy / res + S/2), flipped to (row, col)
    xy = np.array([0.123, -0.377])
    og_rc = np.flip(np.trunc(xy / res + S / 2)).astype(int)
    assert grid.world_to_cell(xy).tolist() == og_rc.tolist()
    # clearance: radius 0.05 + 0.1 sqrt 2 = 0.19 m; cell centres 0.1 m from the wall's centre line are not free
    assert not grid.free[:, 6].any() and not grid.free[:, 8].any() and not grid.free[:, 7].any()
    assert grid.free[5, 4] and grid.free[5, 9]  # 0.3 and 0.2 m from the wall
    assert grid.free[5, 5] == (0.2 >= 0.05 + 0.1 * math.sqrt(2))  # two cells from the wall: 0.2 m
    with pytest.raises(ValueError, match="square"):
        navgrid_from_trav_map(np.zeros((4, 5), np.uint8), 0.1, 0.1)


def test_dataset_maps_are_resized_and_binarised_as_omnigibson_does():
    img = np.zeros((200, 200), np.uint8)
    img[40:160, 40:160] = 255
    out = resize_dataset_map(img, 0.05)  # 0.01 m -> 0.05 m: 200 -> 40 pixels
    assert out.shape == (40, 40) and set(np.unique(out).tolist()) <= {0, 255}
    assert (out[10:30, 10:30] == 255).all() and (out[:6] == 0).all() and (out[:, 34:] == 0).all()


def test_walls_are_the_untraversable_band_along_the_object_free_floor():
    trav = np.zeros((20, 20), np.uint8)
    trav[5:15, 5:15] = 255
    walls = wall_cells(trav, 0.1, thickness_m=0.2)
    # the ring two cells wide around the 10 x 10 room, less the 3 cells per corner farther than 2 cells (sqrt 5, sqrt 8)
    assert walls.sum() == 14 * 14 - 10 * 10 - 4 * 3
    assert walls[4, 10] and walls[3, 10] and not walls[2, 10] and not walls[10, 10] and walls[4, 4]
    assert not walls[3, 3]


def test_map_layers_land_on_the_topdown_frame_where_their_cells_are():
    trav = np.zeros((40, 40), np.uint8)
    trav[10:30, 5:35] = 255
    grid = navgrid_from_trav_map(trav, 0.1, 0.05)
    frame = scene_frame(trav == 255, grid)
    assert frame.xmin == pytest.approx(-1.5 - 0.5) and frame.xmax == pytest.approx(1.5 + 0.5)
    assert frame.ymin == pytest.approx(-1.0 - 0.5) and frame.ymax == pytest.approx(1.0 + 0.5)
    layer = np.zeros((40, 40), bool)
    layer[25, 30] = True  # the cell covering x in [1.0, 1.1), y in [0.5, 0.6)
    img = cells_on_map(layer, grid, frame)
    uv = frame.world_to_pixel(np.array([1.05, 0.55]))
    assert img[int(uv[1]), int(uv[0])]
    assert img.sum() == pytest.approx((0.1 / frame.metres_per_pixel) ** 2, rel=0.3)


def test_a_straight_down_camera_is_north_up_and_not_mirrored():
    T = T_world_down(0.0, 0.0, 3.0)
    K = np.array([[50.0, 0, 49.5], [0, 50.0, 49.5], [0, 0, 1]])
    east, north = transform_points(invert_T(T), np.array([[1.0, 0, 0], [0, 1.0, 0]]))
    (ue, ve), (un, vn) = project(K, np.array([east, north]))
    assert ue > 49.5 and ve == pytest.approx(49.5)  # east is to the right
    assert vn < 49.5 and un == pytest.approx(49.5)  # north is up


def _down_view(colour, z_surface, altitude=2.0, n=40, f=20.0) -> tuple[CameraFrame, np.ndarray]:
    T = T_world_down(0.0, 0.0, altitude)
    K = np.array([[f, 0, (n - 1) / 2], [0, f, (n - 1) / 2], [0, 0, 1]])
    rgb = np.zeros((n, n, 3), np.uint8)
    rgb[:] = colour
    depth = np.full((n, n), altitude - z_surface, np.float32)
    return CameraFrame(rgb=rgb, depth=depth, K=K, T_world_cam=T), T


def test_splat_keeps_the_highest_surface_and_fills_only_small_gaps():
    frame = TopDownFrame(-3, -3, 3, 3, 120, 120)
    img, zbuf = empty_easy(frame)
    floor, T = _down_view((200, 0, 0), 0.0)
    splat(img, zbuf, frame, floor, T)
    table, T2 = _down_view((0, 0, 200), 0.7, n=10)  # a smaller, higher surface in the middle
    splat(img, zbuf, frame, table, T2)
    splat(img, zbuf, frame, floor, T)  # the floor painted again does not cover the table
    centre = frame.world_to_pixel(np.array([0.0, 0.0])).astype(int)
    assert tuple(img[centre[1], centre[0]]) == (0, 0, 200) and zbuf[centre[1], centre[0]] == pytest.approx(0.7)
    # the floor view covers +-altitude * (n/2) / f = +-2 m: its edge pixels are red, far corners stay white
    edge = frame.world_to_pixel(np.array([1.8, 0.0])).astype(int)
    far = frame.world_to_pixel(np.array([2.8, 2.8])).astype(int)
    fill_gaps(img, zbuf, max_px=2.0)
    assert tuple(img[edge[1], edge[0]]) == (200, 0, 0)
    assert tuple(img[far[1], far[0]]) == (255, 255, 255)


def test_down_tiles_cover_the_frame():
    frame = TopDownFrame(-5, -4, 5, 4)
    tiles = np.array(down_tiles(frame, altitude_m=4.0, hfov_deg=90.0))
    half = 4.0  # half the floor footprint of a 90-degree view from 4 m
    pts = frame.pixel_centres_world()[::16, ::16].reshape(-1, 2)
    d = np.max(np.abs(pts[:, None, :] - tiles[None, :, :2]), axis=2).min(axis=1)
    assert (d <= half / 2 + 1e-9).all() and np.allclose(tiles[:, 2], 4.0)


# ------------------------------------------------------------------------------------------- config
def test_the_environment_config_uses_omnigibson_keys():
    cfg = env_config(OmniGibsonConfig(width=64, height=48, robot="Turtlebot"), "Rs_int")
    assert cfg["scene"]["type"] == "InteractiveTraversableScene" and cfg["scene"]["scene_model"] == "Rs_int"
    assert cfg["scene"]["trav_map_resolution"] == 0.05 and cfg["task"] == {"type": "DummyTask"}
    (cam,) = cfg["env"]["external_sensors"]
    assert cam["sensor_type"] == "VisionSensor" and cam["modalities"] == ["rgb", "depth_linear", "seg_instance"]
    assert cam["sensor_kwargs"] == {"image_height": 48, "image_width": 64} and cam["include_in_obs"] is False
    (robot,) = cfg["robots"]
    assert robot["type"] == "Turtlebot" and robot["sensor_config"]["VisionSensor"]["sensor_kwargs"]["image_width"] == 64
    assert env_config(OmniGibsonConfig(), "Rs_int")["robots"] == []


def test_scene_splits_are_the_50_behavior_scenes_disjoint():
    names = [s for split in SPLITS.values() for s in split]
    assert len(names) == len(set(names)) == len(SCENES) == 50
    assert {len(SPLITS["train"]), len(SPLITS["val"]), len(SPLITS["test"])} == {35, 5, 10}
    assert OmniGibsonConfig(split="val", first_scene=1, num_scenes=2).scene_names() == list(SPLITS["val"][1:3])
    with pytest.raises(ValueError, match="unknown BEHAVIOR-1K scene 'Rs'"):
        OmniGibsonConfig.from_dict({"scene": "Rs"})
    with pytest.raises(ValueError, match="unknown omnigibson env option"):
        OmniGibsonConfig.from_dict({"bogus": 1})
    with pytest.raises(ValueError, match="num_scenes"):
        OmniGibsonConfig.from_dict({"split": "val", "num_scenes": 6})
