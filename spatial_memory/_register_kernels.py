"""The compiled inner loop of top-down registration (numba, ``cache=True``): the similarity ICP of
:func:`.register._refine`, which the GST answerer runs about a thousand times per 100 questions
(30 iterations each). Plain arrays in, plain numbers out; :mod:`.register` holds the meaning.

The arithmetic is :func:`.register._refine`'s written out per point (sums in point order rather than
numpy's pairwise order, so the last bits of a result may differ; ``tests/test_register_kernels.py``
checks the two against each other).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def refine_similarity(pts, dt, near_r, near_c, s, th, tx, ty, gates):
    """ICP of ``pts`` (Nx2, metres) to an image's edges: ``dt`` (HxW) is the distance in pixels to the
    nearest edge pixel, ``near_r``/``near_c`` that pixel's row and column. The similarity maps a
    point (x, y) to the pixel u = s (c x - sn y) + tx, v = -s (sn x + c y) + ty; for each gate in
    ``gates`` (pixels) the points whose pixel lies within it of an edge pull towards that edge
    pixel's centre with weight 1 / (1 + (d / 2)^2), a weighted 2D similarity fit (Umeyama) in the
    flipped coordinates (u, -v). Stops early when fewer than 10 points land in the image or within
    the gate. Returns (s, th, tx, ty)."""
    H, W = dt.shape
    n = pts.shape[0]
    sx = np.empty(n)
    sy = np.empty(n)
    dx = np.empty(n)
    dy = np.empty(n)
    wt = np.empty(n)
    for gate in gates:
        c, sn = math.cos(th), math.sin(th)
        a00, a01, a10, a11 = s * c, -s * sn, -s * sn, -s * c
        n_in = 0
        m = 0
        for i in range(n):
            x, y = pts[i, 0], pts[i, 1]
            u = math.floor(x * a00 + y * a01 + tx)
            v = math.floor(x * a10 + y * a11 + ty)
            if u < 0 or u >= W or v < 0 or v >= H:
                continue
            n_in += 1
            iu, iv = int(u), int(v)
            d = dt[iv, iu]
            if d <= gate:
                sx[m], sy[m] = x, y
                dx[m] = near_c[iv, iu] + 0.5
                dy[m] = -(near_r[iv, iu] + 0.5)  # flipped: v -> -v makes the map a proper similarity
                wt[m] = 1.0 / (1.0 + (d / 2.0) ** 2)
                m += 1
        if n_in < 10 or m < 10:
            break
        ws = msx = msy = mdx = mdy = 0.0
        for k in range(m):
            w = wt[k]
            ws += w
            msx += w * sx[k]
            msy += w * sy[k]
            mdx += w * dx[k]
            mdy += w * dy[k]
        msx /= ws
        msy /= ws
        mdx /= ws
        mdy /= ws
        sxx = sxy = var = 0.0
        for k in range(m):
            w = wt[k]
            ax, ay = sx[k] - msx, sy[k] - msy
            bx, by = dx[k] - mdx, dy[k] - mdy
            sxx += w * (ax * bx + ay * by)
            sxy += w * (ax * by - ay * bx)
            var += w * (ax * ax + ay * ay)
        th = math.atan2(sxy, sxx)
        s = math.hypot(sxx, sxy) / max(var, 1e-12)
        ca, sa = math.cos(th), math.sin(th)
        tx = mdx - s * (ca * msx - sa * msy)
        ty = -(mdy - s * (sa * msx + ca * msy))
    return s, th, tx, ty


@njit(cache=True)
def near_sq_distance(mask, radius):
    """Squared distance (pixels) from every pixel to the nearest ``True`` pixel of ``mask``, exact below
    ``radius`` and ``radius**2`` from there on: the part of a Euclidean distance transform that a
    weight vanishing at ``radius`` reads, at the cost of a (2 radius - 1)^2 stamp per set pixel."""
    H, W = mask.shape
    cap = radius * radius
    out = np.full((H, W), cap, dtype=np.int64)
    for i in range(H):
        for j in range(W):
            if not mask[i, j]:
                continue
            for di in range(-radius + 1, radius):
                ii = i + di
                if ii < 0 or ii >= H:
                    continue
                for dj in range(-radius + 1, radius):
                    jj = j + dj
                    if jj < 0 or jj >= W:
                        continue
                    d2 = di * di + dj * dj
                    if d2 < out[ii, jj]:
                        out[ii, jj] = d2
    return out
