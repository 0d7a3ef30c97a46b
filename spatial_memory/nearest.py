"""Exact nearest neighbours within a radius, on a grid of buckets (what localisation asks of the map).

Localisation (:mod:`.localize`) asks, for every scan point of every pose it tries, which occupied
voxel centre lies nearest within a gate of 0.1-0.5 m, and how far it is: about 16,000 batches of a few
hundred to a few thousand points per 100 GST questions. A KD-tree answers each point in logarithmic
time but pays a tree descent per point; the centres here are dense on surfaces and the gates short, so
a grid of cubic buckets (side ``bucket``, the points of each bucket stored together) answers most
points from the 27 buckets around them.

:class:`GridIndex` has ``scipy.spatial.cKDTree.query``'s contract for ``k = 1``: ``(d, j)`` with ``d``
the Euclidean distance (``sqrt`` of ``dx**2 + dy**2 + dz**2`` summed in that order, as cKDTree does,
so equal inputs give equal bits), and ``d = inf``, ``j = n`` where no point lies strictly closer than
``distance_upper_bound``. Of two points at exactly the same distance the tree and the grid may name
different ones (a tie has probability zero for points off the grid; ``tests/test_nearest.py`` checks
the two against each other).

The search visits buckets in shells of growing Chebyshev radius ``K`` around the query's bucket: a point
of shell ``K`` is at least ``(K - 1) * bucket`` away, so the search stops when that bound reaches the
best distance found or the gate.
"""

from __future__ import annotations

import numpy as np
from numba import njit


MAX_BUCKETS_PER_POINT = 64  # the bucket table's size bound (entries per point), see GridIndex
MIN_BUCKETS = 1 << 22  # ... below which any table is allowed (32 MB: every apartment map)


class GridIndex:
    """Nearest-neighbour queries within a radius over fixed ``points`` (N x 3), see the module doc."""

    def __init__(self, points: np.ndarray, bucket: float = 0.1):
        pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
        if not np.isfinite(pts).all():
            raise ValueError("GridIndex: the points must be finite")
        if not bucket > 0:
            raise ValueError(f"GridIndex: bucket must be positive, got {bucket}")
        self.n = len(pts)
        self.bucket = float(bucket)
        if self.n == 0:
            self.origin = np.zeros(3)
            self.start = np.zeros(2, dtype=np.int64)  # one empty bucket
            self.shape = np.ones(3, dtype=np.int64)
            self.points = np.zeros((0, 3))
            self.order = np.zeros(0, dtype=np.int64)
            return
        self.origin = pts.min(axis=0)
        # the bucket table holds one entry per bucket of the bounding box: a few far points (an outlier,
        # a map spread over a large building) would make it huge, so coarser buckets bound it by
        # MAX_BUCKETS_PER_POINT entries per point (the search is exact for any bucket side)
        limit = max(MAX_BUCKETS_PER_POINT * self.n, MIN_BUCKETS)
        while np.prod(np.floor((pts.max(axis=0) - self.origin) / self.bucket) + 1) > limit:
            self.bucket *= 2.0
        cell = np.floor((pts - self.origin) / self.bucket).astype(np.int64)
        self.shape = cell.max(axis=0) + 1
        flat = (cell[:, 0] * self.shape[1] + cell[:, 1]) * self.shape[2] + cell[:, 2]
        self.order = np.argsort(flat, kind="stable")  # the points of a bucket together, in index order
        self.points = pts[self.order]
        bounds = np.searchsorted(flat[self.order], np.arange(int(np.prod(self.shape)) + 1))
        self.start = bounds.astype(np.int64)  # bucket b holds sorted points start[b] .. start[b + 1] - 1

    def __len__(self) -> int:
        return self.n

    def query(self, q: np.ndarray, distance_upper_bound: float = np.inf) -> tuple[np.ndarray, np.ndarray]:
        """(distance, index) of the nearest point to each row of ``q`` (M x 3) strictly within
        ``distance_upper_bound``; ``(inf, n)`` where there is none. The bound must be finite."""
        q = np.ascontiguousarray(q, dtype=np.float64).reshape(-1, 3)
        ub = float(distance_upper_bound)
        if not np.isfinite(ub):
            raise ValueError("GridIndex.query needs a finite distance_upper_bound (a radius search)")
        d = np.full(len(q), np.inf)
        j = np.full(len(q), self.n, dtype=np.int64)
        if self.n and len(q) and ub > 0:
            _query(self.points, self.order, self.start, self.shape, self.origin, self.bucket, q, ub, d, j)
        return d, j


@njit(cache=True)
def _query(points, order, start, shape, origin, bucket, q, ub, d_out, j_out):
    n0, n1, n2 = shape[0], shape[1], shape[2]
    ub2 = ub * ub
    for m in range(q.shape[0]):
        qx, qy, qz = q[m, 0], q[m, 1], q[m, 2]
        if not (np.isfinite(qx) and np.isfinite(qy) and np.isfinite(qz)):
            continue
        b0 = int(np.floor((qx - origin[0]) / bucket))
        b1 = int(np.floor((qy - origin[1]) / bucket))
        b2 = int(np.floor((qz - origin[2]) / bucket))
        best = ub2  # strictly closer than the bound, as cKDTree
        best_j = -1
        K = 0
        while True:
            if K >= 1:
                lim = (K - 1) * bucket  # every point of shell K is at least this far
                if lim >= ub or lim * lim >= best:
                    break
            # the shell's buckets that exist: Chebyshev distance exactly K from (b0, b1, b2)
            lo0, hi0 = max(b0 - K, 0), min(b0 + K, n0 - 1)
            lo1, hi1 = max(b1 - K, 0), min(b1 + K, n1 - 1)
            lo2, hi2 = max(b2 - K, 0), min(b2 + K, n2 - 1)
            if lo0 > hi0 or lo1 > hi1 or lo2 > hi2:
                # the shell misses the grid; a later one may not, if the query lies outside it
                K += 1
                continue
            for i0 in range(lo0, hi0 + 1):
                edge0 = i0 == b0 - K or i0 == b0 + K
                for i1 in range(lo1, hi1 + 1):
                    edge1 = edge0 or i1 == b1 - K or i1 == b1 + K
                    if edge1:
                        step = 1
                        i2 = lo2
                    else:  # only the two faces k = b2 +- K
                        step = 2 * K if K > 0 else 1
                        i2 = b2 - K
                    while i2 <= hi2:
                        if i2 >= lo2:
                            b = (i0 * n1 + i1) * n2 + i2
                            for p in range(start[b], start[b + 1]):
                                dx = qx - points[p, 0]
                                dy = qy - points[p, 1]
                                dz = qz - points[p, 2]
                                s = 0.0
                                s += dx * dx
                                s += dy * dy
                                s += dz * dz
                                if s < best or (s == best and best_j >= 0 and order[p] < best_j):
                                    best = s
                                    best_j = order[p]
                        i2 += step
            K += 1
        if best_j >= 0:
            d_out[m] = np.sqrt(best)
            j_out[m] = best_j
