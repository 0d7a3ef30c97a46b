"""Registration of the memory to a given top-down image (docs/ARCHITECTURE.md §3-§4): which pixel of someone
else's map is a point of the memory's (odometry) frame?

The image is a 640x512 north-up map of the scene drawn on the *simulator's world* frame (GST's easy,
medium or hard level); the memory lives in the robot's odometry frame. Between the two lies an
unknown rotation about z, a translation, and the image's unknown scale and offset, together a 2D
similarity from odometry xy to pixels (u right, v down):

    u = s (cos th x - sin th y) + tu,      v = -s (sin th x + cos th y) + tv

(th: rotation of the odometry frame in the image's north-up frame, counter-clockwise; s: pixels per
metre; the minus sign is the image's downward v).

1. **Features.** The image: the boundary pixels of its dark structure (medium, hard: walls, and object
   footprints on medium; overlays in colour are ignored) or of its colour regions (easy: colour
   edges). The memory: the same kind of map of its own, drawn by :meth:`SpatialMemory.layers` on a
   north-up frame of the odometry frame (walls = seen wall surfaces, object box outlines; easy: the
   colour edges of the top-surface image), as metric points.
2. **Rotation candidates.** Histograms of edge orientations (mod 180 degrees, weighted by gradient
   strength) of both, circularly cross-correlated: each peak is a rotation modulo 180 degrees; both
   senses are tried (and a full sweep when the histograms are flat).
3. **Scale** from the extents: the image shows the whole apartment, so for a rotation the ratio of
   the image's structure bounding box to the memory's rotated bounding box gives the scale; a band
   of +-10 % around it is searched.
4. **Translation** by FFT cross-correlation of the blurred features at a quarter of the resolution,
   for every (rotation, scale); the best few (rotation, scale, translation) go on.
5. **Refinement.** Iterative closest points with a 4-DoF similarity (Umeyama) from the memory's
   feature points to the nearest image edge pixels (a distance transform with indices), with a
   shrinking gate.
6. **Score.** Forward inliers (memory points within ~2 px of an image edge) times coverage (image edge
   pixels within ~3 px of a memory point), square-rooted; the confidence tempers it by the margin over
   the best different solution (a symmetric apartment gives two nearly equal solutions: low
   confidence). An image of another scene scores low; comparing scores across candidate images is how
   an agent answers "which map is this scene".
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
from .topdown import LEVELS, TopDownFrame


@dataclass(frozen=True)
class RegisterConfig:
    """Knobs of :func:`register_topdown`."""

    memory_mpp: float = 0.05  # resolution of the memory's own map (metres per pixel)
    dark_threshold: int = 100  # medium/hard: a pixel is structure when all its channels are below this
    coarse: int = 4  # downsampling of the translation search
    scale_band: float = 0.10  # +- relative scale searched around the extent-based estimate
    scale_step: float = 0.02
    wide_scale: float = (
        0.3  # the wide scale search (partial memories) goes down to this fraction of the largest fitting scale
    )
    wide_levels: tuple[str, ...] = (
        "medium",
        "hard",
    )  # easy: colour edges are too dense for an open scale search (spurious fits on other scenes' maps)
    score_floor: float = 0.35  # score at which the confidence starts rising from 0
    rotation_peaks: int = 4  # orientation-histogram peaks tried (each in both senses)
    sweep_step_deg: float = 3.0  # full rotation sweep when the histograms are flat
    candidates: int = 6  # coarse solutions refined
    icp_iterations: int = 30
    polish_scales: tuple[float, ...] = (-0.015, -0.0075, 0.0075, 0.015)  # relative scales tried around the winner
    min_confidence: float = 0.4  # TopDownRegistration.ok threshold


@dataclass(frozen=True, eq=False)
class TopDownRegistration:
    """A similarity from the memory's (odometry) xy to the pixels of a given top-down image.

    scale: pixels per metre. theta: radians, rotation of the memory frame in the image's north-up
    frame (counter-clockwise). t: (tu, tv) pixel translation. width/height: the image's size.
    score: sqrt(forward inliers x coverage) of the final fit, in [0, 1]. confidence: score tempered
    by the margin over the best different solution. inliers: fraction of the memory's map points
    within ~2 px of the image's structure; coverage: fraction of the image's structure within ~3 px
    of the memory's. ok: ``confidence >= min_confidence``.
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


# ================================================================================ features
def _boundary(mask: np.ndarray) -> np.ndarray:
    """Pixels of ``mask`` with a 4-neighbour outside it."""
    if not mask.any():
        return mask.copy()
    return mask & ~ndimage.binary_erosion(mask, border_value=0)


