"""The localisation's nearest-neighbour index (`spatial_memory/nearest.py`) against scipy's KD-tree:
the same distances to the bit and the same neighbours, for the map's voxel centres and for scattered
points, inside and outside the grid, for every gate localisation uses."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from spatial_memory.nearest import GridIndex


def _voxel_centres(rng, n_surfaces=12, voxel=0.05):
    """Occupied voxel centres of a few random planes in a 6 x 5 x 2.6 m box: what a map holds."""
    pts = []
    for _ in range(n_surfaces):
        o = rng.uniform([0, 0, 0], [6, 5, 2.6])
        a, b = rng.normal(size=3), rng.normal(size=3)
        s, t = rng.uniform(-1.5, 1.5, size=(2, 800))
        pts.append(o + s[:, None] * a / np.linalg.norm(a) + t[:, None] * b / np.linalg.norm(b))
    ijk = np.unique(np.floor(np.concatenate(pts) / voxel).astype(np.int64), axis=0)
    return (ijk + 0.5) * voxel


@pytest.mark.parametrize("kind", ["voxel centres", "scattered"])
def test_matches_the_kd_tree(kind):
    rng = np.random.default_rng(3)
    pts = _voxel_centres(rng) if kind == "voxel centres" else rng.uniform(-1, 4, size=(3000, 3))
    tree, grid = cKDTree(pts), GridIndex(pts)
    # queries near the points, far from them and outside the grid on every side
    q = np.concatenate(
        [
            pts[rng.integers(0, len(pts), 2000)] + rng.normal(scale=0.08, size=(2000, 3)),
            rng.uniform(-3, 9, size=(2000, 3)),
        ]
    )
    for gate in (0.1, 0.12, 0.2, 0.24, 0.3, 0.5, 0.6, 1.0, 2.5):
        d_t, j_t = tree.query(q, distance_upper_bound=gate)
        d_g, j_g = grid.query(q, distance_upper_bound=gate)
        assert np.array_equal(d_g, d_t), gate  # bit for bit, inf included
        assert np.array_equal(j_g, j_t), gate
        assert np.isfinite(d_g).any() and np.isinf(d_g).any()  # both cases are exercised


def test_edge_cases():
    pts = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    grid = GridIndex(pts, bucket=0.3)
    d, j = grid.query(np.array([[0.0, 0.0, 0.5], [0.5, 0.0, 0.0], [np.nan, 0, 0], [9.0, 9.0, 9.0]]), 0.6)
    assert d[0] == 0.5 and j[0] == 0
    assert d[1] == 0.5 and j[1] == 0  # a tie goes to the lower index
    assert np.isinf(d[2:]).all() and (j[2:] == 2).all()  # no answer: (inf, n), as the KD-tree
    d, j = grid.query(np.array([[0.0, 0.0, 0.5]]), 0.5)  # strictly within the bound
    assert np.isinf(d[0]) and j[0] == 2
    empty = GridIndex(np.zeros((0, 3)))
    d, j = empty.query(np.zeros((3, 3)), 1.0)
    assert len(empty) == 0 and np.isinf(d).all() and (j == 0).all()
    with pytest.raises(ValueError, match="finite distance_upper_bound"):
        grid.query(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="finite"):
        GridIndex(np.array([[0.0, np.inf, 0.0]]))
    with pytest.raises(ValueError, match="bucket must be positive"):
        GridIndex(pts, bucket=0.0)


def test_far_points_coarsen_the_buckets_not_the_answers():
    """A map with a far outlier (100 m away) would need ~10^8 buckets of 0.1 m in its bounding box; the
    index coarsens its buckets to at most 64 per point (or 2^22) and answers as the KD-tree does."""
    rng = np.random.default_rng(5)
    pts = np.concatenate([_voxel_centres(rng, n_surfaces=4), [[100.0, 100.0, 2.0]]])
    grid, tree = GridIndex(pts), cKDTree(pts)
    assert grid.bucket > 0.1 and len(grid.start) - 1 <= max(64 * len(pts), 1 << 22)
    q = np.concatenate(
        [pts[rng.integers(0, len(pts), 1000)] + rng.normal(scale=0.08, size=(1000, 3)), [[99.9, 100, 2]]]
    )
    for gate in (0.1, 0.3, 1.0):
        d_t, j_t = tree.query(q, distance_upper_bound=gate)
        d_g, j_g = grid.query(q, distance_upper_bound=gate)
        assert np.array_equal(d_g, d_t) and np.array_equal(j_g, j_t), gate
    dense = GridIndex(_voxel_centres(rng))  # an apartment-sized map keeps the bucket it asked for
    assert dense.bucket == 0.1
