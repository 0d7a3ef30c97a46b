"""envs/house: LIBERO meshes (native bounds in the catalog, simplification keeps them in their box)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.house.catalog import MESHES, libero_assets_dir
from envs.house.meshes import cluster_simplify, native_mesh, read_msh, scaled_mesh

needs_assets = pytest.mark.skipif(libero_assets_dir() is None, reason="LIBERO assets not installed")


@needs_assets
@pytest.mark.parametrize("name", sorted(MESHES))
def test_catalog_bounds_match_the_files(name):
    v, f = native_mesh(name)
    g = MESHES[name]
    assert np.allclose(v.min(axis=0), g.lo, atol=2e-4) and np.allclose(v.max(axis=0), g.hi, atol=2e-4)
    assert len(f) == g.faces


@needs_assets
def test_simplified_meshes_stay_in_their_box_and_shrink():
    for name, g in MESHES.items():
        scale = (0.9, 1.1, 0.8)
        v0, _ = native_mesh(name)
        lo, hi = v0.min(0) * scale, v0.max(0) * scale
        v, f = scaled_mesh(name, scale)
        assert np.all(v >= lo - 1e-9) and np.all(v <= hi + 1e-9)
        assert f.min() >= 0 and f.max() < len(v)
        if g.cell_m > 0:
            assert len(f) < g.faces


def test_cluster_simplify_on_a_cube():
    # a unit cube's corners, triangulated, plus a near-duplicate corner: the duplicate merges
    v = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)] + [[0.001, 0.0, 0.0]], dtype=float)
    f = np.array([[0, 1, 3], [0, 3, 2], [8, 1, 3]])
    nv, nf = cluster_simplify(v, f, cell=0.1)
    assert len(nf) == 2  # the third face repeats the first after merging
    assert len(nv) == 4  # only referenced vertices remain


def test_read_msh_rejects_garbage(tmp_path):
    p = tmp_path / "bad.msh"
    p.write_bytes(np.array([3, 0, 0, 1], np.int32).tobytes() + b"\0" * 5)
    with pytest.raises(ValueError, match="does not match its size"):
        read_msh(p)