def _colour_edges(rgb: np.ndarray, valid: np.ndarray | None = None, rel: float = 0.15) -> np.ndarray:
    """Pixels where the colour changes (sum of channel Sobel magnitudes above a threshold relative to
    the strong edges), thinned to one side by non-maximum suppression along the gradient."""
    img = ndimage.gaussian_filter(rgb.astype(np.float32), sigma=(0.7, 0.7, 0))
    gx = sum(ndimage.sobel(img[..., c], axis=1) for c in range(3))
    gy = sum(ndimage.sobel(img[..., c], axis=0) for c in range(3))
    mag = np.hypot(gx, gy)
    if valid is not None:
        mag[~valid] = 0.0
    strong = np.percentile(mag[mag > 0], 99) if (mag > 0).any() else 0.0
    if strong <= 0:
        return np.zeros(mag.shape, dtype=bool)
    return mag > rel * strong


def image_features(image: np.ndarray, level: str, cfg: RegisterConfig) -> tuple[np.ndarray, np.ndarray]:
    """(edge mask, structure mask) of a given top-down image (see module doc)."""
    if level == "easy":
        background = np.all(image >= 245, axis=-1)
        edges = _colour_edges(image)
        structure = ~background
    else:
        structure = np.all(image < cfg.dark_threshold, axis=-1)
        edges = _boundary(structure)
    return edges, structure


def memory_features(
    mem, level: str, cfg: RegisterConfig, map_config: MapConfig | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(edge points Nx2, seen points Mx2) of the memory's own map of ``level``, memory-frame metres:
    the edges to match and the map pixels where the memory observed anything (floor included)."""
    frame = _memory_frame(mem, cfg.memory_mpp)
    lay = mem.layers(frame, map_config)
    seen = np.isfinite(lay.top_z)
    if level == "easy":
        # small unseen holes (sparse views) would each draw an edge ring: fill them from the nearest seen pixel
        filled = ndimage.binary_closing(seen, iterations=2, border_value=0) | seen
        _, (nr, nc) = ndimage.distance_transform_edt(~seen, return_indices=True)
        colour = lay.colour[nr, nc]
        colour[~filled] = 255
        edges = _colour_edges(colour, valid=None) & ndimage.binary_dilation(filled)
        seen = filled
    else:
        # walls are seen surfaces (already a boundary); object footprints are filled: keep their outline
        edges = lay.walls | (_boundary(lay.objects) if level == "medium" else False)
    return _pixel_points(frame, edges), _pixel_points(frame, seen)


def _memory_side(
    mem, level: str, cfg: RegisterConfig, map_config: MapConfig | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edge points, seen points, orientation histogram of the edges) of the memory's map of ``level``:
    what registration needs of the memory, whatever the image. Kept by the memory until its contents
    change (:meth:`SpatialMemory.derived`), so the images of one memory (a question's four candidate
    maps, every question of a scene) reuse it."""

    def build() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pts, seen_pts = memory_features(mem, level, cfg, map_config)
        mframe = _memory_frame(mem, cfg.memory_mpp)
        mem_mask = np.zeros((mframe.height, mframe.width), dtype=bool)
        uv = mframe.world_to_pixel(pts).astype(np.int64)
        mem_mask[np.clip(uv[:, 1], 0, mframe.height - 1), np.clip(uv[:, 0], 0, mframe.width - 1)] = True
        return pts, seen_pts, _orientation_histogram(mem_mask)

    return mem.derived(("register", level, cfg, map_config), build)


def _memory_frame(mem, mpp: float) -> TopDownFrame:
    b = mem.default_frame(margin=0.5)
    x0, y0, x1, y1 = b.xmin, b.ymin, b.xmax, b.ymax
    w = int(np.ceil((x1 - x0) / mpp))
    h = int(np.ceil((y1 - y0) / mpp))
    return TopDownFrame(x0, y0, x0 + w * mpp, y0 + h * mpp, w, h)


def _pixel_points(frame: TopDownFrame, mask: np.ndarray) -> np.ndarray:
    r, c = np.nonzero(mask)
    return frame.pixel_to_world(np.stack([c + 0.5, r + 0.5], axis=-1).astype(np.float64)).reshape(-1, 2)


# ================================================================================ search
def _orientation_histogram(mask: np.ndarray, bins: int = 180) -> np.ndarray:
    """Histogram of local line orientations (degrees mod 180, metric frame: y up), from the structure
    tensor integrated over ~4 px (a rasterised line at a small angle is a staircase: raw gradients would
    see its steps, the tensor sees the line), weighted by strength x coherence."""
    f = ndimage.gaussian_filter(mask.astype(np.float32), 1.0)
    gu, gv = ndimage.sobel(f, axis=1), -ndimage.sobel(f, axis=0)  # metric y up
    juu = ndimage.gaussian_filter(gu * gu, 4.0)
    jvv = ndimage.gaussian_filter(gv * gv, 4.0)
    juv = ndimage.gaussian_filter(gu * gv, 4.0)
    tr = juu + jvv
    if tr.max() <= 0:
        return np.zeros(bins)
    diff = np.hypot(juu - jvv, 2 * juv)  # = tr * coherence
    sel = tr > 0.05 * tr.max()
    ang = np.degrees(0.5 * np.arctan2(2 * juv[sel], juu[sel] - jvv[sel])) % 180.0  # dominant gradient direction
    h, _ = np.histogram(ang, bins=bins, range=(0, 180), weights=diff[sel])
    return ndimage.gaussian_filter1d(h.astype(np.float64), 1.0, mode="wrap")


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
    return _Target(edges, structure, dt, near, sfft.rfft2(coarse, s=fs), (ch, cw), fs, ext, min(chance, 0.9))


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
    tg: _Target, pts: np.ndarray, seen_pts: np.ndarray, s: float, th: float, t: np.ndarray, cfg: RegisterConfig
) -> tuple[float, float, float]:
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
        return 0.0, fwd, 0.0
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
        return 0.0, fwd, 0.0
    # the distance to the nearest projected pixel matters below 4 px only (the weight vanishes there)
    dm = np.sqrt(near_sq_distance(proj, 4).astype(np.float64))
    near = np.clip(1.0 - (dm / 4.0) ** 2, 0.0, 1.0)
    chance = float(near[area].mean())
    cov = (float(near[wanted].mean()) - chance) / max(1.0 - chance, 1e-6)
    return float(np.sqrt(max(fwd, 0.0) * max(cov, 0.0))), float(fwd), float(cov)


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
        pts, seen_pts, mem_hist = _memory_side(mem, level, cfg, map_config)
    except LookupError:
        return failed("the memory is empty")
    if len(pts) < 20:
        return failed(f"the memory's {level} map has too little structure ({len(pts)} points)")
    tg = _target(image, level, cfg)
    if tg is None or tg.extent is None:
        return failed(f"the image shows too little {level} structure")
    thetas = _rotation_candidates(_orientation_histogram(tg.edges), mem_hist, cfg)
    best = _solve(tg, pts, seen_pts, _coarse_search(tg, pts, thetas, cfg), W, H, cfg)
    if (
        best is None or best[1] < cfg.min_confidence
    ) and level in cfg.wide_levels:  # perhaps the memory covers only part of the scene
        wide = _solve(tg, pts, seen_pts, _coarse_search(tg, pts, thetas, cfg, wide=True), W, H, cfg)
        if wide is not None and (best is None or wide[0][0] > best[0][0]):
            best = wide
    if best is None:
        return failed("no scale fits the image")
    (score, s, th, t, fwd, cov), conf, margin, alts = best
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
    )


