"""The voxel map after a fixed sequence of frames against the fusion rule written out point by point
(plain Python and numpy, one pixel at a time): voxels in order of first sight, hit counts, object
label votes and running-mean colours; and the object passes' back-projection against a full one."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory import SpatialMemory
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera
from spatial_memory.voxels import VoxelMap

VOXEL = 0.05
HITS_MAX, VOTE_MAX = 1 << 20, 1 << 10


def _world_points(frame, stride, min_depth, max_depth):
    """Raster-order (row, col, world point rounded to float32) of the valid pixels, each coordinate
    computed as ``r0 x + r1 y + r2 z + t`` from ``x = (u - cx) / fx * z``, ``y = (v - cy) / fy * z``."""
    K, T = frame.K, frame.T_world_cam
    v, u = np.mgrid[0 : frame.depth.shape[0] : stride, 0 : frame.depth.shape[1] : stride]
    z = frame.depth[v, u].astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = (z >= min_depth) & (z <= max_depth)
    v, u, z = v[ok], u[ok], z[ok]
    x = (u - K[0, 2]) / K[0, 0] * z
    y = (v - K[1, 2]) / K[1, 1] * z
    p = np.stack([T[r, 0] * x + T[r, 1] * y + T[r, 2] * z + T[r, 3] for r in range(3)], axis=1)
    return v, u, p.astype(np.float32)


class _Reference:
    """The fusion rule, one point at a time: runs of consecutive points in one voxel with one label
    are summed, then fused: colour running mean (weight capped), hits, and a weighted Boyer-Moore
    vote of the label."""

    def __init__(self, w_max):
        self.w_max = w_max
        self.index: dict[tuple[int, int, int], int] = {}
        self.ijk, self.rgb, self.w, self.hits, self.label, self.vote = [], [], [], [], [], []

    def _fuse(self, key, k, s, lab):
        if key not in self.index:
            self.index[key] = len(self.ijk)
            self.ijk.append(key)
            self.rgb.append(np.zeros(3, dtype=np.float32))
            self.w.append(np.float32(0))
            self.hits.append(0)
            self.label.append(-1)
            self.vote.append(0)
        n = self.index[key]
        w = float(self.w[n])
        self.rgb[n] = ((self.rgb[n].astype(np.float64) * w + s) / (w + k)).astype(np.float32)
        self.w[n] = np.float32(min(w + k, self.w_max))
        h = self.hits[n]
        self.hits[n] = k if h <= 0 else min(h + k, HITS_MAX)
        if self.vote[n] == 0 or self.label[n] == lab:
            self.label[n], self.vote[n] = lab, min(self.vote[n] + k, VOTE_MAX)
        elif self.vote[n] >= k:
            self.vote[n] -= k
        else:
            self.label[n], self.vote[n] = lab, k - self.vote[n]

    def integrate(self, frame, slot_of_id, obj_of_slot, stride, min_depth, max_depth):
        v, u, p = _world_points(frame, stride, min_depth, max_depth)
        run = None  # [voxel, label, count, colour sum]
        for m in range(len(v)):
            key = tuple(int(c) for c in np.floor(p[m].astype(np.float64) * (1.0 / VOXEL)))
            lab = -1
            if frame.instance is not None:
                iid = int(frame.instance[v[m], u[m]])
                if 0 <= iid < len(slot_of_id) and slot_of_id[iid] >= 0:
                    lab = int(obj_of_slot[slot_of_id[iid]])
            colour = frame.rgb[v[m], u[m]].astype(np.float64)
            if run is not None and run[0] == key and run[1] == lab:
                run[2] += 1
                run[3] = run[3] + colour
                continue
            if run is not None:
                self._fuse(run[0], run[2], run[3], run[1])
            run = [key, lab, 1, colour]
        if run is not None:
            self._fuse(run[0], run[2], run[3], run[1])


def _frames(n, size, stripes=False):
    scene, K = apartment_scene(), default_camera(size, size)
    frames = []
    rng = np.random.default_rng(0)
    for i, T in enumerate(apartment_tour(n)):
        f = scene.render(T, K, size, size, step=i)
        depth = f.depth.copy()
        holes = rng.random(depth.shape) < 0.05  # invalid readings inside runs: they are skipped, not run breaks
        depth[holes] = rng.choice(np.array([0.0, np.nan, np.inf, 50.0], dtype=np.float32), size=int(holes.sum()))
        inst = f.instance
        if stripes:  # ids that change every few pixels: voxels see runs of competing labels
            v, u = np.mgrid[0:size, 0:size]
            inst = ((u // (2 + i % 4) + v // 3 + i) % 5).astype(np.int32)
        frames.append(type(f)(f.rgb, depth, f.K, f.T_world_cam, inst, f.labels, f.step))
    return frames


@pytest.mark.parametrize("stride", [1, 2])
def test_voxel_map_equals_the_rule_point_by_point(stride):
    frames = _frames(16, 48, stripes=True)
    slot_of_id = np.array([-1, 0, 1, 2, -1], dtype=np.int32)  # id 4: no slot
    obj_of_slot = np.array([0, 1, 0], dtype=np.int32)  # two slots of one object
    w_max = 6.0  # reached within the sequence: the cap changes the mean from then on
    vm, ref = VoxelMap(VOXEL, w_max), _Reference(w_max)
    for f in frames + frames[::-1]:  # revisits
        vm.integrate(f.depth, f.rgb, f.instance, slot_of_id, obj_of_slot, f.T_world_cam, f.K, 0.1, 8.0, stride)
        ref.integrate(f, slot_of_id, obj_of_slot, stride, 0.1, 8.0)
    assert len(vm) == len(ref.ijk) > 4096  # the arrays grew on the way
    np.testing.assert_array_equal(vm.field("ijk"), np.array(ref.ijk, dtype=np.int32))
    np.testing.assert_array_equal(vm.field("hits"), ref.hits)
    np.testing.assert_array_equal(vm.field("label"), ref.label)
    np.testing.assert_array_equal(vm.field("vote"), ref.vote)
    np.testing.assert_array_equal(vm.field("w"), np.array(ref.w, dtype=np.float32))
    np.testing.assert_allclose(vm.field("rgb"), np.array(ref.rgb), rtol=0, atol=1e-3)
    assert (vm.field("w") == w_max).any() and (vm.field("label") >= 0).any() and (vm.field("vote") > 1).any()
    # every voxel is found again through the block index
    np.testing.assert_array_equal(vm.lookup(vm.centres()), np.arange(len(vm)))


def test_voxel_map_without_masks_has_no_labels():
    f = _frames(1, 32)[0]
    vm, ref = VoxelMap(VOXEL), _Reference(64.0)
    none = np.full(1, -1, dtype=np.int32)
    vm.integrate(f.depth, f.rgb, None, none, none, f.T_world_cam, f.K, 0.1, 8.0, 1)
    ref.integrate(type(f)(f.rgb, f.depth, f.K, f.T_world_cam), none, none, 1, 0.1, 8.0)
    np.testing.assert_array_equal(vm.field("ijk"), np.array(ref.ijk, dtype=np.int32))
    np.testing.assert_array_equal(vm.field("hits"), ref.hits)
    assert (vm.field("label") == -1).all()


def test_object_points_are_the_labelled_pixels_of_a_full_backprojection():
    """The object passes get the valid pixels of instance segments (structure categories left out),
    in raster order, at their world points."""
    f = _frames(3, 48)[2]
    mem = SpatialMemory(VOXEL)
    lut, slot_ids, _ = mem._instance_slots(f)
    assert len(slot_ids) >= 2
    pts, pix, slot = mem._backproject(f, lut)
    v, u, p = _world_points(f, 1, mem.config.min_depth, mem.config.max_depth)
    iid = f.instance[v, u]
    s = np.where((iid >= 0) & (iid < len(lut)), lut[np.clip(iid, 0, len(lut) - 1)], -1)
    keep = s >= 0
    assert 0 < keep.sum() < len(keep)
    np.testing.assert_array_equal(pix, (v * f.depth.shape[1] + u)[keep])
    np.testing.assert_array_equal(slot, s[keep])
    np.testing.assert_array_equal(pts, p[keep])
