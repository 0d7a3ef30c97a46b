"""The compiled loops of top-down registration (spatial_memory/_register_kernels.py) against the numpy
they replaced, written out here as the reference: the similarity ICP, the near-distance weights and
the grown observed area."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from spatial_memory._register_kernels import near_sq_distance, refine_similarity


def _matrix(s, th, t):
    c, sn = np.cos(th), np.sin(th)
    return np.array([[s * c, -s * sn, t[0]], [-s * sn, -s * c, t[1]]])


def _umeyama_2d(src, dst, w):
    ws = w.sum()
    ms, md = (w[:, None] * src).sum(0) / ws, (w[:, None] * dst).sum(0) / ws
    A, B = src - ms, dst - md
    sxx = (w * (A[:, 0] * B[:, 0] + A[:, 1] * B[:, 1])).sum()
    sxy = (w * (A[:, 0] * B[:, 1] - A[:, 1] * B[:, 0])).sum()
    ang = np.arctan2(sxy, sxx)
    s = np.hypot(sxx, sxy) / max((w * (A**2).sum(1)).sum(), 1e-12)
    c, sn = np.cos(ang), np.sin(ang)
    return float(s), float(ang), md - s * (np.array([[c, -sn], [sn, c]]) @ ms)


def _refine_reference(dt, near, pts, s, th, t, gates):
    H, W = dt.shape
    for gate in gates:
        A = _matrix(s, th, t)
        uv = pts @ A[:, :2].T + A[:, 2]
        ui, vi = np.floor(uv[:, 0]).astype(np.int64), np.floor(uv[:, 1]).astype(np.int64)
        inside = (ui >= 0) & (ui < W) & (vi >= 0) & (vi < H)
        if inside.sum() < 10:
            break
        d = np.full(len(pts), np.inf)
        d[inside] = dt[vi[inside], ui[inside]]
        ok = d <= gate
        if ok.sum() < 10:
            break
        dst = np.stack([near[1][vi[ok], ui[ok]] + 0.5, -(near[0][vi[ok], ui[ok]] + 0.5)], axis=1)
        s, th, tf = _umeyama_2d(pts[ok], dst, 1.0 / (1.0 + (d[ok] / 2.0) ** 2))
        t = np.array([tf[0], -tf[1]])
    return s, th, t


def _target(rng):
    """An edge image of a few rectangles' outlines and its distance transform with nearest indices."""
    H, W = 120, 160
    edges = np.zeros((H, W), dtype=bool)
    for _ in range(4):
        r0, c0 = rng.integers(5, H - 40), rng.integers(5, W - 50)
        r1, c1 = r0 + rng.integers(15, 35), c0 + rng.integers(15, 45)
        edges[r0:r1, [c0, c1]] = True
        edges[[r0, r1], c0 : c1 + 1] = True
    dt, near = ndimage.distance_transform_edt(~edges, return_indices=True)
    return edges, dt, near


@pytest.mark.parametrize("seed", range(12))
def test_refine_matches_the_numpy_reference_and_finds_the_similarity(seed):
    rng = np.random.default_rng(seed)
    edges, dt, near = _target(rng)
    s0, th0, t0 = rng.uniform(8, 20), rng.uniform(-np.pi, np.pi), rng.uniform(40, 100, size=2)
    # the memory's points: the edge pixels' centres taken back through the true similarity, with noise
    r, c = np.nonzero(edges)
    A = _matrix(s0, th0, t0)
    pts = np.linalg.solve(A[:, :2], (np.stack([c + 0.5, r + 0.5], axis=1) - A[:, 2]).T).T
    pts += rng.normal(0, 0.2 / s0, size=pts.shape)
    start = (s0 * rng.uniform(0.97, 1.03), th0 + rng.uniform(-0.03, 0.03), t0 + rng.uniform(-3, 3, size=2))
    gates = np.geomspace(12.0, 3.0, 30)
    ref = _refine_reference(dt, near, pts, *start, gates)
    s, th, tx, ty = refine_similarity(pts, dt, near[0], near[1], start[0], start[1], start[2][0], start[2][1], gates)
    assert np.allclose([s, th, tx, ty], [ref[0], ref[1], *ref[2]], rtol=1e-9, atol=1e-9)
    # and it is a registration, not only the same arithmetic: the true similarity comes back
    assert s == pytest.approx(s0, rel=0.01) and abs(np.angle(np.exp(1j * (th - th0)))) < 0.01
    assert np.hypot(tx - t0[0], ty - t0[1]) < 1.0


def test_refine_stops_where_too_few_points_land():
    rng = np.random.default_rng(0)
    _, dt, near = _target(rng)
    pts = rng.uniform(-1, 1, size=(50, 2))
    gates = np.geomspace(12.0, 3.0, 5)
    # far outside the image: the start comes back unchanged, as from the reference
    got = refine_similarity(pts, dt, near[0], near[1], 10.0, 0.3, 5000.0, 5000.0, gates)
    assert got == (10.0, 0.3, 5000.0, 5000.0)
    ref = _refine_reference(dt, near, pts, 10.0, 0.3, np.array([5000.0, 5000.0]), gates)
    assert (ref[0], ref[1], *ref[2]) == got


def test_near_distances_are_the_distance_transform_below_the_radius():
    rng = np.random.default_rng(1)
    for _ in range(40):
        shape = tuple(rng.integers(3, 70, size=2))
        mask = rng.random(shape) < rng.uniform(0.002, 0.3)
        if not mask.any():
            continue
        edt = ndimage.distance_transform_edt(~mask)
        d2 = near_sq_distance(mask, 4)
        below = edt < 4
        assert np.array_equal(d2[below], np.rint(edt[below] ** 2).astype(np.int64))
        assert (d2[~below] == 16).all()
        # so the weight the score reads is bit for bit the one from the full transform
        w_ref = np.clip(1.0 - (edt / 4.0) ** 2, 0.0, 1.0)
        assert np.array_equal(np.clip(1.0 - (np.sqrt(d2.astype(np.float64)) / 4.0) ** 2, 0.0, 1.0), w_ref)


def test_grown_area_is_the_iterated_cross_dilation():
    """The score's observed area grown by one distance transform equals `grow` dilations by the cross."""
    from spatial_memory.register import _grown

    rng = np.random.default_rng(5)
    for _ in range(200):
        h, w = rng.integers(1, 90, size=2)
        mask = rng.random((h, w)) < rng.choice([0.0, 0.002, 0.02, 0.2, 0.6])
        r = int(rng.integers(1, 12))
        assert np.array_equal(_grown(mask, r), ndimage.binary_dilation(mask, iterations=r)), (h, w, r)
