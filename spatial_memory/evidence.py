"""Detector-mode evidence of the object registry: which objects a detector really saw, and which of
its detections are one object.

A detector (frame-local ids, misses, false positives, confused classes) makes the registry keep

- *support* per object: every frame in which it should have been detected (its centre in view, in
  range, not hidden behind a nearer surface, large enough in the image) counts as a chance; support =
  (detections + 1) / (chances + 2). A false positive that the next views do not repeat loses its
  support; objects below ``min_support`` or with fewer than ``min_observations`` detections are not
  *confirmed* and stay out of queries and maps (they are kept, and may still be confirmed later);
- *merging*: two objects of one category whose samples overlap (a partial view whose centroid fell
  outside the first object's gate), or of two categories with about the same extent in the same place
  (a detection labelled as a similar class), become one; the category is the majority vote of the
  detections (``votes``). The merged-away object stays as an empty alias of the survivor (indices are
  stable: voxels keep their labels, :meth:`DetectorEvidence.canonical` maps them).

:class:`DetectorEvidence` is a base class of :class:`.objects.ObjectRegistry` (it works on the
registry's arrays ``a``, ``votes``, ``categories``); with ``association="instance"`` (stable ids) every
alive object is confirmed and nothing is merged. :func:`depth_consistent` takes a detector's mask
bleed (points far from the rest of their segment) out of a frame's segments before they are fused.
"""

from __future__ import annotations

import numpy as np

from . import _object_kernels as okern
from .geometry import rot_z


def depth_consistent(slot: np.ndarray, pts: np.ndarray, n_slots: int, floor: float = 0.3) -> np.ndarray:
    """Slots with the points of each segment that lie far from its median distance (a detector's mask
    bleeding onto the wall behind, the floor in front) taken out: beyond max(``floor``, 2.5 sigma)
    of the segment's median horizontal position, sigma from the median absolute deviation
    (:func:`._kernels.depth_outliers`, one pass over the points)."""
    out = slot.copy()
    if n_slots > 0 and len(slot):
        okern.depth_outliers(slot, pts, n_slots, float(floor), out)
    return out


def _depth_consistent_numpy(slot: np.ndarray, pts: np.ndarray, n_slots: int, floor: float = 0.3) -> np.ndarray:
    """The same as :func:`depth_consistent` in numpy (the reference its kernel is tested against)."""
    lab = np.flatnonzero(slot >= 0)
    if len(lab) == 0:
        return slot
    out = slot.copy()
    order = lab[np.argsort(slot[lab], kind="stable")]
    bounds = np.searchsorted(slot[order], np.arange(n_slots + 1))
    for s in range(n_slots):
        idx = order[bounds[s] : bounds[s + 1]]
        if len(idx) < 8:
            continue
        xy = pts[idx, :2].astype(np.float64)
        d = np.linalg.norm(xy - np.median(xy, axis=0), axis=1)
        tol = max(floor, 2.5 * 1.4826 * float(np.median(d)))
        out[idx[d > tol]] = -1
    return out


def inside_box(P: np.ndarray, center: np.ndarray, size: np.ndarray, yaw: float, margin: float) -> float:
    """Fraction of points inside a gravity-aligned box grown by ``margin``."""
    q = (P - center) @ rot_z(float(yaw))
    return float(np.mean(np.all(np.abs(q) <= np.asarray(size) / 2 + margin, axis=1)))


