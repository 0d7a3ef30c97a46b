"""The memory's top-down maps against ground truth drawn independently from the scene's boxes."""

from __future__ import annotations

import numpy as np
import pytest

from spatial_memory import LEVELS, MapConfig, SpatialMemory, TopDownFrame
from spatial_memory.draw import BLUE, GREEN, RED
from spatial_memory.maps import dilate
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera

SIZE = 64


def footprints(frame: TopDownFrame, boxes) -> np.ndarray:
    """Pixels whose centre lies in a box's footprint, tested in each box's own frame (not draw.py's polygons)."""
    x0, _, _, y1 = frame.bounds
    s = frame.metres_per_pixel
    v, u = np.mgrid[0 : frame.height, 0 : frame.width]
    xy = np.stack([x0 + (u + 0.5) * s, y1 - (v + 0.5) * s], axis=-1)
    mask = np.zeros((frame.height, frame.width), dtype=bool)
    for b in boxes:
        c, sn = np.cos(b.yaw), np.sin(b.yaw)
        d = xy - b.center[:2]
        along, across = d[..., 0] * c + d[..., 1] * sn, -d[..., 0] * sn + d[..., 1] * c
        mask |= (np.abs(along) <= b.size[0] / 2) & (np.abs(across) <= b.size[1] / 2)
    return mask


@pytest.fixture(scope="module")
def world():
    scene = apartment_scene()
    K = default_camera(SIZE, SIZE)
    mem = SpatialMemory(0.05)
    for i, T in enumerate(apartment_tour(42)):
        mem.integrate(scene.render(T, K, SIZE, SIZE, step=i))
    frame = TopDownFrame(-0.5, -0.5, 10.5, 8.5)
    walls = footprints(frame, scene.walls())
    objects = footprints(frame, scene.objects())
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
    # medium's black = the true walls and object footprints; hard's black = its walls, a part of them
    black, hard_black = (medium == 0).all(axis=-1), (hard == 0).all(axis=-1)
    gt = gt_walls | gt_objects
    voxel_px = int(np.ceil(mem.config.voxel_size / frame.metres_per_pixel))
    assert (black & dilate(gt, voxel_px)).sum() / black.sum() > 0.97
    assert (gt & dilate(black, 4)).sum() / gt.sum() > 0.8
    assert (hard_black & dilate(gt_walls, voxel_px)).sum() / hard_black.sum() > 0.97
    assert not (hard_black & ~black).any()


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
