"""CameraFrame validation: malformed input gets a clear error naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory import CameraFrame, SpatialMemory
from spatial_memory.geometry import intrinsics_from_fovy, pose_from_xy_yaw


def good(**changes):
    h, w = 6, 8
    kw = dict(
        rgb=np.zeros((h, w, 3), np.uint8),
        depth=np.ones((h, w), np.float32),
        K=intrinsics_from_fovy(90, w, h),
        T_world_cam=pose_from_xy_yaw(0, 0, 0, 1.5),
        instance=np.zeros((h, w), np.int32),
        labels={1: "bowl"},
    )
    kw.update(changes)
    return kw


def test_good_frame_builds():
    f = CameraFrame(**good())
    assert (f.height, f.width) == (6, 8)
    assert f.valid_depth.all()


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(rgb=np.zeros((6, 8), np.uint8)), "rgb"),
        (dict(rgb=np.zeros((6, 8, 3), np.float32)), "rgb"),
        (dict(depth=np.ones((6, 7), np.float32)), "depth"),
        (dict(depth=np.ones((6, 8), np.float64)), "depth"),
        (dict(K=np.eye(2)), "K"),
        (dict(K=np.array([[0.0, 0, 1], [0, 1, 1], [0, 0, 1]])), "K"),
        (dict(K=np.array([[1.0, 0.1, 1], [0, 1, 1], [0, 0, 1]])), "K"),
        (dict(T_world_cam=np.eye(3)), "T_world_cam"),
        (dict(T_world_cam=np.full((4, 4), np.nan)), "T_world_cam"),
        (dict(T_world_cam=np.diag([1.0, 1.0, -1.0, 1.0])), "T_world_cam"),  # a reflection
        (dict(T_world_cam=np.diag([2.0, 1.0, 1.0, 1.0])), "T_world_cam"),  # a scale
        (dict(instance=np.zeros((6, 8), np.int64)), "instance"),
        (dict(instance=np.zeros((5, 8), np.int32)), "instance"),
        (dict(labels={"1": "bowl"}), "labels"),
        (dict(labels={1: 3}), "labels"),
    ],
)
def test_malformed_frames_name_the_field(changes, field):
    with pytest.raises(ValueError, match=f"CameraFrame.{field}"):
        CameraFrame(**good(**changes))


def test_invalid_depth_values_are_skipped_not_fused():
    depth = np.full((6, 8), np.nan, np.float32)
    depth[0, :4] = np.inf
    depth[1, :4] = 0.0
    depth[2, 0] = -1.0
    depth[3, 3] = 2.0  # the only valid reading
    mem = SpatialMemory(0.05)
    mem.integrate(CameraFrame(**good(depth=depth)))
    assert len(mem.voxels) == 1


def test_integrate_rejects_non_frames_and_far_poses():
    mem = SpatialMemory(0.05)
    with pytest.raises(TypeError, match="CameraFrame"):
        mem.integrate({"rgb": None})
    T = pose_from_xy_yaw(1e6, 0, 0, 1.5)
    with pytest.raises(ValueError, match="too far"):
        mem.integrate(CameraFrame(**good(T_world_cam=T)))


def test_huge_instance_ids_are_refused():
    with pytest.raises(ValueError, match="instance ids"):
        SpatialMemory(0.05).integrate(CameraFrame(**good(labels={1 << 30: "bowl"})))
