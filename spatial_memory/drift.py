"""Drift correction: each frame's depth registered to the map built so far (frame-to-model), so the
memory stays consistent while the odometry drifts.

A ground robot's odometry errs in the floor plane: (x, y, yaw). Before a frame is fused, its
back-projected structure (points between ``z_band``, within ``max_range``; the floor and the ceiling
say nothing about x, y, yaw) is registered to a 2D **normal-distributions map** of everything fused
before: per ``cell`` of the floor plane, the mean and covariance of the points that fell in it (two
grids offset by half a cell, so a surface on a cell border is still one distribution). A wall is a
thin, long distribution; a point is pulled across it, not along it, and depth noise only widens it
(points are weighted by the inverse variance of the sensor's depth noise at their range).

The correction (a rotation about the camera and a translation) minimises the robust (Cauchy)
Mahalanobis distances of the points to their cells' distributions plus a prior that the odometry's
frame-to-frame motion is right within ``odom_sigma_m`` / ``odom_sigma_deg``: a view of a bare wall or
of a new room (few points on mapped cells) leaves the odometry as it is, a view of mapped structure
pulls the pose onto the map. The correction is kept as ``T_map_odom`` (the memory's frame from the
odometry frame) and applied to every later odometry pose before it is registered.

Cost: a few hundred to ~2,000 points, Gauss-Newton in 3 unknowns (numba): well under a millisecond
of the memory's per-frame budget; the map update is one pass over the same points.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from .geometry import make_T, rot_z
from vla_common.strict import from_dict

_STATS = 7  # per cell: weight, sum x, sum y, sum xx, sum xy, sum yy (relative to the cell's corner), points


@dataclass(frozen=True)
class DriftConfig:
    """Knobs of the drift correction (metres, degrees)."""

    cell: float = 0.25  # of the normal-distributions map
    z_band: tuple[float, float] = (0.25, 2.0)  # heights of the points used (above the floor, below lintels)
    max_range: float = 5.0  # depth beyond is not used (noisy, and far points amplify a yaw error)
    stride: int = 4  # use every n-th pixel row and column
    max_points: int = 2000
    min_points: int = 60  # on mapped cells, for a correction to be computed at all
    min_cell_weight: float = 4.0  # points in a cell before it counts
    min_inliers: float = 0.5  # of the matched points within 3 sigma of their cell after the fit, or it is refused
    gate_chi2: float = 25.0  # a correction further than this (squared Mahalanobis, predicted spread) is refused
    iterations: int = 10
    odom_sigma_m: float = 0.01  # the odometry's frame-to-frame error (std) in the floor plane ...
    odom_sigma_deg: float = 0.2  # ... and in heading
    odom_scale_xy: float = 0.01  # ... plus this fraction of the distance travelled
    odom_scale_yaw: float = 0.01  # ... and of the angle turned
    point_inflation: float = (
        10.0  # points are not independent (correlated noise, one surface): their information / this
    )
    min_sigma_m: float = 0.03  # a cell's distribution is at least this wide
    cauchy_m: float = 0.06  # robust kernel scale (Mahalanobis, in metres of a min_sigma-wide cell)
    depth_sigma: tuple[float, float] = (0.0, 0.0)  # the sensor's depth noise sigma(z) = a + b z^2 (weights)
    # re-localisation against the map (a wide search, every n-th frame; 0 = off): see DriftCorrector._relocalise
    reloc_every: int = 0
    reloc_yaw_deg: float = 6.0
    reloc_xy_m: float = 0.3
    reloc_starts: int = 3  # yaw starts on each side of zero
    reloc_gain: float = 0.1  # relative gain in points explained before the pose jumps
    reloc_below: float = 1.0  # ... tried only when the ordinary fit's inliers are below this share of its matches

    def __post_init__(self) -> None:
        if self.reloc_every < 0 or self.reloc_starts < 1 or self.reloc_gain < 0:
            raise ValueError("DriftConfig needs reloc_every >= 0 (0 = off), reloc_starts >= 1 and reloc_gain >= 0")
        if not (self.reloc_yaw_deg > 0 and self.reloc_xy_m > 0 and 0 < self.reloc_below <= 1):
            raise ValueError("DriftConfig needs reloc_yaw_deg > 0, reloc_xy_m > 0 and 0 < reloc_below <= 1")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["z_band"], d["depth_sigma"] = list(self.z_band), list(self.depth_sigma)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DriftConfig":
        d = dict(d)
        for k in ("z_band", "depth_sigma"):
            if k in d:
                d[k] = tuple(d[k])
        return from_dict(cls, d, "drift")


class DriftCorrector:
    """The map the frames are registered to and the current correction (see the module doc)."""

    def __init__(self, cfg: DriftConfig | None = None) -> None:
        self.cfg = cfg or DriftConfig()
        self.T_map_odom = np.eye(4)
        self.origin = np.zeros(2)
        self.stats = np.zeros((2, 0, 0, _STATS), dtype=np.float64)  # grid, row (y), col (x), stat
        self.n_frames = 0
        self.P = np.diag([1e-8, 1e-8, 1e-10])  # covariance of the pose against the map (x, y, yaw about the camera)
        self._last_odom: np.ndarray | None = None
        self.last = {"points": 0, "matched": 0}

    # ------------------------------------------------------------------ per frame
    def correct(self, depth: np.ndarray, K: np.ndarray, T_odom_cam: np.ndarray) -> np.ndarray:
        """The corrected pose (memory frame) of a frame whose odometry pose is ``T_odom_cam``; the map is
        then updated with the frame at that pose."""
        cfg = self.cfg
        self._predict(T_odom_cam)
        T_pred = self.T_map_odom @ T_odom_cam
        p_cam, w = self._points(depth, K)
        T = T_pred
        self.last = {"points": 0, "matched": 0}
        if len(p_cam) and self.stats.shape[1] > 0:
            p_world = p_cam @ T_pred[:3, :3].T + T_pred[:3, 3]
            band = (p_world[:, 2] >= cfg.z_band[0]) & (p_world[:, 2] <= cfg.z_band[1])
            xy, wb = np.ascontiguousarray(p_world[band, :2]), w[band]
            if len(xy) >= cfg.min_points:
                centre = T_pred[:2, 3].copy()
                ok, par = _cell_params(self.stats, self.origin, cfg.cell, cfg.min_cell_weight, cfg.min_sigma_m**2)
                cauchy2 = cfg.cauchy_m**2 / cfg.min_sigma_m**2
                delta, matched, info, inliers = _register(
                    xy, wb, centre, ok, par, self.origin, cfg.cell, cauchy2, cfg.point_inflation,
                    np.linalg.inv(self.P), cfg.iterations, np.zeros(3),
                )  # fmt: skip
                self.last = {"points": len(xy), "matched": int(matched), "inliers": int(inliers)}
                # accept a fit that explains most of what it matched and agrees with the odometry's own spread
                # (Mahalanobis distance of the correction under the predicted covariance)
                gate = float(delta @ np.linalg.solve(self.P, delta))
                accepted = matched >= cfg.min_points and inliers >= cfg.min_inliers * matched and gate <= cfg.gate_chi2
                if not accepted:
                    delta = np.zeros(3)
                poor = not accepted or inliers < cfg.reloc_below * matched
                if cfg.reloc_every and self.n_frames % cfg.reloc_every == 0 and poor:
                    jump = self._relocalise(xy, wb, centre, ok, par, cauchy2, delta)
                    if jump is not None:
                        delta, info, accepted = jump, np.zeros((3, 3)), True
                if accepted:
                    c = T_pred[:2, 3]
                    R = rot_z(delta[2])
                    t = c + delta[:2] - R[:2, :2] @ c  # rotation about the camera, then the shift
                    T = make_T(R, [t[0], t[1], 0.0]) @ T_pred
                    self.P = np.linalg.inv(np.linalg.inv(self.P) + info)
                    self.last.update(dx=float(delta[0]), dy=float(delta[1]), dyaw_deg=float(np.degrees(delta[2])))
        self.T_map_odom = _planar(T @ np.linalg.inv(T_odom_cam))
        T = self.T_map_odom @ T_odom_cam
        if len(p_cam):
            p_world = p_cam @ T[:3, :3].T + T[:3, 3]
            band = (p_world[:, 2] >= cfg.z_band[0]) & (p_world[:, 2] <= cfg.z_band[1])
            r2 = (p_world[band, 0] - T[0, 3]) ** 2 + (p_world[band, 1] - T[1, 3]) ** 2
            # a point is as certain as the pose it was seen from: the pose's spread at its range, against the cell's
            spread = 0.5 * (self.P[0, 0] + self.P[1, 1]) + r2 * self.P[2, 2]
            self._add(np.ascontiguousarray(p_world[band, :2]), w[band] / (1.0 + spread / cfg.min_sigma_m**2))
        self.n_frames += 1
        return T

    def _predict(self, T_odom_cam: np.ndarray) -> None:
        """Grow the pose covariance by the odometry's error over the motion since the last frame."""
        cfg = self.cfg
        if self._last_odom is not None:
            D = np.linalg.inv(self._last_odom) @ T_odom_cam
            fwd = D[:3, 2]  # camera z (forward) of the new frame in the old camera frame
            dist = float(np.hypot(D[0, 3], D[2, 3]))
            turn = abs(float(np.arctan2(fwd[0], fwd[2])))
            sxy = cfg.odom_sigma_m + cfg.odom_scale_xy * dist
            syaw = np.radians(cfg.odom_sigma_deg) + cfg.odom_scale_yaw * turn
            self.P = self.P + np.diag([sxy**2, sxy**2, syaw**2])
        self._last_odom = T_odom_cam.copy()

    def _relocalise(self, xy, w, centre, ok, par, cauchy2, delta) -> np.ndarray | None:
        """A wide search against the map for the frame's pose (re-localisation): the registration run again
        from yaw offsets up to +-``reloc_yaw_deg`` under a weak prior (``reloc_xy_m``, ``reloc_yaw_deg``
        as standard deviations); the best fit by the Cauchy-weighted share of points explained replaces
        ``delta`` (the ordinary correction, zero if it was refused) when it explains ``reloc_gain`` more
        of them and moves the pose by more than the ordinary fit's own noise. None when it does not."""
        cfg = self.cfg
        base = _score(xy, w, centre, ok, par, self.origin, cfg.cell, cauchy2, delta[0], delta[1], delta[2])
        sy = np.radians(cfg.reloc_yaw_deg)
        prior = np.diag([1.0 / cfg.reloc_xy_m**2, 1.0 / cfg.reloc_xy_m**2, 1.0 / sy**2])
        best, best_score = None, base
        n = max(1, int(cfg.reloc_starts))
        for yaw in np.linspace(-sy, sy, 2 * n + 1):
            x, matched, _, _ = _register(
                xy, w, centre, ok, par, self.origin, cfg.cell, cauchy2, cfg.point_inflation, prior,
                cfg.iterations, np.array([0.0, 0.0, yaw]),
            )  # fmt: skip
            if matched < cfg.min_points or abs(x[2]) > sy or np.hypot(x[0], x[1]) > 2 * cfg.reloc_xy_m:
                continue
            sc = _score(xy, w, centre, ok, par, self.origin, cfg.cell, cauchy2, x[0], x[1], x[2])
            if sc > best_score:
                best, best_score = x, sc
        self.last["reloc_gain"] = float(best_score / max(base, 1e-9) - 1.0)
        if best is None or best_score < (1.0 + cfg.reloc_gain) * base:
            return None
        if np.hypot(*(best[:2] - delta[:2])) < 0.02 and abs(best[2] - delta[2]) < np.radians(0.5):
            return None
        self.last["reloc"] = True
        return best

    def _points(self, depth: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Camera-frame points of a strided pixel subset (valid, within range) and their weights."""
        cfg = self.cfg
        s = max(1, int(cfg.stride))
        d = depth[s // 2 :: s, s // 2 :: s].astype(np.float64)
        v, u = np.mgrid[s // 2 : depth.shape[0] : s, s // 2 : depth.shape[1] : s]
        ok = np.isfinite(d) & (d > 0.1) & (d <= cfg.max_range)
        z = d[ok]
        if len(z) > cfg.max_points:
            keep = np.linspace(0, len(z) - 1, cfg.max_points).astype(np.int64)
        else:
            keep = slice(None)
        z, uu, vv = z[keep], u[ok][keep].astype(np.float64), v[ok][keep].astype(np.float64)
        p = np.stack([(uu - K[0, 2]) / K[0, 0] * z, (vv - K[1, 2]) / K[1, 1] * z, z], axis=1)
        a, b = cfg.depth_sigma
        sig = a + b * z**2
        w = 1.0 / (1.0 + (sig / cfg.min_sigma_m) ** 2)  # 1 for exact depth, less for noisy far readings
        return p, w

    def _add(self, xy: np.ndarray, w: np.ndarray) -> None:
        if len(xy) == 0:
            return
        c = self.cfg.cell
        lo, hi = xy.min(axis=0) - c, xy.max(axis=0) + c
        self._cover(lo, hi)
        _accumulate(xy, w, self.stats, self.origin, c)

    def _cover(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Grow the grids (by whole cells, in steps of 32) to hold [lo, hi]."""
        c = self.cfg.cell
        _, H, W, _ = self.stats.shape
        if H == 0:
            self.origin = np.floor(lo / c) * c - 16 * c
            H = W = 0
        x0, y0 = self.origin
        need_lo = np.floor((lo - self.origin) / c).astype(int) - 1
        need_hi = np.ceil((hi - self.origin) / c).astype(int) + 2
        add_lo = np.maximum(0, -need_lo)
        add_lo = ((add_lo + 31) // 32) * 32
        new_w = max(W, int(need_hi[0])) + int(add_lo[0])
        new_h = max(H, int(need_hi[1])) + int(add_lo[1])
        new_w, new_h = ((new_w + 31) // 32) * 32, ((new_h + 31) // 32) * 32
        if (new_w, new_h) == (W, H) and not add_lo.any():
            return
        grown = np.zeros((2, new_h, new_w, _STATS), dtype=np.float64)
        if H and W:
            grown[:, add_lo[1] : add_lo[1] + H, add_lo[0] : add_lo[0] + W] = self.stats
            # the stats are relative to each cell's corner: a shift of the origin by whole cells keeps them valid
        self.stats = grown
        self.origin = np.array([x0 - add_lo[0] * c, y0 - add_lo[1] * c])

    # ------------------------------------------------------------------ state
    def state(self) -> tuple[dict[str, np.ndarray], dict]:
        arrays = {
            "drift_stats": self.stats.copy(),
            "drift_T": self.T_map_odom.copy(),
            "drift_origin": self.origin.copy(),
            "drift_P": self.P.copy(),
            "drift_last_odom": np.eye(4) if self._last_odom is None else self._last_odom.copy(),
        }
        return arrays, {
            "config": self.cfg.to_dict(),
            "n_frames": self.n_frames,
            "has_last": self._last_odom is not None,
        }

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict) -> "DriftCorrector":
        dc = cls(DriftConfig.from_dict(meta["config"]))
        stats, T, origin = (np.asarray(arrays[k]) for k in ("drift_stats", "drift_T", "drift_origin"))
        if (
            stats.ndim != 4
            or stats.shape[0] != 2
            or stats.shape[3] != _STATS
            or T.shape != (4, 4)
            or origin.shape != (2,)
        ):
            raise ValueError("drift correction state malformed")
        dc.stats, dc.T_map_odom, dc.origin = stats.astype(np.float64), T.astype(np.float64), origin.astype(np.float64)
        dc.P = np.asarray(arrays["drift_P"], dtype=np.float64).reshape(3, 3).copy()
        dc._last_odom = np.asarray(arrays["drift_last_odom"], dtype=np.float64).copy() if meta["has_last"] else None
        dc.n_frames = int(meta["n_frames"])
        return dc

    def copy(self) -> "DriftCorrector":
        arrays, meta = self.state()
        return DriftCorrector.from_state(arrays, meta)


def _planar(T: np.ndarray) -> np.ndarray:
    """The rotation about z and floor translation of ``T`` (the correction is planar by construction;
    this removes round-off)."""
    return make_T(rot_z(float(np.arctan2(T[1, 0], T[0, 0]))), [T[0, 3], T[1, 3], 0.0])


# ---------------------------------------------------------------------------------------- kernels
@njit(cache=True)
def _cell_of(x, y, origin, cell, g):
    off = 0.5 * cell * g
    return int(np.floor((y - origin[1] - off) / cell)), int(np.floor((x - origin[0] - off) / cell))


@njit(cache=True)
def _accumulate(xy, w, stats, origin, cell):
    G, H, W, _ = stats.shape
    for i in range(xy.shape[0]):
        for g in range(G):
            r, c = _cell_of(xy[i, 0], xy[i, 1], origin, cell, g)
            if r < 0 or r >= H or c < 0 or c >= W:
                continue
            off = 0.5 * cell * g
            lx = xy[i, 0] - (origin[0] + off + c * cell)
            ly = xy[i, 1] - (origin[1] + off + r * cell)
            wi = w[i]
            stats[g, r, c, 0] += wi
            stats[g, r, c, 1] += wi * lx
            stats[g, r, c, 2] += wi * ly
            stats[g, r, c, 3] += wi * lx * lx
            stats[g, r, c, 4] += wi * lx * ly
            stats[g, r, c, 5] += wi * ly * ly
            stats[g, r, c, 6] += 1.0


@njit(cache=True)
def _cell_params(stats, origin, cell, min_weight, min_var):
    """Per cell of both grids, its distribution as the data term reads it: (usable, mean x, mean y in
    the world, inverse covariance xx, xy, yy). Usable: at least ``min_weight`` points, positive weight
    and a determinant above 1e-12. Computed once per registration, not once per point and step."""
    G, H, W, _ = stats.shape
    ok = np.zeros((G, H, W), dtype=np.bool_)
    par = np.zeros((G, H, W, 5))
    for g in range(G):
        off = 0.5 * cell * g
        for r in range(H):
            for c in range(W):
                n = stats[g, r, c, 0]
                if stats[g, r, c, 6] < min_weight or n <= 0.0:
                    continue
                mx, my = stats[g, r, c, 1] / n, stats[g, r, c, 2] / n
                sxx = stats[g, r, c, 3] / n - mx * mx + min_var
                sxy = stats[g, r, c, 4] / n - mx * my
                syy = stats[g, r, c, 5] / n - my * my + min_var
                det = sxx * syy - sxy * sxy
                if det <= 1e-12:
                    continue
                ok[g, r, c] = True
                par[g, r, c, 0] = origin[0] + off + c * cell + mx
                par[g, r, c, 1] = origin[1] + off + r * cell + my
                par[g, r, c, 2] = syy / det
                par[g, r, c, 3] = -sxy / det
                par[g, r, c, 4] = sxx / det
    return ok, par


@njit(cache=True)
def _normal_equations(xy, w, centre, ok, par, origin, cell, cauchy2, inflation, dx, dy, th):
    """(A, b, robust cost, points matched) of the data term at the correction (dx, dy, th); the
    cells' distributions from :func:`_cell_params`."""
    G, H, W = ok.shape
    A = np.zeros((3, 3))
    b = np.zeros(3)
    cost = 0.0
    ct, st = np.cos(th), np.sin(th)
    matched = 0
    inliers = 0
    for i in range(xy.shape[0]):
        px, py = xy[i, 0] - centre[0], xy[i, 1] - centre[1]
        qx = ct * px - st * py + centre[0] + dx
        qy = st * px + ct * py + centre[1] + dy
        jx, jy = -st * px - ct * py, ct * px - st * py  # d q / d th
        hit = False
        for g in range(G):
            r, c = _cell_of(qx, qy, origin, cell, g)
            if r < 0 or r >= H or c < 0 or c >= W:
                continue
            if not ok[g, r, c]:
                continue
            ixx, ixy, iyy = par[g, r, c, 2], par[g, r, c, 3], par[g, r, c, 4]
            ex = qx - par[g, r, c, 0]
            ey = qy - par[g, r, c, 1]
            m2 = ex * (ixx * ex + ixy * ey) + ey * (ixy * ex + iyy * ey)
            if m2 < 9.0 and not hit:
                inliers += 1
            scale = w[i] / inflation
            cost += scale * cauchy2 * np.log1p(m2 / cauchy2)
            rw = scale / (1.0 + m2 / cauchy2)  # Cauchy weight (IRLS)
            sx_ = ixx * ex + ixy * ey
            sy_ = ixy * ex + iyy * ey
            A[0, 0] += rw * ixx
            A[0, 1] += rw * ixy
            A[1, 1] += rw * iyy
            A[0, 2] += rw * (ixx * jx + ixy * jy)
            A[1, 2] += rw * (ixy * jx + iyy * jy)
            A[2, 2] += rw * (jx * (ixx * jx + ixy * jy) + jy * (ixy * jx + iyy * jy))
            b[0] += rw * sx_
            b[1] += rw * sy_
            b[2] += rw * (jx * sx_ + jy * sy_)
            hit = True
        if hit:
            matched += 1
    A[1, 0], A[2, 0], A[2, 1] = A[0, 1], A[0, 2], A[1, 2]
    return A, b, cost, matched, inliers


@njit(cache=True)
def _score(xy, w, centre, ok, par, origin, cell, cauchy2, dx, dy, th):
    """How much of the frame the map explains at the correction (dx, dy, th): the sum over points of
    their weight times their Cauchy weight at the better of their two cells (1 on a cell's mean, 0 off
    the map), bounded, unlike the robust cost, by the points there are."""
    G, H, W = ok.shape
    ct, st = np.cos(th), np.sin(th)
    total = 0.0
    for i in range(xy.shape[0]):
        px, py = xy[i, 0] - centre[0], xy[i, 1] - centre[1]
        qx = ct * px - st * py + centre[0] + dx
        qy = st * px + ct * py + centre[1] + dy
        best = 0.0
        for g in range(G):
            r, c = _cell_of(qx, qy, origin, cell, g)
            if r < 0 or r >= H or c < 0 or c >= W or not ok[g, r, c]:
                continue
            ex = qx - par[g, r, c, 0]
            ey = qy - par[g, r, c, 1]
            m2 = ex * (par[g, r, c, 2] * ex + par[g, r, c, 3] * ey) + ey * (par[g, r, c, 3] * ex + par[g, r, c, 4] * ey)
            best = max(best, 1.0 / (1.0 + m2 / cauchy2))
        total += w[i] * best
    return total


@njit(cache=True)
def _register(xy, w, centre, ok, par, origin, cell, cauchy2, inflation, prior_info, iterations, x0):
    """Levenberg-Marquardt for (tx, ty, yaw) from ``x0``: rotation of the points about ``centre`` by
    yaw, then the shift, minimising the robust (Cauchy) Mahalanobis distances of the points to their
    cells' distributions (both grids, from :func:`_cell_params`) plus the prior ``prior_info`` (3x3
    information of the correction, centred on no correction). A step is taken only when it lowers the
    cost. Returns (delta, points matched, data information, points within 3 sigma of their cell's
    distribution)."""
    x = x0.copy()
    A, b, cost, matched, inliers = _normal_equations(
        xy, w, centre, ok, par, origin, cell, cauchy2, inflation, x[0], x[1], x[2]
    )
    lam = 1e-3
    for it in range(iterations):
        M = A + prior_info
        g = b + prior_info @ x
        for k in range(3):
            M[k, k] += lam * M[k, k]
        step = np.linalg.solve(M, -g)
        y = x + step
        A2, b2, cost2, m2, in2 = _normal_equations(
            xy, w, centre, ok, par, origin, cell, cauchy2, inflation, y[0], y[1], y[2]
        )
        before = cost + 0.5 * (x @ (prior_info @ x))
        after = cost2 + 0.5 * (y @ (prior_info @ y))
        if after < before:
            x, A, b, cost, matched, inliers = y, A2, b2, cost2, m2, in2
            lam = max(lam * 0.3, 1e-6)
            if abs(step[0]) + abs(step[1]) < 1e-4 and abs(step[2]) < 1e-5:
                break
        else:
            lam *= 10.0
            if lam > 1e4:
                break
    return x, matched, A, inliers
