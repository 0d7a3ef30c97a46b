"""Registration of the memory to a given top-down image (docs/ARCHITECTURE.md §3-§4): which pixel of someone
else's map is a point of the memory's (odometry) frame?

The image is a 640x512 north-up map of the scene drawn on the *simulator's world* frame (GST's easy,
medium or hard level); the memory lives in the robot's odometry frame. Between the two lies an
unknown rotation about z, a translation, and the image's unknown scale and offset, together a 2D
similarity from odometry xy to pixels (u right, v down):

    u = s (cos th x - sin th y) + tu,      v = -s (sin th x + cos th y) + tv

(th: rotation of the odometry frame in the image's north-up frame, counter-clockwise; s: pixels per
metre; the minus sign is the image's downward v).

1. **Features** (:mod:`.register_features`). The image: the boundary pixels of its dark structure
   (medium, hard: walls, and object footprints on medium; overlays in colour are ignored) or of its
   colour regions (easy: colour edges). The memory: the same kind of map of its own, drawn by
   :meth:`SpatialMemory.layers` on a north-up frame of the odometry frame (walls = seen wall surfaces,
   object box outlines; easy: the colour edges of the top-surface image, and the colours seen at every
   observed place), as metric points.
2. **Rotation candidates.** Histograms of edge orientations (mod 180 degrees, weighted by gradient
   strength) of both, circularly cross-correlated: each peak is a rotation modulo 180 degrees; both
   senses are tried (and a full sweep when the histograms are flat).
3. **Scale** from the extents: the image shows the whole apartment, so for a rotation the ratio of
   the image's structure bounding box to the memory's rotated bounding box gives the scale; a band
   of +-10 % around it is searched. When that finds no confident fit (a memory of part of the scene),
   an open range is searched too: every scale from 30 % of the largest at which the memory still fits
   inside the image's structure up to it (``wide_levels``).
4. **Translation** by FFT cross-correlation of the blurred features at a quarter of the resolution,
   for every (rotation, scale); the best few (rotation, scale, translation) go on.
5. **Refinement.** Iterative closest points with a 4-DoF similarity (Umeyama) from the memory's
   feature points to the nearest image edge pixels (a distance transform with indices), with a
   shrinking gate.
6. **Score.** Forward inliers (memory points within ~2 px of an image edge) times coverage (image edge
   pixels within ~3 px of a memory point), square-rooted; the confidence tempers it by the margin over
   the best different solution (a symmetric apartment gives two nearly equal solutions: low
   confidence). On a map drawn in the scene's colours (easy) the score is also multiplied by the share
   of the memory's observed places whose colour agrees with the image's there, in chromaticity (brightness
   set aside: the render is lit from above): a fit at a wrong scale or place lines up some colour edges
   but puts the memory's floors on floors of other colours. An image of another scene scores low;
   comparing scores across candidate images is how an agent answers "which map is this scene".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy import fft as sfft
from scipy import ndimage

from ._register_kernels import near_sq_distance, refine_similarity
from .geometry import camera_yaw, wrap_angle, wrap_deg
from .maps import MapConfig
from .register_config import RegisterConfig
from .register_features import chromaticity, image_features, memory_side, orientation_histogram
from .topdown import LEVELS, TopDownFrame


@dataclass(frozen=True, eq=False)
class TopDownRegistration:
    """A similarity from the memory's (odometry) xy to the pixels of a given top-down image.

    scale: pixels per metre. theta: radians, rotation of the memory frame in the image's north-up
    frame (counter-clockwise). t: (tu, tv) pixel translation. width/height: the image's size.
    score: sqrt(forward inliers x coverage) of the final fit, in [0, 1]. confidence: score tempered
    by the margin over the best different solution. inliers: fraction of the memory's map points
    within ~2 px of the image's structure; coverage: fraction of the image's structure within ~3 px
    of the memory's. colour (maps drawn in the scene's colours; NaN otherwise): share of the memory's
    observed places that have the image's chromaticity there; the score is multiplied by it and the
    confidence gated by it. extent_overlap: intersection over union of the box of the memory's observed
    places, where the fit puts them, and the box of the image's drawing: near 1 when a memory of the
    whole scene is registered right, small for a memory of part of it, or for a fit that squeezes the
    memory into a corner of an image of another scene. ok: ``confidence >= min_confidence``.
    """

    scale: float
    theta: float
    t: np.ndarray
    width: int
    height: int
    level: str
    score: float
    confidence: float
    inliers: float
    coverage: float
    margin: float
    ok: bool = False
    seconds: float = 0.0
    reason: str = ""
    alternatives: tuple = field(default=(), repr=False)  # (scale, theta, t, score) of runners-up
    colour: float = float("nan")  # share of the memory's observed places whose colour agrees (levels in colour)
    extent_overlap: float = 0.0  # IoU of the memory's observed box, as the fit puts it, and the image's drawing

    @property
    def metres_per_pixel(self) -> float:
        return 1.0 / self.scale

    @property
    def matrix(self) -> np.ndarray:
        """2x3 affine map of odometry xy (homogeneous) to pixels (u, v)."""
        return _matrix(self.scale, self.theta, self.t)

    # points ----------------------------------------------------------------------------------
    def odom_to_pixel(self, xy: np.ndarray) -> np.ndarray:
        """Nx2 (or 2,) memory-frame xy -> continuous pixel (u, v) of the image."""
        xy = np.asarray(xy, dtype=np.float64)
        A = self.matrix
        return xy @ A[:, :2].T + A[:, 2]

    def pixel_to_odom(self, uv: np.ndarray) -> np.ndarray:
        uv = np.asarray(uv, dtype=np.float64)
        A = self.matrix
        return (uv - A[:, 2]) @ np.linalg.inv(A[:, :2]).T

    def odom_to_grid(self, xy: np.ndarray) -> np.ndarray:
        """Memory-frame xy -> GST point on the [0, 999] grid of the image (x right, y down)."""
        return self.frame.pixel_to_grid(self.odom_to_pixel(xy))

    def grid_to_odom(self, g: np.ndarray) -> np.ndarray:
        return self.pixel_to_odom(self.frame.grid_to_pixel(g))

    # headings --------------------------------------------------------------------------------
    def yaw_to_heading(self, yaw_rad: float) -> float:
        """Memory-frame yaw (radians from +x, CCW) -> map heading in degrees (0 = image up, left
        positive, (-180, 180])."""
        return wrap_deg(np.degrees(yaw_rad + self.theta) - 90.0)

    def heading_to_yaw(self, heading_deg: float) -> float:
        return float(np.radians(wrap_deg(heading_deg + 90.0)) - self.theta)

    def pose_to_map(self, T_world_cam: np.ndarray) -> tuple[tuple[int, int], float]:
        """(GST point (x, y), map heading in degrees) of a memory-frame camera pose."""
        T = np.asarray(T_world_cam, dtype=np.float64)
        g = self.odom_to_grid(T[:2, 3])
        return (int(g[0]), int(g[1])), float(self.yaw_to_heading(camera_yaw(T)))

    # frames ----------------------------------------------------------------------------------
    @property
    def T_map_odom(self) -> np.ndarray:
        """4x4 rotation about z taking memory-frame points to the image's north-up metric frame
        (the one :attr:`frame` is drawn on)."""
        c, s = np.cos(self.theta), np.sin(self.theta)
        T = np.eye(4)
        T[:2, :2] = [[c, -s], [s, c]]
        return T

    @property
    def frame(self) -> TopDownFrame:
        """The image's :class:`TopDownFrame` in the north-up metric frame ``T_map_odom @ p_odom``:
        ``frame.world_to_pixel(T_map_odom[:2, :2] @ xy) == odom_to_pixel(xy)``. Draw on the image with
        spatial_memory.draw after rotating memory-frame points by :attr:`T_map_odom`."""
        mpp = 1.0 / self.scale
        x0, y1 = -self.t[0] * mpp, self.t[1] * mpp
        return TopDownFrame(x0, y1 - self.height * mpp, x0 + self.width * mpp, y1, self.width, self.height)


def _matrix(s: float, th: float, t: np.ndarray) -> np.ndarray:
    c, sn = np.cos(th), np.sin(th)
    return np.array([[s * c, -s * sn, t[0]], [-s * sn, -s * c, t[1]]])


# ================================================================================ search
def _rotation_candidates(hi: np.ndarray, hm: np.ndarray, cfg: RegisterConfig) -> list[float]:
    """Rotations (radians) memory -> image worth trying, from the image's and the memory's
    orientation histograms (:func:`_orientation_histogram`)."""
    if hi.sum() <= 0 or hm.sum() <= 0:
        return list(np.radians(np.arange(0.0, 360.0, cfg.sweep_step_deg)))
    corr = np.real(np.fft.ifft(np.fft.fft(hi) * np.conj(np.fft.fft(hm))))  # corr[d] = sum_a hi[a + d] hm[a]
    peaks = [d for d in range(180) if corr[d] >= corr[d - 1] and corr[d] >= corr[(d + 1) % 180]]
    peaks.sort(key=lambda d: -corr[d])
    top = corr[peaks[0]] if peaks else 0.0
    flat = top <= 0 or top < 1.3 * np.mean(corr)
    if flat:
        return list(np.radians(np.arange(0.0, 360.0, cfg.sweep_step_deg)))
    out = []
    for d in peaks[: cfg.rotation_peaks]:
        if corr[d] < 0.3 * top:
            break
        # sub-degree peak by a parabola through the neighbours
        a, b, c = corr[d - 1], corr[d], corr[(d + 1) % 180]
        off = 0.5 * (a - c) / (a - 2 * b + c) if (a - 2 * b + c) != 0 else 0.0
        for base in (0.0, 180.0):
            out.append(np.radians(d + off + base))
    return out


def _rotated_extent(pts: np.ndarray, th: float) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.cos(th), np.sin(th)
    q = np.stack(
        [c * pts[:, 0] - s * pts[:, 1], -(s * pts[:, 0] + c * pts[:, 1])], axis=1
    )  # pixel axes (v down), unit scale
    return q.min(axis=0), q.max(axis=0)


def _mask_extent(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    r, c = np.nonzero(mask)
    if len(r) == 0:
        return None
    return np.array([c.min(), r.min()], dtype=np.float64), np.array([c.max() + 1, r.max() + 1], dtype=np.float64)


@dataclass
class _Target:
    edges: np.ndarray
    structure: np.ndarray
    dt: np.ndarray  # distance (px) to the nearest edge pixel
    near: np.ndarray  # 2xHxW row/col of that pixel
    coarse_fft: np.ndarray
    coarse_shape: tuple[int, int]
    fft_shape: tuple[int, int]
    extent: tuple[np.ndarray, np.ndarray]
    chance: float  # the forward inlier score of points thrown at random on the image's structure
    chroma: np.ndarray | None = None  # HxWx3 chromaticity of the image's structure (levels in colour), NaN elsewhere


def _target(image: np.ndarray, level: str, cfg: RegisterConfig) -> _Target | None:
    edges, structure = image_features(image, level, cfg)
    if edges.sum() < 20:
        return None
    dt, near = ndimage.distance_transform_edt(~edges, return_indices=True)
    f = cfg.coarse
    H, W = edges.shape
    ch, cw = (H + f - 1) // f, (W + f - 1) // f
    pad = np.zeros((ch * f, cw * f), dtype=np.float32)
    pad[:H, :W] = edges
    coarse = pad.reshape(ch, f, cw, f).sum(axis=(1, 3))
    coarse = ndimage.gaussian_filter(coarse, 1.0)
    coarse /= max(coarse.max(), 1e-9)
    fs = (sfft.next_fast_len(2 * ch, real=True), sfft.next_fast_len(2 * cw, real=True))
    ext = _mask_extent(structure)
    inside = ndimage.binary_fill_holes(structure) if level != "easy" else structure
    chance = float(np.clip(1.0 - (dt[inside] / 3.0) ** 2, 0.0, 1.0).mean()) if inside.any() else 0.0
    chroma = None
    if level in cfg.colour_levels:
        chroma = chromaticity(image)
        chroma[~structure] = np.nan
    return _Target(edges, structure, dt, near, sfft.rfft2(coarse, s=fs), (ch, cw), fs, ext, min(chance, 0.9), chroma)


def _coarse_search(
    tg: _Target, pts: np.ndarray, thetas: list[float], cfg: RegisterConfig, wide: bool = False
) -> list[tuple[float, float, float, np.ndarray]]:
    """(score, scale, theta, t) of the best translation for every (rotation, scale) tried.

    Scales: a band of +-``scale_band`` around the one that makes the memory's extent the image's
    (a memory of the whole scene), or (``wide``) from ``wide_scale`` of the largest scale at which
    the memory still fits inside the image's structure up to that (a memory of part of the scene)."""
    f = cfg.coarse
    ch, cw = tg.coarse_shape
    fs = tg.fft_shape
    lo_t, hi_t = tg.extent
    size_t = np.maximum(hi_t - lo_t, 1.0)
    out = []
    n = len(pts)
    for th in thetas:
        lo_m, hi_m = _rotated_extent(pts, th)
        size_m = np.maximum(hi_m - lo_m, 1e-6)
        c, sn = np.cos(th), np.sin(th)
        base = np.stack([c * pts[:, 0] - sn * pts[:, 1], -(sn * pts[:, 0] + c * pts[:, 1])], axis=1)
        # the corner of base * s is base's corner * s, bit for bit: rounding x * s (s > 0) keeps the order
        base_lo = base.min(axis=0)
        if wide:
            s_hi = float(np.min(size_t / size_m)) * (1.0 + cfg.scale_band)
            scales = s_hi * np.exp(np.arange(np.log(cfg.wide_scale), 1e-9, np.log1p(cfg.scale_step)))
        else:
            s0 = float(np.sqrt(np.prod(size_t / size_m)))
            scales = s0 * (1.0 + np.arange(-cfg.scale_band, cfg.scale_band + 1e-9, cfg.scale_step))
        for s in scales:
            lo = base_lo * s
            q = base * s
            q -= lo  # memory map's corner at (0, 0): the translation found is relative to it
            cc = np.floor(q / f).astype(np.int64)
            if cc[:, 0].max() >= fs[1] - cw or cc[:, 1].max() >= fs[0] - ch:
                continue
            img = np.bincount(cc[:, 1] * fs[1] + cc[:, 0], minlength=fs[0] * fs[1]).astype(np.float32).reshape(fs)
            corr = sfft.irfft2(np.conj(sfft.rfft2(img)) * tg.coarse_fft, s=fs)  # corr[k] = sum img[q] T[q + k]
            corr = corr[:ch, :cw]
            k = int(np.argmax(corr))
            r, col = divmod(k, cw)
            t = np.array([col * f, r * f], dtype=np.float64) - lo  # memory corner -> pixel
            out.append((float(corr.flat[k]) / n, s, th, t))
    out.sort(key=lambda o: -o[0])
    return out


