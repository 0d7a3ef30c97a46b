"""Localisation of a view that comes without a pose (DESIGN §3, §5): where, in the memory's frame,
was this RGB-D frame taken?

A ground robot's camera is level-ish at a known height, so the unknowns are the floor position and
the heading, (x, y, yaw); the camera's tilt and height are taken from the memory's own trajectory
(the median over its poses). The view's ``T_world_cam`` is never read.

1. **Scan**: the view's valid depth, back-projected (subsampled to <= ``scan_pixels`` on the long
   side), put in the *level* frame (camera above the origin, floor at z = 0), downsampled to
   ``scan_voxel``; the floor (z < ``floor_clearance``) and the ceiling (z >= the map's
   ``ceiling_z``) are left out of matching, they say nothing about x, y, yaw. Free-space samples
   along the rays (up to ``free_gap`` before each hit) go with it.
2. **Hypotheses**:
   (a) *objects*: centroids of the view's instance segments vs. centroids of the memory's objects:
   by instance id (``association="instance"``: ids are stable) or by category (detector mode,
   ambiguous: RANSAC over pairs with consistent distances), 2D rigid fits;
   (b) *geometry*: correlative scan matching. For every heading (``yaw_step_deg``) the scan's points
   are splatted, per height band, on a ``cell``-metre grid and cross-correlated (FFT) with a
   likelihood field of the memory's occupied voxels in the same band; free-space samples that land
   on occupied cells count against. Positions are restricted to the mapped free space (floor seen
   nearby, no obstacle in the cell). The best local maxima (non-maximum suppression) are kept.
3. **Refinement**: the best ``refine`` hypotheses (after a cheap check with a loose gate) go through
   point-to-plane ICP in (x, y, yaw) against the occupied voxel centres (normals from the view's
   depth image; points of uniquely matched objects pair only with that object's voxels), with a
   shrinking distance gate; the two best distinct results are then polished by a pattern search on
   the verification score (what pins a view that slides along a wall is in the score, not in ICP).
4. **Verification**: a pose scores the soft fraction of scan points near an occupied voxel
   (1 - (d / ``inlier_m``)^2), minus the fraction of free-space samples that fall in an occupied
   voxel (the view would see through known surfaces), times (0.75 + 0.25 x the fraction of labelled
   points landing on voxels of their own object, or category in detector mode). The best wins; the
   confidence combines its score with the margin over the best pose that would be a *wrong* answer
   (more than 0.25 m or 6 degrees away): an ambiguous view (a blank wall, two identical rooms) gets a
   low confidence rather than a coin flip presented as certain.

Everything derived from the memory (KD-tree, band grids, their FFTs) is built once per memory
state and cached on the memory (rebuilt when it integrates more frames).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy import fft as sfft
from scipy import ndimage
from scipy.spatial import cKDTree

from .frame import CameraFrame
from .geometry import camera_yaw, make_T, rot_z
from .pose import CameraPose

METHODS = ("objects", "geometry", "objects+geometry", "failed")


@dataclass(frozen=True)
class LocalizeConfig:
    """Knobs of :func:`localize` (metres and degrees). The defaults suit 5 cm voxel maps of rooms."""

    cell: float = 0.1  # grid of the correlative search
    yaw_step_deg: float = 5.0  # headings tried by the correlative search
    bands: tuple[float, ...] = (0.1, 1.0)  # lower edges of the height bands (the last one ends at the ceiling)
    floor_clearance: float = 0.1  # points below are floor
    max_range: float = 8.0  # depth beyond is not used
    scan_pixels: int = 80  # the view is subsampled to at most this many pixels along its long side
    scan_voxel: float = 0.1  # scan downsampling
    free_gap: float = 0.3  # free-space samples along the rays stop this far before the hit
    near_gaps: tuple[float, ...] = (
        0.08,
        0.13,
    )  # ... plus samples this far in front of surfaces seen head-on (along the normal)
    free_weight: float = 1.0  # weight of a free-space sample landing on an occupied cell (vs a hit)
    likelihood_sigma: float = 0.1  # blur of the occupancy likelihood field
    candidates: int = 10  # geometric hypotheses kept from the correlative search
    refine: int = 5  # geometric hypotheses (best correlation first) refined by ICP, with all object hypotheses
    polish: int = 3  # distinct leaders after ICP polished by a pattern search on the score
    distinct_m: float = 0.25  # a pose this far from the best (or distinct_deg) is a competitor for the margin
    distinct_deg: float = 6.0
    icp_iterations: int = 6  # at most, per distance gate (0.5, 0.3, 0.2, 0.12 m)
    icp_points: int = 400  # scan points used by ICP (an even subsample)
    semantic_icp: bool = True  # points of uniquely matched objects pair only with that object's voxels
    inlier_m: float = 0.1  # a scan point within this of an occupied voxel centre is an inlier
    min_confidence: float = 0.5  # Localization.ok threshold
    margin_geometry: float = 0.1  # score margin over the runner-up that makes a pose certain (no object matched)
    margin_objects: float = 0.05  # ... with objects matched
    min_object_pixels: int = 20  # at 256x256; scaled with the image area


@dataclass(frozen=True, eq=False)
class Localization(CameraPose):
    """Where a view was taken, in the memory's frame.

    T_world_cam: 4x4 estimated camera pose (the best guess even when ``ok`` is False; the memory's
    latest pose when there was nothing to go on). confidence: [0, 1], ``score`` tempered by the
    margin over the best different pose. ok: ``confidence >= min_confidence``. score: inlier
    fraction - see-through fraction, times semantic agreement (about 0.9 for a correct pose of a
    fully mapped view). inlier_fraction: scan points within ``inlier_m`` of the map. see_through:
    fraction of free-space samples inside occupied voxels. semantic: fraction of labelled inlier
    points on voxels of the same object/category (nan without labels). margin: score gap to the
    best pose more than ``distinct_m`` (0.25 m) or ``distinct_deg`` (6 degrees) away, i.e. one that
    would be a wrong answer. alternatives: up to three such poses with their scores. method:
    ``"objects"``, ``"geometry"``,
    ``"objects+geometry"`` (both found it) or ``"failed"``. n_objects: view objects matched to memory
    objects. reason: why it failed (empty for success). seconds: wall time.
    """

    T_world_cam: np.ndarray
    confidence: float
    score: float
    inlier_fraction: float
    see_through: float
    semantic: float
    margin: float
    method: str
    ok: bool = False
    n_objects: int = 0
    n_points: int = 0
    reason: str = ""
    seconds: float = 0.0
    alternatives: tuple = field(default=(), repr=False)  # (T_world_cam, score) of the runners-up


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
        occ = vox.occupied() if len(vox) else np.zeros(0, dtype=bool)
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
        self.association = reg.association
        self.obj_category = [cat if ok else "" for cat, ok in zip(reg.categories, confirmed)]
        self.obj_by_instance = {int(i): o for o, i in enumerate(reg.a["instance_id"][: len(reg)]) if i >= 0}
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
        self.tree = cKDTree(self.centres)
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
        """(KD-tree, centres) of the voxels voted to memory object ``o`` (None when it has fewer than 5)."""
        cache = self.__dict__.setdefault("_object_trees", {})
        if o not in cache:
            cen = self.centres[self.labels == o]
            cache[o] = (cKDTree(cen), cen) if len(cen) >= 5 else None
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
    """The cached :class:`MapIndex` of ``mem`` (rebuilt when the memory changed or ``cfg`` differs)."""
    reg = mem.registry.a
    key = (
        mem.n_frames,
        len(mem.voxels),
        len(mem.registry),
        int(reg["n_obs"].sum()),
        int(reg["box_n"].sum()),
        len(mem.trajectory()[1]),
        cfg,
    )
    cache = getattr(mem, "_localize_cache", None)
    if cache is not None and cache[0] == key:
        return cache[1]
    idx = MapIndex(mem, cfg)
    mem._localize_cache = (key, idx)
    return idx


# ================================================================================ the scan
@dataclass
class _Scan:
    pts: np.ndarray  # Nx3 level-frame structure points (downsampled)
    normals: np.ndarray  # Nx3 level-frame normals (0 where unknown)
    inst: np.ndarray  # N instance id (0 = none)
    free: np.ndarray  # Mx3 level-frame free-space samples
    objects: dict  # instance id -> (centroid xyz level frame, n pixels, category)
    n_valid: int
    near: np.ndarray | None = None  # Kx3 free-space samples just in front of surfaces seen head-on
    unique_matches: dict = field(default_factory=dict)  # instance id -> the one memory object it is
    want: np.ndarray | None = (
        None  # per point: memory object (instance mode) or category id it should land on; -2 = none
    )
    want_kind: str = "object"


def _scan(frame: CameraFrame, idx: MapIndex, cfg: LocalizeConfig) -> _Scan:
    H, W = frame.depth.shape
    s = max(1, int(np.ceil(max(H, W) / cfg.scan_pixels)))
    depth = frame.depth[s // 2 :: s, s // 2 :: s].astype(np.float64)
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
    return _Scan(ps, ns, ins, free, objects, int(valid.sum()), near=near)


def _voxel_first(p: np.ndarray, size: float) -> np.ndarray:
    """Indices of one point per occupied voxel of side ``size``."""
    if len(p) == 0:
        return np.zeros(0, dtype=np.int64)
    q = np.floor(p / size).astype(np.int64) + (1 << 20)
    key = (q[:, 0] << 42) | (q[:, 1] << 21) | q[:, 2]
    return np.sort(np.unique(key, return_index=True)[1])


# ================================================================================ hypotheses
def _rigid2d(a: np.ndarray, b: np.ndarray, w: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """(yaw, t) minimising sum w |R(yaw) a + t - b|^2 for Nx2 point sets."""
    w = np.ones(len(a)) if w is None else w
    ws = w.sum()
    ca, cb = (w[:, None] * a).sum(0) / ws, (w[:, None] * b).sum(0) / ws
    A, B = a - ca, b - cb
    sxx = (w * (A[:, 0] * B[:, 0] + A[:, 1] * B[:, 1])).sum()
    sxy = (w * (A[:, 0] * B[:, 1] - A[:, 1] * B[:, 0])).sum()
    yaw = float(np.arctan2(sxy, sxx))
    return yaw, cb - rot_z(yaw)[:2, :2] @ ca


def _object_hypotheses(scan: _Scan, idx: MapIndex, max_hyp: int = 4) -> tuple[list[tuple[float, float, float]], int]:
    """(x, y, yaw) poses from object centroid correspondences, and the number of view objects matched."""
    if not scan.objects or len(idx.obj_category) == 0:
        return [], 0
    view_ids = list(scan.objects)
    vc = np.array([scan.objects[i][0][:2] for i in view_ids])
    vcat = [scan.objects[i][2] for i in view_ids]
    mc = idx.obj_centroid[:, :2]
    if idx.association == "instance" and idx.obj_by_instance:
        pairs = [
            (k, idx.obj_by_instance[i])
            for k, i in enumerate(view_ids)
            if i in idx.obj_by_instance and idx.obj_category[idx.obj_by_instance[i]] == vcat[k]
        ]
        cands = {k: [m] for k, m in pairs}
    else:
        cands = {k: [m for m, c in enumerate(idx.obj_category) if c == vcat[k]] for k in range(len(view_ids))}
        cands = {k: v for k, v in cands.items() if v}
    ks = list(cands)
    n_matched = len(ks)
    if n_matched < 2:
        return [], n_matched
    tol = 0.4 + idx.obj_radius  # per memory object: centroids of partial views wander
    hyps = []
    rng = np.random.default_rng(0)
    trials = [(a, b) for ai, a in enumerate(ks) for b in ks[ai + 1 :]]
    if len(trials) > 200:
        trials = [trials[i] for i in rng.choice(len(trials), 200, replace=False)]
    for a, b in trials:
        dv = np.linalg.norm(vc[a] - vc[b])
        if dv < 0.2:
            continue
        for A in cands[a]:
            for B in cands[b]:
                if A == B or abs(np.linalg.norm(mc[A] - mc[B]) - dv) > tol[A] + tol[B]:
                    continue
                yaw, t = _rigid2d(vc[[a, b]], mc[[A, B]])
                R = rot_z(yaw)[:2, :2]
                # inliers: view objects landing near a memory object of their candidates
                inl, src, dst = 0, [], []
                for k in ks:
                    q = R @ vc[k] + t
                    dist = np.linalg.norm(mc[cands[k]] - q, axis=1)
                    j = int(np.argmin(dist))
                    if dist[j] < tol[cands[k][j]]:
                        inl += 1
                        src.append(vc[k])
                        dst.append(mc[cands[k][j]])
                if inl >= 2:
                    yaw, t = _rigid2d(np.array(src), np.array(dst))
                    hyps.append((inl, float(t[0]), float(t[1]), yaw))
    hyps.sort(key=lambda h: -h[0])
    out = []
    for inl, x, y, yaw in hyps:
        if all(np.hypot(x - o[0], y - o[1]) > 0.3 or abs(_wrap(yaw - o[2])) > np.radians(10) for o in out):
            out.append((x, y, yaw))
        if len(out) >= max_hyp:
            break
    return out, n_matched


def _geometric_hypotheses(scan: _Scan, idx: MapIndex, cfg: LocalizeConfig) -> list[tuple[float, float, float, float]]:
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
            np.hypot(cand[0] - o[0], cand[1] - o[1]) > 0.4 or abs(_wrap(cand[2] - o[2])) > np.radians(15) for o in out
        ):
            out.append(cand)
        if len(out) >= cfg.candidates:
            break
    return out


def _matched_objects(scan: _Scan, idx: MapIndex) -> dict[int, list[int]]:
    """View instance id -> memory objects it may be (by instance id, else by category)."""
    out = {}
    for iid, (_, _, cat) in scan.objects.items():
        if idx.association == "instance" and iid in idx.obj_by_instance:
            o = idx.obj_by_instance[iid]
            if idx.obj_category[o] == cat:
                out[iid] = [o]
        elif idx.association != "instance" or not idx.obj_by_instance:
            cands = [o for o, c in enumerate(idx.obj_category) if c == cat]
            if cands:
                out[iid] = cands
    return out


def _semantic_targets(scan: _Scan, idx: MapIndex) -> None:
    """What each scan point should land on: its memory object (ids are stable) or its category."""
    matched = _matched_objects(scan, idx)
    scan.unique_matches = {i: m[0] for i, m in matched.items() if len(m) == 1}
    scan.want = np.full(len(scan.pts), -2, dtype=np.int64)
    by_instance = idx.association == "instance" and bool(idx.obj_by_instance)
    scan.want_kind = "object" if by_instance else "category"
    for iid, objs in matched.items():
        rows = scan.inst == iid
        scan.want[rows] = objs[0] if by_instance else idx.obj_cat_id[objs[0]]


def _object_channel(scan: _Scan, idx: MapIndex, cfg: LocalizeConfig):
    """(points, weight, map FFT) of the semantic correlation channel, or (None, 0, None)."""
    matched = _matched_objects(scan, idx)
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


def _wrap(a: float) -> float:
    return float((a + np.pi) % (2 * np.pi) - np.pi)


# ================================================================================ refinement + verification
def _icp(scan: _Scan, idx: MapIndex, cfg: LocalizeConfig, x: float, y: float, yaw: float) -> tuple[float, float, float]:
    """Point-to-plane ICP in (x, y, yaw) with a shrinking distance gate (point-to-point where the
    normal is unknown or vertical). Points of view objects matched to one memory object (instance
    ids) pair only with that object's voxels, point-to-point: they pin a view that slides along a wall."""
    step = max(1, len(scan.pts) // cfg.icp_points)
    P, Nrm, inst = scan.pts[::step], scan.normals[::step], scan.inst[::step]
    sem = [(np.flatnonzero(inst == iid), idx.object_tree(o)) for iid, o in scan.unique_matches.items()]
    sem = [(rows, tree) for rows, tree in sem if tree is not None and len(rows)] if cfg.semantic_icp else []
    gates = [g for g in (0.5, 0.3, 0.2, 0.12) for _ in range(cfg.icp_iterations)]
    k_gate = 0
    while k_gate < len(gates):
        gate = gates[k_gate]
        k_gate += 1
        R = rot_z(yaw)
        Wp = P @ R.T + np.array([x, y, 0.0])
        d, j = idx.tree.query(Wp, distance_upper_bound=gate)
        ok = np.isfinite(d)
        q_all = np.zeros_like(Wp)
        q_all[ok] = idx.centres[j[ok]]
        forced = np.zeros(len(P), dtype=bool)
        for rows, (tree, cen) in sem:
            d2, j2 = tree.query(Wp[rows], distance_upper_bound=2 * gate)
            ok2 = np.isfinite(d2)
            ok[rows] = ok2
            q_all[rows[ok2]] = cen[j2[ok2]]
            forced[rows] = True
        if ok.sum() < 10:
            break
        w_ = Wp[ok]
        q = q_all[ok]
        n = Nrm[ok] @ R.T
        nh = np.hypot(n[:, 0], n[:, 1])
        plane = (nh > 0.5) & ~forced[ok]
        # rows: plane residual n.(w - q) along the horizontal normal; point rows for the rest (x and y)
        J, r = [], []
        if plane.any():
            nx, ny = n[plane, 0] / nh[plane], n[plane, 1] / nh[plane]
            wx, wy = w_[plane, 0], w_[plane, 1]
            J.append(np.stack([nx, ny, -nx * wy + ny * wx], axis=1))
            r.append(nx * (wx - q[plane, 0]) + ny * (wy - q[plane, 1]))
        pt = ~plane
        if pt.any():
            wx, wy = w_[pt, 0], w_[pt, 1]
            one, zero = np.ones(pt.sum()), np.zeros(pt.sum())
            J.append(np.stack([one, zero, -wy], axis=1) * 0.5)
            r.append((wx - q[pt, 0]) * 0.5)
            J.append(np.stack([zero, one, wx], axis=1) * 0.5)
            r.append((wy - q[pt, 1]) * 0.5)
        J, r = np.concatenate(J), np.concatenate(r)
        # Huber weights
        a = np.abs(r)
        k = 0.05
        wts = np.where(a < k, 1.0, k / np.maximum(a, 1e-12))
        A = J.T @ (J * wts[:, None]) + 1e-6 * np.eye(3)
        delta = -np.linalg.solve(A, J.T @ (wts * r))
        dx, dy, dth = delta
        c, s_ = np.cos(dth), np.sin(dth)
        x, y = c * x - s_ * y + dx, s_ * x + c * y + dy
        yaw = _wrap(yaw + dth)
        if abs(dth) < 2e-4 and np.hypot(dx, dy) < 2e-3:  # converged at this gate: go to the next one
            k_gate = (k_gate + cfg.icp_iterations - 1) // cfg.icp_iterations * cfg.icp_iterations
    return x, y, yaw


def _verify(
    scan: _Scan,
    idx: MapIndex,
    cfg: LocalizeConfig,
    x: float,
    y: float,
    yaw: float,
    gate: float | None = None,
    near: bool = True,
) -> tuple[float, float, float, float]:
    """(score, inlier fraction, see-through fraction, semantic agreement) of a pose; ``gate`` (default
    ``inlier_m``) is the distance within which a scan point counts as explained; ``near=False`` leaves
    out the samples just in front of surfaces (they punish poses a few centimetres off: not for
    unrefined hypotheses)."""
    gate = gate or cfg.inlier_m
    R = rot_z(yaw)
    t = np.array([x, y, 0.0])
    Wp = scan.pts @ R.T + t
    d, j = idx.tree.query(Wp, distance_upper_bound=gate)
    inl = np.isfinite(d)
    f_in = float(inl.mean()) if len(inl) else 0.0
    soft = float(np.where(inl, 1.0 - (np.where(inl, d, 0.0) / gate) ** 2, 0.0).mean()) if len(inl) else 0.0
    f_st = 0.0
    if len(scan.free):
        vi = idx.voxels.lookup(scan.free @ R.T + t)
        hit = vi >= 0
        if hit.any():
            hits = idx.voxels.field("hits")
            hit[hit] = hits[vi[hit]] > 0
        f_st = float(hit.mean())
    f_near = 0.0
    if near and scan.near is not None and len(scan.near):
        vi = idx.voxels.lookup(scan.near @ R.T + t)
        hit = vi >= 0
        if hit.any():
            hit[hit] = idx.voxels.field("hits")[vi[hit]] > 0
        f_near = float(hit.mean())
        f_st = max(f_st, f_near)
    sem = np.nan
    lab = scan.want >= 0
    if (
        lab.sum() >= 5
    ):  # points of matched objects should land on their object (or category): near nothing counts against
        jj = j[lab]
        hit = jj < len(idx.labels)
        mem_lab = np.full(len(jj), -1, dtype=np.int64)
        mem_lab[hit] = idx.labels[jj[hit]]
        if scan.want_kind == "object":
            agree = mem_lab == scan.want[lab]
        else:  # category
            agree = (mem_lab >= 0) & (idx.obj_cat_id[np.maximum(mem_lab, 0)] == scan.want[lab])
        sem = float(agree.mean())
    semw = 1.0 if np.isnan(sem) else 0.75 + 0.25 * sem
    score = (soft - f_st) * semw  # soft inliers: of two poses that both explain the view, the better aligned wins
    return float(score), f_in, f_st, sem


def _polish(
    scan: _Scan, idx: MapIndex, cfg: LocalizeConfig, x: float, y: float, yaw: float, score: float
) -> tuple[float, float, float]:
    """Pattern search on the verification score: steps of 16, 8, 4, 2 cm and 2, 1, 0.5, 0.25 degrees."""
    for dxy, dyaw in ((0.16, 2.0), (0.08, 1.0), (0.04, 0.5), (0.02, 0.25)):
        for _ in range(6):
            best = None
            for mx, my, myaw in ((dxy, 0, 0), (-dxy, 0, 0), (0, dxy, 0), (0, -dxy, 0), (0, 0, dyaw), (0, 0, -dyaw)):
                cand = (x + mx, y + my, yaw + np.radians(myaw))
                sc = _verify(scan, idx, cfg, *cand)[0]
                if sc > score + 1e-4 and (best is None or sc > best[0]):
                    best = (sc, cand)
            if best is None:
                break
            score, (x, y, yaw) = best
    return x, y, _wrap(yaw)


def _pose(idx: MapIndex, x: float, y: float, yaw: float) -> np.ndarray:
    """T_world_cam of a level-frame camera placed at (x, y) with heading ``yaw`` (of the level frame)."""
    T_world_level = make_T(rot_z(yaw), [x, y, 0.0])
    T_level_cam = make_T(idx.R_tilt, [0.0, 0.0, idx.height])
    return T_world_level @ T_level_cam


def localize(mem, frame: CameraFrame, cfg: LocalizeConfig | None = None) -> Localization:
    """Estimate ``T_world_cam`` (memory frame) of ``frame``, ignoring the frame's own pose (module doc)."""
    if not isinstance(frame, CameraFrame):
        raise TypeError(f"localize needs a CameraFrame, got {type(frame).__name__}")
    cfg = cfg or LocalizeConfig()
    t0 = time.perf_counter()
    idx = map_index(mem, cfg)
    fallback = idx.T_last if idx.T_last is not None else np.eye(4)

    def failed(reason: str, n_points: int = 0, n_obj: int = 0) -> Localization:
        return Localization(
            fallback.copy(),
            0.0,
            0.0,
            0.0,
            0.0,
            np.nan,
            0.0,
            "failed",
            False,
            n_obj,
            n_points,
            reason,
            time.perf_counter() - t0,
        )

    if idx.empty:
        return failed("the memory has (almost) no mapped surfaces")
    scan = _scan(frame, idx, cfg)
    if len(scan.pts) < 20:
        return failed(f"the view has too few valid depth points above the floor ({len(scan.pts)})", len(scan.pts))
    _semantic_targets(scan, idx)
    obj_h, n_obj = _object_hypotheses(scan, idx)
    geo_h = _geometric_hypotheses(scan, idx, cfg)
    hyps = [(x, y, yw, "objects") for x, y, yw in obj_h] + [(x, y, yw, "geometry") for x, y, yw, _ in geo_h]
    if not hyps:
        return failed("no pose hypothesis: nothing in the mapped free space matches the view", len(scan.pts), n_obj)
    # ICP on the object hypotheses and the best geometric ones (by correlation), ranked by the score without
    # the near-surface samples (an unpolished pose a few centimetres off is not penalised yet) ...
    refined = []
    for x, y, yw, src in hyps[: len(obj_h) + cfg.refine]:
        rx, ry, ryaw = _icp(scan, idx, cfg, x, y, yw)
        refined.append((_verify(scan, idx, cfg, rx, ry, ryaw, near=False)[0], rx, ry, ryaw, src))
    refined.sort(key=lambda r: -r[0])
    # ... then the distinct leaders are polished by a pattern search on the full score: ICP does not see what
    # pins a view that slides along a wall (a sliver of an object, the free space in front of a surface)
    leaders, rest = [], []
    for r in refined:
        distinct = all(
            np.hypot(r[1] - p[1], r[2] - p[2]) > 0.3 or abs(_wrap(r[3] - p[3])) > np.radians(10) for p in leaders
        )
        x, y, yw = r[1:4]
        if distinct and len(leaders) < cfg.polish:
            x, y, yw = _polish(scan, idx, cfg, x, y, yw, _verify(scan, idx, cfg, x, y, yw)[0])
        score, f_in, f_st, sem = _verify(scan, idx, cfg, x, y, yw)
        (leaders if distinct and len(leaders) < cfg.polish else rest).append((score, x, y, yw, r[4], f_in, f_st, sem))
    refined = leaders + rest
    refined.sort(key=lambda r: -r[0])
    best = refined[0]
    # another pose is one that would be wrong if it were the answer (GST's tolerance: ~0.2 m, 5 degrees)
    same = [
        r
        for r in refined
        if np.hypot(r[1] - best[1], r[2] - best[2]) <= cfg.distinct_m
        and abs(_wrap(r[3] - best[3])) <= np.radians(cfg.distinct_deg)
    ]
    other = [r for r in refined if r not in same]
    sources = {r[4] for r in same}
    method = "objects+geometry" if len(sources) == 2 else best[4]
    runner = other[0][0] if other else 0.0
    margin = best[0] - max(runner, 0.0)
    # calibrated on house apartments and synthetic scenes (420 views): a pose of score >= 0.85 whose runner-up
    # is `need` behind is right >= 99 % of the time; views without a matched object are more often ambiguous
    need = cfg.margin_objects if n_obj else cfg.margin_geometry
    conf = float(np.clip((best[0] - 0.5) / 0.35, 0.0, 1.0) * np.clip(margin / (2 * need), 0.0, 1.0))
    T = _pose(idx, best[1], best[2], best[3])
    alts = tuple((_pose(idx, r[1], r[2], r[3]), float(r[0])) for r in other[:3])
    ok = conf >= cfg.min_confidence
    reason = (
        ""
        if ok
        else (
            "ambiguous: another pose explains the view about as well"
            if margin < need and best[0] >= 0.7
            else "low confidence: the view matches the map poorly"
        )
    )
    return Localization(
        T,
        conf,
        float(best[0]),
        float(best[5]),
        float(best[6]),
        float(best[7]),
        float(margin),
        method,
        ok,
        n_obj,
        len(scan.pts),
        reason,
        time.perf_counter() - t0,
        alts,
    )