class DetectorEvidence:
    """Support, confirmation, category votes and merging (see the module doc)."""

    def support(self) -> np.ndarray:
        """(detections + 1) / (chances + 2) per object (see the module doc)."""
        n = len(self)
        return (self.a["n_obs"][:n] + 1.0) / (np.maximum(self.a["chances"][:n], self.a["n_obs"][:n]) + 2.0)

    def confirmed(self) -> np.ndarray:
        """Per object: alive (not merged away, observed) and, in detector mode, supported enough."""
        n = len(self)
        a = self.a
        ok = (a["alias"][:n] < 0) & (a["n_obs"][:n] > 0)
        if self.association == "proximity":
            ok &= (a["n_obs"][:n] >= self.min_observations) & (self.support() >= self.min_support)
        return ok

    def canonical(self) -> np.ndarray:
        """Index map: object -> the object it lives on as (itself unless merged); index -1 maps to -1."""
        n = len(self)
        out = np.arange(n, dtype=np.int64)
        alias = self.a["alias"][:n]
        for o in np.flatnonzero(alias >= 0):
            t = int(o)
            while alias[t] >= 0:
                t = int(alias[t])
            out[o] = t
        return out

    # ------------------------------------------------------------------------------------ lookup

    def _vote(self, o: int, category: str | None) -> None:
        """Count a detection of ``category`` (None: none) and let the majority decide the category
        (ties keep the current one)."""
        v = self.votes[o]
        if category is not None:
            v[category] = v.get(category, 0) + 1
        if not v:
            return
        best = max(v, key=lambda c: (v[c], c == self.categories[o]))
        if best != self.categories[o]:  # the majority of the detections say otherwise
            self._by_category[self.categories[o]].remove(o)
            self.categories[o] = best
            self._by_category.setdefault(best, []).append(o)

    def count_chances(self, T_cam_world: np.ndarray, K: np.ndarray, depth: np.ndarray, detected: np.ndarray) -> None:
        """Detector mode: every alive object that the frame should have detected (centre in view within
        ``detect_range``, at least ``detect_pixels`` across, not behind a nearer surface) gains a chance;
        ``detected`` = the objects the frame's segments went to (they count as a chance too)."""
        n = len(self)
        if n == 0 or self.association != "proximity":
            return
        a = self.a
        live = np.flatnonzero((a["alias"][:n] < 0) & (a["npts"][:n] > 0))
        if len(live) == 0:
            return
        c = a["center"][live]
        p = c @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
        z = p[:, 2]
        H, W = depth.shape
        with np.errstate(divide="ignore", invalid="ignore"):
            u = K[0, 0] * p[:, 0] / z + K[0, 2]
            v = K[1, 1] * p[:, 1] / z + K[1, 2]
        radius = 0.5 * np.linalg.norm(a["size"][live], axis=1)
        across = 2 * radius * abs(K[0, 0]) / np.maximum(z, 1e-6)
        inside = (z > 0.3) & (z < self.detect_range) & (u >= 0.05 * W) & (u < 0.95 * W) & (v >= 0.05 * H)
        inside &= (v < 0.95 * H) & (across >= self.detect_pixels)
        ui = np.clip(np.nan_to_num(u, nan=0.0, posinf=0.0, neginf=0.0), 0, W - 1).astype(np.int64)
        vi = np.clip(np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0), 0, H - 1).astype(np.int64)
        d = depth[vi, ui]
        seen = inside & np.isfinite(d) & (d > 0) & (d >= z - np.maximum(0.3, radius))
        chance = np.zeros(n, dtype=bool)
        chance[live[seen]] = True
        det = np.asarray(detected, dtype=np.int64)
        chance[det[(det >= 0) & (det < n)]] = True
        a["chances"][:n] += chance

    def _consolidate(self, o: int) -> None:
        """Merge ``o`` with an alive object it duplicates (see the module doc), if any."""
        a = self.a
        n = len(self)
        no = int(a["npts"][o])
        if no < 3:
            return
        P = a["points"][o, :no]
        diag = np.linalg.norm(a["size"][:n], axis=1)
        vol_o = float(np.prod(np.maximum(a["size"][o], 0.02)))
        gap = np.linalg.norm(a["center"][:n] - a["center"][o], axis=1)
        near = (gap <= 0.5 * (diag[o] + diag)) & (a["alias"][:n] < 0) & (a["npts"][:n] >= 3)
        near[o] = False
        for p in np.flatnonzero(near).tolist():
            Q = a["points"][p, : int(a["npts"][p])]
            in_p = inside_box(P, a["center"][p], a["size"][p], a["yaw"][p], 0.05)
            in_o = inside_box(Q, a["center"][o], a["size"][o], a["yaw"][o], 0.05)
            if self.categories[p] == self.categories[o]:
                same = max(in_p, in_o) > 0.5
            else:
                vol_p = float(np.prod(np.maximum(a["size"][p], 0.02)))
                same = min(in_p, in_o) > 0.5 and min(vol_o, vol_p) / max(vol_o, vol_p) > 0.3
            if same:
                keep, gone = (o, p) if a["n_obs"][o] >= a["n_obs"][p] else (p, o)
                self._merge(keep, gone)
                return

    def _merge(self, keep: int, gone: int) -> None:
        a = self.a
        nk, ng = int(a["npts"][keep]), int(a["npts"][gone])
        pts = np.concatenate([a["points"][keep, :nk], a["points"][gone, :ng]])
        if len(pts) > self.max_points:  # a sample of both, in proportion to what each was offered
            wk, wg = float(max(a["offered"][keep], 1)), float(max(a["offered"][gone], 1))
            w = np.concatenate([np.full(nk, wk / nk), np.full(ng, wg / ng)])
            pick = self.rng.choice(len(pts), self.max_points, replace=False, p=w / w.sum())
            pts = pts[np.sort(pick)]
        a["points"][keep, : len(pts)] = pts
        a["npts"][keep] = len(pts)
        for k in ("offered", "n_obs", "chances", "box_n"):
            a[k][keep] += a[k][gone]
        a["first_seen"][keep] = min(a["first_seen"][keep], a["first_seen"][gone])
        a["last_seen"][keep] = max(a["last_seen"][keep], a["last_seen"][gone])
        for c, k in self.votes[gone].items():
            self.votes[keep][c] = self.votes[keep].get(c, 0) + k
        self.votes[gone] = {}
        a["npts"][gone] = 0
        a["n_obs"][gone] = 0
        a["alias"][gone] = keep
        self._vote(keep, None)  # re-decide the category from both objects' detections
        self._refit(keep)
