"""The memory's public queries for planners (spatial_memory/queries.py): occupancy on a cell lattice,
objects by category, the version counter, and all of them on a snapshot read while another thread
integrates.

Expectations are computed by hand from the geometry of a synthetic scene (ray-cast frames of boxes):
a camera 2.5 m above the floor looking straight down at two crates whose footprint edges lie in the
middle of 5 cm cells, so every cell they touch receives samples at this resolution.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from spatial_memory import OccupancyBands, SpatialMemory, normalise_category, serialization
from spatial_memory.geometry import make_T
from spatial_memory.lattice import CellLattice
from spatial_memory.synthetic import BoxScene, SceneBox, apartment_scene, apartment_tour, default_camera


class Lattice(CellLattice):
    def __init__(self, x0: float, y0: float, resolution: float) -> None:
        self.x0, self.y0, self.resolution = x0, y0, resolution


CAM_XY = (1.025, 0.5)
CRATE = dict(x=(0.825, 1.225), y=(0.325, 0.675), top=0.52)  # straight below the camera: only its top shows
SMALL = dict(x=(1.625, 1.825), y=(0.125, 0.275), top=0.32)  # off to a side: its top and two faces show


def _box(b: dict, instance_id: int) -> SceneBox:
    (x0, x1), (y0, y1) = b["x"], b["y"]
    return SceneBox(
        np.array([(x0 + x1) / 2, (y0 + y1) / 2, b["top"] / 2]),
        np.array([x1 - x0, y1 - y0, b["top"]]),
        category="wooden_crate",
        instance_id=instance_id,
    )


def _scene() -> BoxScene:
    floor = SceneBox(np.array([1.0, 0.5, -0.05]), np.array([8.0, 8.0, 0.1]), category="floor")
    return BoxScene([floor, _box(CRATE, 5), _box(SMALL, 6)], bounds=(-3.0, -3.5, 5.0, 4.5))


def _top_down_frame(scene: BoxScene, size: int = 256):
    R = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])  # x right, y down (= -y), z forward (= -z)
    T = make_T(R, np.array([CAM_XY[0], CAM_XY[1], 2.5]))
    return scene.render(T, default_camera(size, size), size, size)


def _cells(b: dict, res: float = 0.05) -> tuple[slice, slice]:
    """Rows and columns (x0 = y0 = 0) of the cells a footprint overlaps: edges lie mid-cell."""
    (x0, x1), (y0, y1) = b["x"], b["y"]
    return slice(int(y0 / res), int(y1 / res) + 1), slice(int(x0 / res), int(x1 / res) + 1)


@pytest.fixture(scope="module")
def memory() -> SpatialMemory:
    mem = SpatialMemory(0.05)
    mem.integrate(_top_down_frame(_scene()))
    return mem


def test_occupancy_of_a_hand_made_scene(memory):
    lat = Lattice(0.0, 0.0, 0.05)
    occ = memory.occupancy2d(lat, (20, 40))
    big, small = _cells(CRATE), _cells(SMALL)
    assert (big[0].start, big[0].stop, big[1].start, big[1].stop) == (6, 14, 16, 25)
    want = np.zeros((20, 40), dtype=bool)
    want[big] = want[small] = True
    np.testing.assert_array_equal(occ.obstacle, want)
    # heights: the top voxel centres (0.52 m lies in the voxel [0.50, 0.55), 0.32 m in [0.30, 0.35))
    assert np.all(occ.height[big] == pytest.approx(0.525)) and np.all(occ.height[small] == pytest.approx(0.325))
    assert np.all(np.isneginf(occ.height[~want]))
    # floor: none under the crate below the camera: its top hides a footprint 2.5 / (2.5 - 0.52) =
    # 1.26 times its own around the camera's xy (x 0.7725-1.2775, y 0.279-0.721), which covers exactly
    # its own cells; the ring of cells around them keeps >= 2.2 cm of visible floor (samples every 2 cm)
    assert not occ.floor[big].any()
    assert occ.floor[5, 15:26].all() and occ.floor[14, 15:26].all()
    assert occ.floor[5:15, 15].all() and occ.floor[5:15, 25].all()
    assert occ.floor[:, :15].all() and occ.floor[15:, :].all()  # away from both crates and what they hide
    # the target's own voxels left out of the height only
    mine = memory.occupancy2d(lat, (20, 40), exclude="wooden_crate_1")
    np.testing.assert_array_equal(mine.obstacle, occ.obstacle)
    assert np.all(np.isneginf(mine.height[big])) and np.all(mine.height[small] == pytest.approx(0.325))
    # a window of the same lattice is the same cells
    sub = memory.occupancy2d(lat, (5, 7), offset=(10, 20))
    np.testing.assert_array_equal(sub.obstacle, occ.obstacle[10:15, 20:27])
    np.testing.assert_array_equal(sub.height, occ.height[10:15, 20:27])
    # bands: below 0.3 m only the sides of the small crate (the big one shows its top only)
    low = memory.occupancy2d(lat, (20, 40), OccupancyBands(floor_max_z=0.05, obstacle_z=(0.1, 0.3)))
    assert not low.obstacle[big].any() and low.obstacle[small].any()
    none = memory.occupancy2d(lat, (20, 40), OccupancyBands(min_hits=10**6))
    assert not none.obstacle.any() and none.floor[:, :15].all()  # the floor needs no hits threshold


def test_occupancy_extent_is_the_field_of_view(memory):
    # the camera sees the floor within 2.49 m of its xy (outermost pixel centres: 127.5 / 128 * 2.5 m)
    lat = Lattice(-5.0, -5.0, 0.05)
    x = CAM_XY[0] + np.array([-1, 1]) * 127.5 / 128 * 2.5
    y = CAM_XY[1] + np.array([-1, 1]) * 127.5 / 128 * 2.5
    cols, rows = np.floor((x + 5.0) / 0.05).astype(int), np.floor((y + 5.0) / 0.05).astype(int)
    assert memory.occupancy_extent(lat, (200, 200)) == (rows[0], rows[1], cols[0], cols[1])
    assert memory.occupancy_extent(lat, (100, 120)) == (rows[0], 99, cols[0], 119)  # cells beyond are ignored
    assert memory.occupancy_extent(Lattice(50.0, 50.0, 0.05), (10, 10)) is None
    assert SpatialMemory(0.05).occupancy_extent(lat, (200, 200)) is None
    with pytest.raises(ValueError, match="shape"):
        memory.occupancy2d(lat, (-1, 3))


def test_occupancy_of_given_voxels(tmp_path):
    """Voxels written by hand (through the file format): centres ((i, j, k) + 0.5) * 0.05."""
    path = SpatialMemory(0.05).save(tmp_path / "empty.npz")
    arrays, meta = serialization.read(path)
    ijk = np.array([[2, 3, -1], [5, 5, 0], [5, 5, 10], [7, 8, 30], [9, 9, 60], [11, 11, 12]], dtype=np.int32)
    n = len(ijk)
    arrays.update(
        vox_ijk=ijk,
        vox_hits=np.array([1, 2, 3, 1, 5, 0], dtype=np.int32),
        vox_label=np.full(n, -1, dtype=np.int32),
        vox_vote=np.zeros(n, dtype=np.int32),
        vox_rgb=np.zeros((n, 3), dtype=np.float32),
        vox_w=np.ones(n, dtype=np.float32),
    )
    serialization.write(tmp_path / "given.npz", arrays, meta)
    mem = SpatialMemory.load(tmp_path / "given.npz")
    occ = mem.occupancy2d(Lattice(0.0, 0.0, 0.05), (20, 20))
    assert occ.floor[3, 2] and occ.floor[5, 5] and occ.floor.sum() == 2
    assert occ.obstacle[5, 5] and occ.obstacle[8, 7] and occ.obstacle.sum() == 2  # k=60 above the band, hits=0 free
    assert occ.height[8, 7] == pytest.approx(30.5 * 0.05) and occ.height[5, 5] == pytest.approx(10.5 * 0.05)
    # a coarser lattice: 0.1 m cells, shifted by half a cell
    occ = mem.occupancy2d(Lattice(-0.05, -0.05, 0.1), (10, 10))
    # centres (0.275, 0.275) -> cell (3, 3); (0.375, 0.425) -> (4, 4)
    assert occ.obstacle[3, 3] and occ.obstacle[4, 4] and occ.obstacle.sum() == 2


def test_objects_by_category(memory):
    assert normalise_category("  Wooden-Crate ") == normalise_category("wooden_crate") == "wooden crate"
    found = memory.objects_by_category("Wooden Crate")
    assert [o.id for o in found] == ["wooden_crate_1", "wooden_crate_2"]
    assert [o.instance_id for o in found] == [5, 6]
    assert found[0].center[:2] == pytest.approx([np.mean(CRATE["x"]), np.mean(CRATE["y"])], abs=0.03)
    assert memory.objects_by_category("crate") == [] and memory.objects_by_category("floor") == []


def test_version_changes_with_every_change(tmp_path):
    scene = _scene()
    a, b = SpatialMemory(0.05), SpatialMemory(0.05)
    assert a.version != b.version  # one counter for every memory: a version names one state
    v0 = a.version
    a.integrate(_top_down_frame(scene, 32))
    v1 = a.version
    assert v1 > v0
    a.integrate_boxes([("mug", [0.0, 0.0, 1.0, 0.1, 0.1, 0.1, 0.0, 0.0, 0.0])], np.eye(4), step=1)
    v2 = a.version
    assert v2 > v1 and a.n_frames == 1  # boxes change the memory without a frame
    snap = a.snapshot()
    assert snap.version == v2  # the same contents
    with pytest.raises(RuntimeError, match="read-only"):
        snap.integrate(_top_down_frame(scene, 32))
    assert snap.version == v2
    a.integrate(_top_down_frame(scene, 32))
    assert a.version > v2 and snap.version == v2
    back = SpatialMemory.load(a.save(tmp_path / "a.npz"))
    assert back.version not in (v0, v1, v2, a.version, b.version)


def _signature(mem: SpatialMemory, lat: CellLattice) -> tuple:
    occ = mem.occupancy2d(lat, (120, 140), offset=(0, 0))
    return (
        occ.obstacle.tobytes(),
        occ.floor.tobytes(),
        occ.height.tobytes(),
        tuple((o.id, o.n_points) for o in mem.objects_by_category("sofa")),
        mem.occupancy_extent(lat, (120, 140)),
    )


def test_queries_on_a_snapshot_while_another_thread_integrates():
    """A writer integrates a tour while a reader queries snapshots: every snapshot answers exactly as
    a memory built serially from the same number of frames (no torn state)."""
    scene = apartment_scene()
    K = default_camera(48, 48)
    frames = [scene.render(T, K, 48, 48, step=i) for i, T in enumerate(apartment_tour(16))]
    lat = Lattice(-0.5, -0.5, 0.08)
    ref, serial = {}, SpatialMemory(0.1)
    ref[0] = _signature(serial, lat)
    for i, f in enumerate(frames, start=1):
        serial.integrate(f)
        ref[i] = _signature(serial, lat)
    live, seen, errors = SpatialMemory(0.1), [], []
    done, took = threading.Event(), threading.Event()

    def reader():
        try:
            while not done.is_set():
                snap = live.snapshot()
                seen.append((snap.n_frames, snap.version, _signature(snap, lat)))
                took.set()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for f in frames:
            live.integrate(f)
            # Let the reader take at least one snapshot before the next frame: the GIL alone may
            # schedule the reader only after the writer is done, and then nothing was tested.
            took.clear()
            took.wait(timeout=10.0)
    finally:
        done.set()
        t.join()
    seen.append((live.n_frames, live.version, _signature(live.snapshot(), lat)))
    assert not errors and len({n for n, _, _ in seen}) >= 2
    for n, _, sig in seen:
        assert sig == ref[n], f"snapshot after {n} frames differs from the serial memory"
    versions = {}
    for n, v, _ in seen:
        versions.setdefault(n, set()).add(v)
    assert all(len(v) == 1 for v in versions.values())  # one version per state ...
    order = sorted(versions)
    assert all(min(versions[b]) > max(versions[a]) for a, b in zip(order, order[1:]))  # ... growing with it
