"""Localisation of a view that comes without a pose (docs/ARCHITECTURE.md §3): where, in the memory's frame,
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
   (a) *objects*: centroids of the view's object segments vs. centroids of the memory's objects, by
   category (a view's instance ids are its own, never compared with the memory's; ambiguous
   categories: RANSAC over pairs with consistent distances), 2D rigid fits;
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
   points landing on voxels of their category). The best wins; the
   confidence combines its score with the margin over the best pose that would be a *wrong* answer
   (more than 0.25 m or 6 degrees away): an ambiguous view (a blank wall, two identical rooms) gets a
   low confidence rather than a coin flip presented as certain.

Everything derived from the memory (nearest-neighbour index, band grids, their FFTs: :class:`.scanmatch.MapIndex`)
is built once per memory state and cached on the memory (rebuilt when it integrates more frames).
The view and the correlative search live in :mod:`.scanmatch`; the knobs of both, :class:`LocalizeConfig`,
in :mod:`.localize_config`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .frame import CameraFrame
from .geometry import make_T, rot_z, wrap_angle
from .localize_config import LocalizeConfig
from .pose import CameraPose
from .scanmatch import MapIndex, Scan, geometric_hypotheses, map_index, semantic_targets, view_scan

METHODS = ("objects", "geometry", "objects+geometry", "failed")


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


def _object_hypotheses(scan: Scan, idx: MapIndex, max_hyp: int = 4) -> tuple[list[tuple[float, float, float]], int]:
    """(x, y, yaw) poses from object centroid correspondences, and the number of view objects matched."""
    if not scan.objects or len(idx.obj_category) == 0:
        return [], 0
    # the view's objects in an order of place and category (their ids are the view's own and mean nothing)
    view_ids = sorted(scan.objects, key=lambda i: (scan.objects[i][2], *np.round(scan.objects[i][0][:2], 2)))
    vc = np.array([scan.objects[i][0][:2] for i in view_ids])
    vcat = [scan.objects[i][2] for i in view_ids]
    mc = idx.obj_centroid[:, :2]
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
        if all(np.hypot(x - o[0], y - o[1]) > 0.3 or abs(wrap_angle(yaw - o[2])) > np.radians(10) for o in out):
            out.append((x, y, yaw))
        if len(out) >= max_hyp:
            break
    return out, n_matched


# ================================================================================ refinement + verification
def _icp(scan: Scan, idx: MapIndex, cfg: LocalizeConfig, x: float, y: float, yaw: float) -> tuple[float, float, float]:
    """Point-to-plane ICP in (x, y, yaw) with a shrinking distance gate (point-to-point where the
    normal is unknown or vertical). Points of view objects whose category has one memory object pair
    only with that object's voxels, point-to-point: they pin a view that slides along a wall."""
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
        yaw = wrap_angle(yaw + dth)
        if abs(dth) < 2e-4 and np.hypot(dx, dy) < 2e-3:  # converged at this gate: go to the next one
            k_gate = (k_gate + cfg.icp_iterations - 1) // cfg.icp_iterations * cfg.icp_iterations
    return x, y, yaw


def _verify(
    scan: Scan,
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
            hit[hit] = hits[vi[hit]] >= idx.min_hits
        f_st = float(hit.mean())
    f_near = 0.0
    if near and scan.near is not None and len(scan.near):
        vi = idx.voxels.lookup(scan.near @ R.T + t)
        hit = vi >= 0
        if hit.any():
            hit[hit] = idx.voxels.field("hits")[vi[hit]] >= idx.min_hits
        f_near = float(hit.mean())
        f_st = max(f_st, f_near)
    sem = np.nan
    lab = scan.want >= 0
    if lab.sum() >= 5:  # points of matched objects should land on voxels of their category: nothing counts against
        jj = j[lab]
        hit = jj < len(idx.labels)
        mem_lab = np.full(len(jj), -1, dtype=np.int64)
        mem_lab[hit] = idx.labels[jj[hit]]
        agree = (mem_lab >= 0) & (idx.obj_cat_id[np.maximum(mem_lab, 0)] == scan.want[lab])
        sem = float(agree.mean())
    semw = 1.0 if np.isnan(sem) else 0.75 + 0.25 * sem
    score = (soft - f_st) * semw  # soft inliers: of two poses that both explain the view, the better aligned wins
    return float(score), f_in, f_st, sem


def _polish(
    scan: Scan, idx: MapIndex, cfg: LocalizeConfig, x: float, y: float, yaw: float, score: float
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
    return x, y, wrap_angle(yaw)


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
    scan = view_scan(frame, idx, cfg)
    if len(scan.pts) < 20:
        return failed(f"the view has too few valid depth points above the floor ({len(scan.pts)})", len(scan.pts))
    semantic_targets(scan, idx)
    obj_h, n_obj = _object_hypotheses(scan, idx)
    geo_h = geometric_hypotheses(scan, idx, cfg)
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
            np.hypot(r[1] - p[1], r[2] - p[2]) > 0.3 or abs(wrap_angle(r[3] - p[3])) > np.radians(10) for p in leaders
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
        and abs(wrap_angle(r[3] - best[3])) <= np.radians(cfg.distinct_deg)
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
