"""Correlative scan matching of a view against the memory (what :mod:`.localize` builds on).

:class:`MapIndex` holds everything derived from one memory state, built once and cached on the memory
(rebuilt when it integrates more): the occupied voxel centres above the floor and their
nearest-neighbour index (:mod:`.nearest`), the voxels' object labels (merged objects mapped to their
survivor, unconfirmed detector objects to none), the memory objects' categories and centroids, and
per height band a likelihood field of the occupied cells with its FFT, plus the free space where a
camera may stand.

:func:`view_scan` turns a view into a :class:`Scan` in the *level* frame (camera above the origin,
floor at z = 0): structure points with normals and instance ids, free-space samples along the rays
and just in front of surfaces seen head-on, and the view's object segments. Objects are matched by
**category** only (:func:`matched_objects`): a view's instance ids are its own, never the memory's.
:func:`geometric_hypotheses` cross-correlates the scan, per heading, with the band fields (FFT),
free samples counting against, over the free space, and returns the best local maxima.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np
from scipy import fft as sfft
from scipy import ndimage

from .frame import CameraFrame
from .geometry import camera_yaw, rot_z, wrap_angle
from .localize_config import LocalizeConfig
from .nearest import GridIndex


# ================================================================================ the map index
class MapIndex:
    """Everything :func:`localize` needs from one memory state, built once (see module doc)."""

    def __init__(self, mem, cfg: LocalizeConfig):
        self.cfg = cfg
        vox = mem.voxels
        self.voxels = vox
        self.ceiling = float(mem.config.map.ceiling_z)
        T, _ = mem.trajectory()
        self.n_traj = len(T)
        self.R_tilt, self.height = _tilt_prior(T)
        self.T_last = T[-1].copy() if len(T) else None
        self.min_hits = int(mem.config.map.min_hits)  # what the maps show (noisy depth: stray single hits do not)
        occ = vox.field("hits") >= self.min_hits if len(vox) else np.zeros(0, dtype=bool)
        c = vox.centres()[occ] if occ.any() else np.zeros((0, 3))
        lab = vox.field("label")[occ] if occ.any() else np.zeros(0, dtype=np.int32)
        struct = (c[:, 2] > cfg.floor_clearance) & (c[:, 2] < self.ceiling)
        reg = mem.registry
        confirmed = reg.confirmed()
        if len(reg):  # voxels of merged objects belong to the survivor; unconfirmed objects to none
            canon = np.append(reg.canonical(), -1)
            lab = canon[np.where(lab >= 0, lab, len(reg))]
            lab = np.where((lab >= 0) & confirmed[np.maximum(lab, 0)], lab, -1).astype(np.int32)
        self.centres, self.labels = c[struct], lab[struct]
        self.empty = len(self.centres) < 50
        self.obj_category = [cat if ok else "" for cat, ok in zip(reg.categories, confirmed)]
        npts = reg.a["npts"][: len(reg)]
        self.obj_centroid = np.array(
            [reg.a["points"][o, : max(n, 1)].mean(axis=0) if n else reg.a["center"][o] for o, n in enumerate(npts)]
        ).reshape(-1, 3)
        self.obj_radius = np.array([0.5 * np.hypot(*reg.a["size"][o, :2]) for o in range(len(reg))])
        self.categories = sorted(set(self.obj_category))
        self.obj_cat_id = np.array([self.categories.index(c) for c in self.obj_category], dtype=np.int64).reshape(-1)
        if len(self.obj_cat_id) == 0:
            self.obj_cat_id = np.zeros(1, dtype=np.int64)
        if self.empty:
            return
        self.tree = GridIndex(self.centres)
        # ---- 2D grids of the correlative search
        cs = cfg.cell
        lo = np.minimum(c[:, :2].min(axis=0), T[:, :2, 3].min(axis=0) if len(T) else np.inf) - 0.5
        hi = np.maximum(c[:, :2].max(axis=0), T[:, :2, 3].max(axis=0) if len(T) else -np.inf) + 0.5
        self.origin = lo
        self.shape = (
            int(np.ceil((hi[1] - lo[1]) / cs)) + 1,
            int(np.ceil((hi[0] - lo[0]) / cs)) + 1,
        )  # rows = y, cols = x
        H, W = self.shape
        self.R_cells = int(np.ceil(cfg.max_range / cs)) + 2
        self.fft_shape = (
            sfft.next_fast_len(H + self.R_cells + 1, real=True),
            sfft.next_fast_len(W + self.R_cells + 1, real=True),
        )
        edges = list(cfg.bands) + [self.ceiling]
        self.band_edges = np.array(edges)
        self.map_fft = []
        obstacle = np.zeros((H, W), dtype=bool)
        sigma_cells = cfg.likelihood_sigma / cs
        for b in range(len(edges) - 1):
            sel = (self.centres[:, 2] >= edges[b]) & (self.centres[:, 2] < edges[b + 1])
            occ2 = self._rasterize(self.centres[sel, :2])
            obstacle |= occ2
            d = ndimage.distance_transform_edt(~occ2) if occ2.any() else np.full((H, W), np.inf)
            lik = np.exp(-0.5 * (d / max(sigma_cells, 1e-6)) ** 2)
            self.map_fft.append(sfft.rfft2(lik.astype(np.float32), s=self.fft_shape))
        # where a camera may stand: not in an obstacle cell, and either near seen floor or in the region
        # reachable from the trajectory without crossing (slightly thickened) obstacles
        floor = c[c[:, 2] <= cfg.floor_clearance]
        floor_seen = (
            ndimage.binary_dilation(self._rasterize(floor[:, :2]), iterations=3)
            if len(floor)
            else np.zeros((H, W), dtype=bool)
        )
        reachable = np.zeros((H, W), dtype=bool)
        if len(T):
            rc = self._cells(T[:, :2, 3])
            comp, _ = ndimage.label(~ndimage.binary_dilation(obstacle))
            ids = np.unique(comp[rc[:, 0], rc[:, 1]])
            reachable = np.isin(comp, ids[ids > 0])
            reachable = ndimage.binary_dilation(reachable)
        self.free = (floor_seen | reachable) & ~obstacle
        if len(T):  # the trajectory's own cells are free whatever the maps say
            self.free[rc[:, 0], rc[:, 1]] = True

    def object_tree(self, o: int):
        """(nearest-neighbour index, centres) of the voxels voted to memory object ``o`` (None when it
        has fewer than 5)."""
        cache = self.__dict__.setdefault("_object_trees", {})
        if o not in cache:
            cen = self.centres[self.labels == o]
            cache[o] = (GridIndex(cen), cen) if len(cen) >= 5 else None
        return cache[o]

    def _cells(self, xy: np.ndarray) -> np.ndarray:
        rc = np.floor((np.asarray(xy)[:, ::-1] - self.origin[::-1]) / self.cfg.cell).astype(np.int64)
        return np.clip(rc, 0, np.array(self.shape) - 1)

    def _rasterize(self, xy: np.ndarray) -> np.ndarray:
        out = np.zeros(self.shape, dtype=bool)
        if len(xy):
            rc = self._cells(xy)
            out[rc[:, 0], rc[:, 1]] = True
        return out

    def cell_centre(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        return np.stack(
            [self.origin[0] + (c + 0.5) * self.cfg.cell, self.origin[1] + (r + 0.5) * self.cfg.cell], axis=-1
        )


def _tilt_prior(T: np.ndarray) -> tuple[np.ndarray, float]:
    """(R_level_cam, camera height) typical of the trajectory: its rotations with the yaw taken out,
    averaged (projected back onto SO(3)), and the median camera height. A level camera when empty."""
    if len(T) == 0:
        return np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]), 1.5
    Rs = np.stack([rot_z(-camera_yaw(t)) @ t[:3, :3] for t in T])
    U, _, Vt = np.linalg.svd(Rs.mean(axis=0))
    R = U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt
    return R, float(np.median(T[:, 2, 3]))


def map_index(mem, cfg: LocalizeConfig) -> MapIndex:
    """The :class:`MapIndex` of ``mem`` under ``cfg``, kept by the memory until its contents change
    (:meth:`SpatialMemory.derived`)."""
    return mem.derived(("localize", cfg), lambda: MapIndex(mem, cfg))


# ================================================================================ the scan
@dataclass
class Scan:
    pts: np.ndarray  # Nx3 level-frame structure points (downsampled)
    normals: np.ndarray  # Nx3 level-frame normals (0 where unknown)
    inst: np.ndarray  # N instance id (0 = none)
    free: np.ndarray  # Mx3 level-frame free-space samples
    objects: dict  # instance id -> (centroid xyz level frame, n pixels, category)
    n_valid: int
    near: np.ndarray | None = None  # Kx3 free-space samples just in front of surfaces seen head-on
    unique_matches: dict = field(default_factory=dict)  # view instance id -> the one memory object of its category
    want: np.ndarray | None = None  # per point: the category id it should land on; -2 = none


def view_scan(frame: CameraFrame, idx: MapIndex, cfg: LocalizeConfig) -> Scan:
    H, W = frame.depth.shape
    s = max(1, int(np.ceil(max(H, W) / cfg.scan_pixels)))
    depth = frame.depth[s // 2 :: s, s // 2 :: s].astype(np.float64)
    if cfg.scan_block_median and s > 1:  # noisy depth: each scan pixel is the median of its s x s block
        depth = _block_median(frame.depth, s, depth.shape)
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    u, v = u * s + s // 2, v * s + s // 2
    K = frame.K
    valid = np.isfinite(depth) & (depth > 0.05) & (depth < cfg.max_range)
    z = np.where(valid, depth, np.nan)
    p_cam = np.stack([(u - K[0, 2]) / K[0, 0] * z, (v - K[1, 2]) / K[1, 1] * z, z], axis=-1)
    # normals from the organised grid (central differences), camera frame
    dx = np.full_like(p_cam, np.nan)
    dy = np.full_like(p_cam, np.nan)
    dx[:, 1:-1] = p_cam[:, 2:] - p_cam[:, :-2]
    dy[1:-1] = p_cam[2:] - p_cam[:-2]
    n_cam = np.cross(dx, dy)
    nn = np.linalg.norm(n_cam, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_cam = n_cam / nn
    R, hgt = idx.R_tilt, idx.height
    p = p_cam[valid] @ R.T + np.array([0.0, 0.0, hgt])
    n = n_cam[valid] @ R.T
    # reject normals across depth discontinuities
    jump = np.abs(np.concatenate([dx[valid], dy[valid]], axis=1)).max(axis=1) > 0.15 * z[valid] + 0.05
    n[~np.isfinite(n).all(axis=1) | jump] = 0.0
    inst_img = (
        frame.instance[s // 2 :: s, s // 2 :: s] if frame.instance is not None else np.zeros((h, w), dtype=np.int32)
    )
    inst = inst_img[valid].astype(np.int64)
    # objects (centroids of labelled segments, from the full-resolution masks)
    objects = {}
    if frame.instance is not None and frame.labels:
        scale = (H * W) / (256.0 * 256.0)
        labelled = {int(i): c for i, c in frame.labels.items() if i > 0}
        for iid, cat in labelled.items():
            sel = inst == iid
            if sel.sum() * s * s < cfg.min_object_pixels * scale or sel.sum() < 3:
                continue
            objects[iid] = (p[sel].mean(axis=0), int(sel.sum()), cat)
    struct = (p[:, 2] > cfg.floor_clearance) & (p[:, 2] < idx.ceiling)
    ps, ns, ins = p[struct], n[struct], inst[struct]
    keep = _voxel_first(ps, cfg.scan_voxel)
    ps, ns, ins = ps[keep], ns[keep], ins[keep]
    # free-space samples along the rays of a sparser pixel set
    rays = p[::3] - np.array([0.0, 0.0, hgt])
    d = np.linalg.norm(rays, axis=1)
    free = []
    step = cfg.scan_voxel * 2
    for t in np.arange(0.3, cfg.max_range, step):
        ok = d - cfg.free_gap > t
        if not ok.any():
            break
        free.append(rays[ok] * (t / d[ok])[:, None])
    free = np.concatenate(free) + np.array([0.0, 0.0, hgt]) if free else np.zeros((0, 3))
    free = free[(free[:, 2] > cfg.floor_clearance + 0.1) & (free[:, 2] < idx.ceiling - 0.1)]
    free = free[_voxel_first(free, cfg.scan_voxel * 2)]
    # free space just in front of surfaces seen head-on (|cos| >= 0.5): a pose that puts a wall on the
    # far face of a thin wall, or one wall-thickness off, would see through the near face
    ray = p - np.array([0.0, 0.0, hgt])
    dist = np.linalg.norm(ray, axis=1)
    cos = np.abs(np.einsum("ij,ij->i", ray, n)) / np.maximum(dist, 1e-9)
    head_on = (cos >= 0.5) & (p[:, 2] > cfg.floor_clearance + 0.1) & (p[:, 2] < idx.ceiling - 0.1)
    near = [p[head_on] - ray[head_on] * ((gap / cos[head_on]) / dist[head_on])[:, None] for gap in cfg.near_gaps]
    near = np.concatenate(near) if near else np.zeros((0, 3))
    near = near[_voxel_first(near, cfg.scan_voxel / 2)]
    return Scan(ps, ns, ins, free, objects, int(valid.sum()), near=near)


def _block_median(depth: np.ndarray, s: int, shape: tuple[int, int]) -> np.ndarray:
    """Median of the valid depth readings of each s x s block (NaN where a block has fewer than half)."""
    h, w = shape
    d = np.asarray(depth[: h * s, : w * s], dtype=np.float64)
    d = np.where(np.isfinite(d) & (d > 0), d, np.nan)
    if d.shape != (h * s, w * s):  # the image does not tile: pad with no readings
        pad = np.full((h * s, w * s), np.nan)
        pad[: d.shape[0], : d.shape[1]] = d
        d = pad
    blocks = d.reshape(h, s, w, s).transpose(0, 2, 1, 3).reshape(h, w, s * s)
    enough = np.isfinite(blocks).sum(axis=2) >= (s * s) / 2
    with np.errstate(all="ignore"):
        med = np.nanmedian(np.where(enough[..., None], blocks, 0.0), axis=2)
    return np.where(enough, med, np.nan)


def _voxel_first(p: np.ndarray, size: float) -> np.ndarray:
    """Indices of one point per occupied voxel of side ``size``."""
    if len(p) == 0:
        return np.zeros(0, dtype=np.int64)
    q = np.floor(p / size).astype(np.int64) + (1 << 20)
    key = (q[:, 0] << 42) | (q[:, 1] << 21) | q[:, 2]
    return np.sort(np.unique(key, return_index=True)[1])


def geometric_hypotheses(scan: Scan, idx: MapIndex, cfg: LocalizeConfig) -> list[tuple[float, float, float, float]]:
    """(x, y, yaw, correlation score) local maxima of the correlative search over the free space."""
    if len(scan.pts) < 10:
        return []
    cs, R = cfg.cell, idx.R_cells
    fs = idx.fft_shape
    H, W = idx.shape
    edges = idx.band_edges
    nb = len(idx.map_fft)
    n_hit = len(scan.pts)
    wf = cfg.free_weight * 0.5 * n_hit / max(len(scan.free), 1)  # the free samples weigh half the hits in total
    # channels: (level-frame xy, weights, map FFT); the hits and free samples of a band share its map
    band = np.clip(np.searchsorted(edges, scan.pts[:, 2], side="right") - 1, 0, nb - 1)
    fband = np.clip(np.searchsorted(edges, scan.free[:, 2], side="right") - 1, 0, nb - 1)
    channels = []
    for b in range(nb):
        xy = np.concatenate([scan.pts[band == b, :2], scan.free[fband == b, :2]])
        w = np.concatenate([np.ones((band == b).sum()), np.full((fband == b).sum(), -wf)])
        if len(xy):
            channels.append((xy, w, idx.map_fft[b]))
    obj_pts, obj_w, obj_fft = _object_channel(scan, idx, cfg)
    if obj_fft is not None:
        channels.append((obj_pts[:, :2], np.full(len(obj_pts), obj_w), obj_fft))
    best = np.full((H, W), -np.inf, dtype=np.float32)
    best_yaw = np.zeros((H, W), dtype=np.float32)
    per_yaw = []
    n_flat = fs[0] * fs[1]
    for yaw in np.radians(np.arange(0.0, 360.0, cfg.yaw_step_deg)):
        c, s_ = np.cos(yaw), np.sin(yaw)
        acc = None
        for xy, w, mf in channels:
            col = np.rint((c * xy[:, 0] - s_ * xy[:, 1]) / cs).astype(np.int64)
            row = np.rint((s_ * xy[:, 0] + c * xy[:, 1]) / cs).astype(np.int64)
            ok = (np.abs(col) <= R) & (np.abs(row) <= R)
            flat = (row[ok] % fs[0]) * fs[1] + (col[ok] % fs[1])
            img = np.bincount(flat, weights=w[ok], minlength=n_flat).astype(np.float32).reshape(fs)
            f = np.conj(sfft.rfft2(img)) * mf
            acc = f if acc is None else acc + f
        # corr[k] = sum_q S[q] L[k + q]: the camera in cell k (row, col) of the map, scan offsets q relative to
        # the camera splatted around index 0 (negative offsets wrapped; the padding keeps the sum linear)
        score = sfft.irfft2(acc, s=fs)[:H, :W] / n_hit
        score[~idx.free] = -np.inf
        better = score > best
        best[better] = score[better]
        best_yaw[better] = yaw
        k = int(np.argmax(score))
        per_yaw.append((float(score.flat[k]), k, float(yaw)))
    # local maxima of the best-over-headings map, and the best cell of every heading
    finite = np.where(np.isfinite(best), best, -1e9)
    peaks = np.flatnonzero((finite == ndimage.maximum_filter(finite, size=5, mode="nearest")) & np.isfinite(best))
    cands = [(float(best.flat[k]), k, float(best_yaw.flat[k])) for k in peaks] + per_yaw
    cands.sort(key=lambda c: -c[0])
    out = []
    for val, k, yaw in cands:
        r, col = divmod(k, W)
        xy = idx.cell_centre(r, col)  # scan offsets were rounded: the camera sits at the cell centre
        cand = (float(xy[0]), float(xy[1]), yaw, val)
        if all(
            np.hypot(cand[0] - o[0], cand[1] - o[1]) > 0.4 or abs(wrap_angle(cand[2] - o[2])) > np.radians(15)
            for o in out
        ):
            out.append(cand)
        if len(out) >= cfg.candidates:
            break
    return out


def matched_objects(scan: Scan, idx: MapIndex) -> dict[int, list[int]]:
    """View object (its instance id, meaningful within the view only) -> the confirmed memory objects of
    its category."""
    out = {}
    for iid, (_, _, cat) in scan.objects.items():
        cands = [o for o, c in enumerate(idx.obj_category) if c == cat]
        if cands:
            out[iid] = cands
    return out


def semantic_targets(scan: Scan, idx: MapIndex) -> None:
    """What each scan point should land on: a voxel of its category; a view object whose category has
    a single memory object is matched to it (``unique_matches``)."""
    matched = matched_objects(scan, idx)
    scan.unique_matches = {i: m[0] for i, m in matched.items() if len(m) == 1}
    scan.want = np.full(len(scan.pts), -2, dtype=np.int64)
    for iid, objs in matched.items():
        scan.want[scan.inst == iid] = idx.obj_cat_id[objs[0]]


def _object_channel(scan: Scan, idx: MapIndex, cfg: LocalizeConfig):
    """(points, weight, map FFT) of the semantic correlation channel, or (None, 0, None)."""
    matched = matched_objects(scan, idx)
    if not matched:
        return None, 0.0, None
    sel = np.isin(scan.inst, list(matched))
    if sel.sum() < 3:
        return None, 0.0, None
    objs = sorted({o for v in matched.values() for o in v})
    vsel = np.isin(idx.labels, objs)
    if not vsel.any():
        return None, 0.0, None
    occ2 = idx._rasterize(idx.centres[vsel, :2])
    d = ndimage.distance_transform_edt(~occ2)
    lik = np.exp(-0.5 * (d / max(cfg.likelihood_sigma / cfg.cell, 1e-6)) ** 2)
    n_hit = len(scan.pts)
    w = min(0.5 * n_hit / sel.sum(), 3.0)
    return scan.pts[sel], w, sfft.rfft2(lik.astype(np.float32), s=idx.fft_shape)