def _solve(tg: _Target, pts: np.ndarray, seen_pts: np.ndarray, coarse: list, W: int, H: int, cfg: RegisterConfig):
    """Refine the best distinct coarse solutions; (best result, confidence, margin, alternatives)."""
    if not coarse:
        return None
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
        score, fwd, cov = _score(tg, pts, seen_pts, s, th, t, cfg)
        results.append((score, s, th, t, fwd, cov))
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
        score, fwd, cov = _score(tg, pts, seen_pts, s, th, t, cfg)
        if score > results[0][0]:
            results[0] = (score, s, th, t, fwd, cov)
    best = results[0]

    def differs(r) -> bool:  # another solution: the memory's centre lands elsewhere or the rotation differs
        p0 = _matrix(best[1], best[2], best[3]) @ np.append(centre, 1.0)
        p1 = _matrix(r[1], r[2], r[3]) @ np.append(centre, 1.0)
        return np.hypot(*(p0 - p1)) > 0.05 * max(W, H) or abs(wrap_deg(np.degrees(r[2] - best[2]))) > 8

    others = [r for r in results[1:] if differs(r)]
    runner = others[0][0] if others else 0.0
    margin = best[0] - runner
    # a wrong scene scores about 0.25-0.45 here, the right one 0.55-0.85 (0.4-0.6 for a memory of a third of it)
    conf = float(np.clip((best[0] - cfg.score_floor) / 0.3, 0, 1) * np.clip(margin / 0.1, 0, 1))
    alts = tuple((r[1], r[2], r[3], r[0]) for r in others[:3])
    return best, conf, margin, alts
