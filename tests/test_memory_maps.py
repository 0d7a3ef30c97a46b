"""The memory's top-down maps against ground-truth maps drawn with the same functions (draw.py)."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory import LEVELS, MapConfig, SpatialMemory, TopDownFrame
from spatial_memory.draw import BLUE, GREEN, RED, box_footprint, compose_level, polygon_mask
from spatial_memory.maps import dilate
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera

SIZE = 64


@pytest.fixture(scope="module")
def world():
    scene = apartment_scene()
    K = default_camera(SIZE, SIZE)
    mem = SpatialMemory(0.05)
    for i, T in enumerate(apartment_tour(42)):
        mem.integrate(scene.render(T, K, SIZE, SIZE, step=i))
    frame = TopDownFrame(-0.5, -0.5, 10.5, 8.5)
    walls = polygon_mask(frame, [box_footprint(b.center, b.size, b.R) for b in scene.walls()])
    objects = polygon_mask(frame, [box_footprint(b.center, b.size, b.R) for b in scene.objects()])
    return scene, mem, frame, walls, objects


def test_walls_match_ground_truth(world):
    _, mem, frame, gt_walls, _ = world
    walls = mem.layers(frame).walls
    assert walls.sum() > 1000
    voxel_px = int(np.ceil(mem.config.voxel_size / frame.metres_per_pixel))  # walls are found within a voxel
    precision = (walls & dilate(gt_walls, voxel_px)).sum() / walls.sum()
    recall = (gt_walls & dilate(walls, 4)).sum() / gt_walls.sum()
    assert precision > 0.97 and recall > 0.8, (precision, recall)


def test_object_footprints_match_ground_truth(world):
    _, mem, frame, _, gt_objects = world
    objects = mem.layers(frame).objects
    iou = (objects & gt_objects).sum() / (objects | gt_objects).sum()
    assert iou > 0.6, iou
    vox = mem.layers(frame, MapConfig(object_footprints="voxels")).objects
    assert (vox & ~dilate(gt_objects, 3)).sum() / vox.sum() < 0.05


def test_levels_follow_the_draw_contract(world):
    scene, mem, frame, gt_walls, gt_objects = world
    hard, medium, easy = (mem.topdown(level, frame) for level in ("hard", "medium", "easy"))
    for img in (hard, medium, easy):
        assert img.shape == (512, 640, 3) and img.dtype == np.uint8
    assert set(np.unique(hard)) <= {0, 255} and set(np.unique(medium)) <= {0, 255}
    # hard = walls only: object interiors stay white; medium paints them black
    inner = gt_objects & ~dilate(gt_walls, 6)
    assert (hard[inner] == 255).mean() > 0.99
    assert (medium[inner] == 0).all(axis=-1).mean() > 0.6
    # the memory's maps are the same function of layers as the ground truth's
    lay = mem.layers(frame)
    np.testing.assert_array_equal(medium, compose_level("medium", lay.walls, lay.objects))


def test_easy_map_shows_no_ceiling(world):
    scene, mem, frame, _, _ = world
    lay = mem.layers(frame)
    seen = np.isfinite(lay.top_z)
    assert seen.mean() > 0.4
    assert lay.top_z[seen].max() < mem.config.map.ceiling_z
    floor = np.array(scene.boxes[0].colour)
    close_to_floor = (np.abs(lay.colour.astype(int) - floor).max(axis=-1) < 30)[seen]
    assert close_to_floor.mean() > 0.5  # most of what is seen from above is floor, none of it ceiling
    ceiling = np.array(scene.boxes[1].colour)
    assert ((np.abs(lay.colour.astype(int) - ceiling).max(axis=-1) < 3) & seen).sum() == 0


def test_overlays(world):
    _, mem, frame, _, _ = world
    img = mem.topdown("hard", frame, trajectory=True, agent=True, objects=["sofa"])
    assert (img == RED).all(axis=-1).sum() > 100
    assert (img == BLUE).all(axis=-1).sum() > 20
    assert (img == GREEN).all(axis=-1).sum() > 20
    u, v = frame.world_to_pixel(mem.object("sofa").center[:2]).astype(int)
    assert tuple(img[v, u]) == RED


def test_unknown_level_and_default_frame(world):
    _, mem, _, _, _ = world
    with pytest.raises(ValueError, match="unknown top-down level"):
        mem.topdown("birdseye")
    f = mem.default_frame()
    x0, y0, x1, y1 = f.bounds
    assert x0 < 0 and y0 < 0 and x1 > 10 and y1 > 8
    assert mem.topdown("medium").shape == (512, 640, 3)
    with pytest.raises(LookupError):
        SpatialMemory(0.05).default_frame()


def test_map_point_on_the_grid(world):
    scene, mem, frame, _, _ = world
    g = mem.map_point("bed", frame)
    true = frame.world_to_grid(scene.object("bed").center[:2])
    assert np.hypot(*(np.array(g) - true)) < 30  # GST's tightest point threshold is 100


@pytest.mark.parametrize("level", LEVELS)
def test_empty_memory_draws_blank_maps(level):
    img = SpatialMemory(0.05).topdown(level, TopDownFrame(0, 0, 1, 1))
    assert (img == 255).all()
