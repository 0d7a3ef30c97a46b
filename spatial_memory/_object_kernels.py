"""The compiled inner loops over a frame's instance segments and the objects' sample points (numba,
``cache=True``): segment order and samples, carving object samples, gravity-aligned box fits, the
object image, and the depth-consistency filter of a detector's segments. Plain arrays in and out; the
classes that own them (:mod:`.objects`, :mod:`.evidence`, :mod:`.memory`) hold the meaning. Pixel
conventions as in :mod:`._kernels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._kernels import _measured, _to_pixel


@njit(cache=True)
def first_pixels(instance, slot_of_id, n_slots):
    """Per slot, the raster index of its first pixel (H*W where it has none): an order of a frame's
    segments that depends on where they are, not on their ids."""
    H, W = instance.shape
    out = np.full(n_slots, H * W, dtype=np.int64)
    n_ids = slot_of_id.shape[0]
    left = n_slots
    for v in range(H):
        for u in range(W):
            i = instance[v, u]
            if i >= 0 and i < n_ids:
                s = slot_of_id[i]
                if s >= 0 and out[s] == H * W:
                    out[s] = v * W + u
                    left -= 1
                    if left == 0:
                        return out
    return out


@njit(cache=True)
def segment_samples(slot, pts, n_slots, max_per_slot, seg_pts, seg_count, seg_sum):
    """Per instance slot: pixel count, coordinate sum and an evenly strided sample of its points.

    ``seg_pts[s, :min(count, max_per_slot)]`` receives the sample (raster order, stride chosen from
    the count so the sample spans the whole segment).
    """
    n = slot.shape[0]
    for s in range(n_slots):
        seg_count[s] = 0
        seg_sum[s, 0] = 0.0
        seg_sum[s, 1] = 0.0
        seg_sum[s, 2] = 0.0
    for m in range(n):
        s = slot[m]
        if s >= 0:
            seg_count[s] += 1
            seg_sum[s, 0] += pts[m, 0]
            seg_sum[s, 1] += pts[m, 1]
            seg_sum[s, 2] += pts[m, 2]
    seen = np.zeros(n_slots, dtype=np.int64)
    taken = np.zeros(n_slots, dtype=np.int64)
    for m in range(n):
        s = slot[m]
        if s < 0:
            continue
        c = seg_count[s]
        # take the point whose rank r makes floor(r * k / c) step up (k = sample size): k evenly spread points
        k = min(c, max_per_slot)
        r = seen[s]
        seen[s] = r + 1
        if (r * k) // c != ((r + 1) * k) // c and taken[s] < k:
            seg_pts[s, taken[s], 0] = pts[m, 0]
            seg_pts[s, taken[s], 1] = pts[m, 1]
            seg_pts[s, taken[s], 2] = pts[m, 2]
            taken[s] += 1


@njit(cache=True)
def carve_object_points(
    points, npts, n_obj, T_cam_world, fx, fy, cx, cy, depth, obj_img, margin_abs, margin_rel, removed
):
    """Drop the sample points of every object that the frame shows are no longer there, compacting
    each object's sample in place; ``removed[o]`` receives how many went.

    A point goes when the depth image sees through it, or (with an object image ``obj_img``, the
    memory's object index per pixel, -1 = none; pass a 0x0 array without masks) when it is visible
    at the measured depth (within the margin) but its pixel shows something else.
    """
    have_obj = obj_img.shape[0] == depth.shape[0]
    for o in range(n_obj):
        keep = 0
        for m in range(npts[o]):
            x, y, z = points[o, m, 0], points[o, m, 1], points[o, m, 2]
            u, v, zc = _to_pixel(x, y, z, T_cam_world, fx, fy, cx, cy)
            d = _measured(depth, u, v)
            margin = margin_abs + margin_rel * zc
            gone = d > 0.0 and (d > zc + margin or (have_obj and abs(d - zc) <= margin and obj_img[v, u] != o))
            if not gone:
                if keep != m:
                    points[o, keep, 0] = x
                    points[o, keep, 1] = y
                    points[o, keep, 2] = z
                keep += 1
        removed[o] = npts[o] - keep
        npts[o] = keep


@njit(cache=True, inline="always")
def _ptp_area(x, y, yaw):
    c, s = np.cos(yaw), np.sin(yaw)
    lo_a, hi_a, lo_b, hi_b = np.inf, -np.inf, np.inf, -np.inf
    for m in range(x.shape[0]):
        a = x[m] * c + y[m] * s
        b = -x[m] * s + y[m] * c
        lo_a, hi_a = min(lo_a, a), max(hi_a, a)
        lo_b, hi_b = min(lo_b, b), max(hi_b, b)
    return (hi_a - lo_a) * (hi_b - lo_b)


@njit(cache=True, inline="always")
def _quantile_sorted(v, q):
    """``np.percentile(v, 100 q)`` (linear interpolation) of a sorted array."""
    pos = q * (v.shape[0] - 1)
    lo = int(np.floor(pos))
    hi = min(lo + 1, v.shape[0] - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


@njit(cache=True)
def fit_gravity_box(points, q_lo, q_hi):
    """(cx, cy, cz, sx, sy, sz, yaw) of a gravity-aligned box around Nx3 points.

    yaw (in [0, pi/2)) minimises the footprint area of the points' extents: a 5 degree search, then
    0.5 degree steps around the best; the box's extents along its axes and z are the ``q_lo``..``q_hi``
    quantiles, so a few outliers do not inflate it.
    """
    n = points.shape[0]
    mx, my = 0.0, 0.0
    for m in range(n):
        mx += points[m, 0]
        my += points[m, 1]
    mx /= n
    my /= n
    x = np.empty(n)
    y = np.empty(n)
    for m in range(n):
        x[m] = points[m, 0] - mx
        y[m] = points[m, 1] - my
    step = np.pi / 36.0
    best, best_area = 0.0, np.inf
    for a in range(18):
        area = _ptp_area(x, y, a * step)
        if area < best_area - 1e-12:
            best, best_area = a * step, area
    coarse = best
    for a in range(-9, 10):
        yaw = coarse + a * step / 10.0
        area = _ptp_area(x, y, yaw)
        if area < best_area - 1e-12:
            best, best_area = yaw, area
    yaw = best % (np.pi / 2)
    c, s = np.cos(yaw), np.sin(yaw)
    a_ = np.empty(n)
    b_ = np.empty(n)
    z_ = np.empty(n)
    for m in range(n):
        a_[m] = x[m] * c + y[m] * s
        b_[m] = -x[m] * s + y[m] * c
        z_[m] = points[m, 2]
    a_.sort()
    b_.sort()
    z_.sort()
    a0, a1 = _quantile_sorted(a_, q_lo), _quantile_sorted(a_, q_hi)
    b0, b1 = _quantile_sorted(b_, q_lo), _quantile_sorted(b_, q_hi)
    z0, z1 = _quantile_sorted(z_, q_lo), _quantile_sorted(z_, q_hi)
    ma, mb = 0.5 * (a0 + a1), 0.5 * (b0 + b1)
    out = np.empty(7)
    out[0] = mx + c * ma - s * mb
    out[1] = my + s * ma + c * mb
    out[2] = 0.5 * (z0 + z1)
    out[3] = a1 - a0
    out[4] = b1 - b0
    out[5] = z1 - z0
    out[6] = yaw
    return out


@njit(cache=True)
def object_image(pix, slot, obj_of_slot, H, W):
    """HxW image of the memory's object index per pixel (-1 = none) from the back-projected points."""
    out = np.full(H * W, -1, dtype=np.int32)
    for m in range(pix.shape[0]):
        s = slot[m]
        if s >= 0:
            out[pix[m]] = obj_of_slot[s]
    return out.reshape(H, W)


@njit(cache=True, inline="always")
def _median_of(v):
    """``np.median`` of a 1-D float64 array: the middle value, or the mean of the two (a selection,
    not a sort: linear time)."""
    return np.median(v)


@njit(cache=True)
def depth_outliers(slot, pts, n_slots, floor, out):
    """``out`` (a copy of ``slot``) with the points of each segment of at least 8 points that lie beyond
    max(``floor``, 2.5 sigma) of the segment's median horizontal position set to -1 (sigma from the
    median absolute deviation of those distances): :func:`spatial_memory.evidence.depth_consistent`."""
    n = slot.shape[0]
    starts = np.zeros(n_slots + 1, dtype=np.int64)
    for m in range(n):
        if slot[m] >= 0:
            starts[slot[m] + 1] += 1
    for s in range(n_slots):
        starts[s + 1] += starts[s]
    idx = np.empty(starts[n_slots], dtype=np.int64)
    fill = starts[:n_slots].copy()
    for m in range(n):  # each segment's points in raster order
        s = slot[m]
        if s >= 0:
            idx[fill[s]] = m
            fill[s] += 1
    for s in range(n_slots):
        a, b = starts[s], starts[s + 1]
        k = b - a
        if k < 8:
            continue
        x = np.empty(k)
        y = np.empty(k)
        for q in range(k):
            x[q] = np.float64(pts[idx[a + q], 0])
            y[q] = np.float64(pts[idx[a + q], 1])
        mx = _median_of(x)
        my = _median_of(y)
        d = np.empty(k)
        for q in range(k):
            dx = x[q] - mx
            dy = y[q] - my
            d[q] = np.sqrt(dx * dx + dy * dy)
        tol = max(floor, 2.5 * 1.4826 * _median_of(d))
        for q in range(k):
            if d[q] > tol:
                out[idx[a + q]] = -1