def _refine(
    tg: _Target, pts: np.ndarray, s: float, th: float, t: np.ndarray, cfg: RegisterConfig
) -> tuple[float, float, np.ndarray]:
    """ICP of the memory's points to the image's edges, 4-DoF similarity (compiled:
    :func:`._register_kernels.refine_similarity`), with gates shrinking from 12 to 3 pixels."""
    gates = np.geomspace(12.0, 3.0, cfg.icp_iterations)
    s, th, tx, ty = refine_similarity(
        np.ascontiguousarray(pts, dtype=np.float64),
        tg.dt,
        tg.near[0],
        tg.near[1],
        float(s),
        float(th),
        float(t[0]),
        float(t[1]),
        gates,
    )
    return s, th, np.array([tx, ty])


def _score(
    tg: _Target,
    pts: np.ndarray,
    seen_pts: np.ndarray,
    s: float,
    th: float,
    t: np.ndarray,
    cfg: RegisterConfig,
    seen_chroma: np.ndarray | None = None,
) -> tuple[float, float, float, float]:
    """(score, forward inliers, coverage) of a solution. Coverage counts only the image's edges inside
    the area the memory observed (projected), so a memory of part of the scene is not penalised for
    the rest, while a wrong fit is, for the structure it should have seen there."""
    H, W = tg.edges.shape
    A = _matrix(s, th, t)

    def project(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        uv = p @ A[:, :2].T + A[:, 2]
        ui, vi = np.floor(uv[:, 0]).astype(np.int64), np.floor(uv[:, 1]).astype(np.int64)
        return ui, vi, (ui >= 0) & (ui < W) & (vi >= 0) & (vi < H)

    ui, vi, inside = project(pts)
    d = np.full(len(pts), np.inf)
    d[inside] = tg.dt[vi[inside], ui[inside]]
    fwd = float(np.mean(np.clip(1.0 - (d / 3.0) ** 2, 0.0, 1.0))) if len(d) else 0.0
    fwd = (fwd - tg.chance) / (1.0 - tg.chance)  # above what points thrown on the image's structure would score
    if not inside.any():
        return 0.0, fwd, 0.0, np.nan
    su, sv, sin_ = project(seen_pts)
    grow = int(np.ceil(s * cfg.memory_mpp)) + 2
    # everything below happens inside the box of the projected points, grown by the dilation: the
    # dilation cannot reach past it and every pixel read lies in it, so the crop gives the values the
    # whole image would (the distances are to projected pixels, all inside) at a fraction of the cost
    rows = np.concatenate([vi[inside], sv[sin_]])
    cols = np.concatenate([ui[inside], su[sin_]])
    r0, r1 = max(int(rows.min()) - grow - 1, 0), min(int(rows.max()) + grow + 2, H)
    c0, c1 = max(int(cols.min()) - grow - 1, 0), min(int(cols.max()) + grow + 2, W)
    proj = np.zeros((r1 - r0, c1 - c0), dtype=bool)
    proj[vi[inside] - r0, ui[inside] - c0] = True
    area = np.zeros_like(proj)
    area[sv[sin_] - r0, su[sin_] - c0] = True
    area = _grown(area, grow) | proj
    wanted = tg.edges[r0:r1, c0:c1] & area
    if wanted.sum() < 10:
        return 0.0, fwd, 0.0, np.nan
    # the distance to the nearest projected pixel matters below 4 px only (the weight vanishes there)
    dm = np.sqrt(near_sq_distance(proj, 4).astype(np.float64))
    near = np.clip(1.0 - (dm / 4.0) ** 2, 0.0, 1.0)
    chance = float(near[area].mean())
    cov = (float(near[wanted].mean()) - chance) / max(1.0 - chance, 1e-6)
    score = float(np.sqrt(max(fwd, 0.0) * max(cov, 0.0)))
    colour = _colour_agreement(tg, seen_pts, seen_chroma, A, cfg)
    if np.isfinite(colour):
        score *= colour
    return score, float(fwd), float(cov), colour


def _colour_agreement(
    tg: _Target, seen_pts: np.ndarray, seen_chroma: np.ndarray | None, A: np.ndarray, cfg: RegisterConfig
) -> float:
    """Share of the memory's observed places (``seen_pts``, memory metres) whose colour agrees with the
    image's where the similarity ``A`` (2x3, to pixels) puts them: off the image, on its background or of
    another chromaticity, a place disagrees. NaN when either side has no colours."""
    if tg.chroma is None or seen_chroma is None or not len(seen_chroma):
        return float("nan")
    H, W = tg.edges.shape
    uv = np.floor(seen_pts @ A[:, :2].T + A[:, 2]).astype(np.int64)
    inside = (uv[:, 0] >= 0) & (uv[:, 0] < W) & (uv[:, 1] >= 0) & (uv[:, 1] < H)
    d = np.abs(tg.chroma[uv[inside, 1], uv[inside, 0]] - seen_chroma[inside]).sum(axis=1)
    return float(np.count_nonzero(d <= cfg.colour_tolerance) / len(seen_pts))  # NaN (background) compares False


def _grown(mask: np.ndarray, r: int) -> np.ndarray:
    """``mask`` dilated ``r`` times by the 4-neighbour cross (``ndimage.binary_dilation(mask,
    iterations=r)``): the pixels within city-block distance ``r`` of it, which one distance transform
    finds in two passes instead of ``r``."""
    if not mask.any():
        return mask.copy()
    return ndimage.distance_transform_cdt(~mask, metric="taxicab") <= r


def register_topdown(
    mem, image: np.ndarray, level: str, cfg: RegisterConfig | None = None, map_config: MapConfig | None = None
) -> TopDownRegistration:
    """Register the memory's map to a given top-down ``image`` of ``level`` (module doc)."""
    cfg = cfg or RegisterConfig()
    t0 = time.perf_counter()
    if level not in LEVELS:
        raise ValueError(f"unknown top-down level {level!r}; expected one of {LEVELS}")
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(
            "register_topdown needs an HxWx3 uint8 image, "
            f"got {getattr(image, 'dtype', type(image))} {getattr(image, 'shape', '')}"
        )
    H, W = image.shape[:2]

    def failed(reason: str) -> TopDownRegistration:
        return TopDownRegistration(
            1.0, 0.0, np.zeros(2), W, H, level, 0.0, 0.0, 0.0, 0.0, 0.0, False, time.perf_counter() - t0, reason
        )

    try:
        pts, seen_pts, mem_hist, seen_chroma = memory_side(mem, level, cfg, map_config)
    except LookupError:
        return failed("the memory is empty")
    if len(pts) < 20:
        return failed(f"the memory's {level} map has too little structure ({len(pts)} points)")
    tg = _target(image, level, cfg)
    if tg is None or tg.extent is None:
        return failed(f"the image shows too little {level} structure")
    thetas = _rotation_candidates(orientation_histogram(tg.edges), mem_hist, cfg)
    best = _solve(tg, pts, seen_pts, seen_chroma, _coarse_search(tg, pts, thetas, cfg), W, H, cfg)
    if (
        best is None or best[1] < cfg.min_confidence
    ) and level in cfg.wide_levels:  # perhaps the memory covers only part of the scene
        wide = _solve(tg, pts, seen_pts, seen_chroma, _coarse_search(tg, pts, thetas, cfg, wide=True), W, H, cfg)
        if wide is not None and (best is None or _wins(wide[0], best[0], cfg)):
            best = wide
    if best is None:
        return failed("no scale fits the image")
    (score, s, th, t, fwd, cov, colour), conf, margin, alts = best
    return TopDownRegistration(
        s,
        wrap_angle(float(th)),
        np.asarray(t, dtype=np.float64),
        W,
        H,
        level,
        float(score),
        conf,
        float(fwd),
        float(cov),
        float(margin),
        conf >= cfg.min_confidence,
        time.perf_counter() - t0,
        "" if conf >= cfg.min_confidence else "low confidence",
        alts,
        float(colour),
        _extent_overlap(tg, seen_pts, _matrix(s, th, t)),
    )


def _wins(wide: tuple, best: tuple, cfg: RegisterConfig) -> bool:
    """Whether the open scale search's fit replaces the one at the extents' scale: a higher score and, on a
    map in colour, no worse colour agreement (less ``colour_slack``). A wider search can always line up more
    edges somewhere (a memory squeezed into a busy corner); it may not put more of the memory's colours on
    the wrong colours to do it."""
    if wide[0] <= best[0]:
        return False
    return not (np.isfinite(wide[6]) and np.isfinite(best[6]) and wide[6] < best[6] - cfg.colour_slack)


def _extent_overlap(tg: _Target, seen_pts: np.ndarray, A: np.ndarray) -> float:
    """Intersection over union of two boxes on the image: where the fit ``A`` puts the memory's observed
    places (their 1st to 99th percentiles along u and v: a few stray points do not stretch it) and the
    image's drawing (its structure's bounding box)."""
    uv = seen_pts @ A[:, :2].T + A[:, 2]
    lo, hi = np.percentile(uv, 1, axis=0), np.percentile(uv, 99, axis=0)
    ilo, ihi = tg.extent
    inter = np.prod(np.clip(np.minimum(hi, ihi) - np.maximum(lo, ilo), 0.0, None))
    union = np.prod(np.maximum(hi - lo, 0.0)) + np.prod(ihi - ilo) - inter
    return float(inter / union) if union > 0 else 0.0


def _confidence(inliers: float, coverage: float, margin: float, colour: float, cfg: RegisterConfig) -> float:
    """How far to trust a fit: its edge score (``sqrt(inliers x coverage)``) above ``score_floor``, times its
    margin over the best different fit (in score), times, on a map in colour (``colour`` not NaN), its colour
    agreement above ``colour_floor``. A wrong scene's edges score about 0.25-0.45, the right one's
    0.55-0.85 (0.4-0.6 for a memory of a third of it); a right fit agrees in colour on 0.85-0.98 of the
    memory's places, a wrong one on 0.1-0.5 (val apartments, partial memories)."""
    edges = np.sqrt(max(inliers, 0.0) * max(coverage, 0.0))
    conf = float(np.clip((edges - cfg.score_floor) / 0.3, 0, 1) * np.clip(margin / 0.1, 0, 1))
    if np.isfinite(colour):
        conf *= float(np.clip((colour - cfg.colour_floor) / cfg.colour_span, 0, 1))
    return conf


def _solve(
    tg: _Target,
    pts: np.ndarray,
    seen_pts: np.ndarray,
    seen_chroma: np.ndarray | None,
    coarse: list,
    W: int,
    H: int,
    cfg: RegisterConfig,
):
    """Refine the best distinct coarse solutions; (best result, confidence, margin, alternatives)."""
    if not coarse:
        return None
    if seen_chroma is not None and tg.chroma is not None:
        # rank the coarse solutions by their colours too: a memory shrunk to a small scale packs its edges onto
        # the image's busiest corner (a high edge correlation) and its floors onto floors of other colours
        sub = np.arange(0, len(seen_pts), max(1, len(seen_pts) // cfg.colour_samples))
        sp, sc_ = seen_pts[sub], seen_chroma[sub]
        coarse = sorted(
            ((sc * _colour_agreement(tg, sp, sc_, _matrix(s, th, t), cfg), s, th, t) for sc, s, th, t in coarse),
            key=lambda o: -o[0],
        )
    # keep distinct coarse solutions
    picked = []
    for sc, s, th, t in coarse:
        if all(
            abs(wrap_deg(np.degrees(th - p[2]))) > 3 or np.hypot(*(t - p[3])) > 15 or abs(np.log(s / p[1])) > 0.05
            for p in picked
        ):
            picked.append((sc, s, th, t))
        if len(picked) >= cfg.candidates:
            break
    results = []
    for _, s, th, t in picked:
        s, th, t = _refine(tg, pts, s, th, t, cfg)
        score, fwd, cov, colour = _score(tg, pts, seen_pts, s, th, t, cfg, seen_chroma)
        results.append((score, s, th, t, fwd, cov, colour))
    results.sort(key=lambda r: -r[0])
    # polish the winner: ICP from slightly different scales (about the memory's centre) escapes the local
    # optimum where walls sit one wall-thickness off (thick walls have two edges)
    centre = pts.mean(axis=0)
    score0, s0, th0, t0 = results[0][:4]
    c_px = _matrix(s0, th0, t0) @ np.append(centre, 1.0)
    for rel in cfg.polish_scales:
        s = s0 * (1.0 + rel)
        t = c_px - (_matrix(s, th0, np.zeros(2)) @ np.append(centre, 1.0))
        s, th, t = _refine(tg, pts, s, th0, t, cfg)
        score, fwd, cov, colour = _score(tg, pts, seen_pts, s, th, t, cfg, seen_chroma)
        if score > results[0][0]:
            results[0] = (score, s, th, t, fwd, cov, colour)
    best = results[0]

    def differs(r) -> bool:  # another solution: the memory's centre lands elsewhere or the rotation differs
        p0 = _matrix(best[1], best[2], best[3]) @ np.append(centre, 1.0)
        p1 = _matrix(r[1], r[2], r[3]) @ np.append(centre, 1.0)
        return np.hypot(*(p0 - p1)) > 0.05 * max(W, H) or abs(wrap_deg(np.degrees(r[2] - best[2]))) > 8

    others = [r for r in results[1:] if differs(r)]
    runner = others[0][0] if others else 0.0
    margin = best[0] - runner
    conf = _confidence(best[4], best[5], margin, best[6], cfg)
    alts = tuple((r[1], r[2], r[3], r[0]) for r in others[:3])
    return best, conf, margin, alts
