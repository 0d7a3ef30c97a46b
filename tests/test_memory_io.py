"""save/load (exact round trip, no pickle, clear errors on bad files) and snapshots."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from spatial_memory import SpatialMemory, TopDownFrame
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera

SIZE = 40


@pytest.fixture(scope="module")
def frames():
    scene = apartment_scene()
    K = default_camera(SIZE, SIZE)
    return [scene.render(T, K, SIZE, SIZE, step=i) for i, T in enumerate(apartment_tour(21))]


def build(frames, **kw) -> SpatialMemory:
    mem = SpatialMemory(0.1, **kw)
    for f in frames:
        mem.integrate(f)
    return mem


def assert_same(a: SpatialMemory, b: SpatialMemory) -> None:
    sa, ma = a._state()
    sb, mb = b._state()
    assert ma == mb
    assert sorted(sa) == sorted(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype, k
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def test_save_load_is_exact(tmp_path, frames):
    mem = build(frames[:14])
    path = mem.save(tmp_path / "mem.npz")
    back = SpatialMemory.load(path)
    assert_same(mem, back)
    assert [o.id for o in back.objects()] == [o.id for o in mem.objects()]
    for o in mem.objects():
        assert back.egocentric(o.id) == mem.egocentric(o.id)
    f = TopDownFrame(0, 0, 10, 8)
    for level in ("easy", "medium", "hard"):
        np.testing.assert_array_equal(
            back.topdown(level, f, trajectory=True, agent=True), mem.topdown(level, f, trajectory=True, agent=True)
        )
    # the loaded memory goes on exactly as the original would have (random state included)
    for fr in frames[14:]:
        mem.integrate(fr)
        back.integrate(fr)
    assert_same(mem, back)


def test_save_adds_suffix_and_writes_no_pickle(tmp_path, frames):
    path = build(frames[:3]).save(tmp_path / "mem")
    assert path.name == "mem.npz"
    with np.load(path, allow_pickle=False) as data:
        assert all(not data[k].dtype.hasobject for k in data.files)


def test_load_rejects_bad_files(tmp_path, frames):
    path = build(frames[:3]).save(tmp_path / "mem.npz")
    raw = path.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable spatial memory"):
        SpatialMemory.load(tmp_path / "trunc.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match="not a readable spatial memory"):
        SpatialMemory.load(tmp_path / "text.npz")
    np.savez(tmp_path / "foreign.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="no metadata"):
        SpatialMemory.load(tmp_path / "foreign.npz")
    np.savez(tmp_path / "pickled.npz", __meta__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="not a readable spatial memory"):
        SpatialMemory.load(tmp_path / "pickled.npz")
    with pytest.raises(FileNotFoundError):
        SpatialMemory.load(tmp_path / "missing.npz")


def test_load_rejects_inconsistent_contents(tmp_path, frames):
    mem = build(frames[:3])
    arrays, meta = mem._state()
    from spatial_memory import serialization

    bad = dict(arrays)
    bad["vox_rgb"] = bad["vox_rgb"][:-1]
    serialization.write(tmp_path / "a.npz", bad, meta)
    with pytest.raises(ValueError, match="vox.*rgb|voxel field 'rgb'"):
        SpatialMemory.load(tmp_path / "a.npz")
    bad = {k: v for k, v in arrays.items() if k != "traj_T"}
    serialization.write(tmp_path / "b.npz", bad, meta)
    with pytest.raises(ValueError, match="traj_T"):
        SpatialMemory.load(tmp_path / "b.npz")
    serialization.write(tmp_path / "c.npz", arrays, {**meta, "format": "other/9"})
    with pytest.raises(ValueError, match="format"):
        SpatialMemory.load(tmp_path / "c.npz")
    bad = dict(arrays)
    bad["vox_ijk"] = np.repeat(arrays["vox_ijk"][:1], len(arrays["vox_ijk"]), axis=0)
    serialization.write(tmp_path / "d.npz", bad, meta)
    with pytest.raises(ValueError, match="same voxel twice"):
        SpatialMemory.load(tmp_path / "d.npz")


def test_snapshot_is_consistent_and_read_only(frames):
    mem = build(frames[:5])
    snap = mem.snapshot()
    assert snap.read_only and not mem.read_only
    assert_same(mem, snap)
    with pytest.raises(RuntimeError, match="read-only"):
        snap.integrate(frames[5])
    n_vox, n_obj = len(snap.voxels), len(snap.objects())
    for f in frames[5:]:
        mem.integrate(f)
    assert len(snap.voxels) == n_vox and len(snap.objects()) == n_obj and snap.n_frames == 5


def test_snapshots_taken_while_integrating_are_whole(frames):
    mem = SpatialMemory(0.1)
    snaps = []
    done = threading.Event()

    def reader():
        while not done.is_set():
            snaps.append(mem.snapshot())

    t = threading.Thread(target=reader)
    t.start()
    try:
        for f in frames:
            mem.integrate(f)
    finally:
        done.set()
        t.join()
    assert snaps
    for s in snaps:
        poses, steps = s.trajectory()
        assert len(poses) == s.n_frames  # pose appended in the same locked update as the frame
        assert np.all(s.voxels.field("label") < max(len(s.objects()), 1))
