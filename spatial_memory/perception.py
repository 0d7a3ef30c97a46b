"""Perception profiles: seeded models of a real robot's sensors, applied to simulator frames.

A simulator hands out perfect perception: instance ids that stay the same from frame to frame (and
in any other view of the scene), exact labels, exact depth, exact odometry. A robot has none of
that. A :class:`PerceptionProfile` turns the simulator's frames into what a robot would get:

* **detector** (:class:`DetectorModel`): instance ids are *frame-local* (fresh random numbers in
  every frame, so no id survives from one frame to the next, nor into another view; a frame's label
  table is listed by id, an order that says nothing about the true instances); objects are
  missed (more often when small, and some instances are harder than others for the whole scene);
  false positives appear as blobs on surfaces with a plausible wrong category; a detection's
  category is confused with a similar class (some instances are confused persistently, as real
  detectors do); mask boundaries are eroded, dilated and jittered;
* **depth** (:class:`DepthModel`): noise growing with range, ``sigma(z) = sigma_const +
  sigma_quad * z**2``, part of it spatially correlated (stereo block matching: neighbouring pixels err
  together); dropped pixels; invalid pixels at depth edges (no reading where the surface jumps);
  nothing beyond ``max_range``;
* **odometry** (:class:`OdometryModel`): every frame-to-frame motion is measured with noise in the
  robot's own frame (dead reckoning), so the error accumulates and a heading error bends the path.
* or, in place of the detector model, a **learned detector** (``checkpoint``: :mod:`.detector`): a
  network trained here reads each frame's RGB and (noisy) depth; nothing of the simulator's masks is used.

The named profiles (``gt``, ``realistic``, ``harsh``) live whole in :mod:`.profiles`: each one's sensor
models and the memory and localisation settings for its sensors. Everything is seeded: the same
profile, seed and stream key corrupt the same frames identically, whatever else runs.

The models read the simulator's truth (stable instance ids, exact depth and poses) to corrupt it;
nothing they produce carries that truth forward (a test checks that no id survives across frames).
Category similarity is scene knowledge: the caller passes a :class:`CategoryModel` (``envs`` holds
the tables per env family).

    profile = PROFILES["realistic"]             # spatial_memory.profiles
    stream = profile.stream(("house/val/800001", "stream"), categories)
    noisy = [stream(f) for f in frames]          # one episode: the drift accumulates
    view = profile.view(frame, ("house/val/800001", "view", 3), categories)   # a single view, no odometry
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from scipy import ndimage

from .frame import CameraFrame
from .geometry import camera_yaw, make_T, rot_z, wrap_angle
from vla_common.strict import check_keys, field_names, from_dict

MAX_LOCAL_ID = 32000  # frame-local ids are drawn from [1, MAX_LOCAL_ID) (stored as int16)


@dataclass(frozen=True)
class CategoryModel:
    """What a detector may confuse: ``similar[c]`` = categories a detection of ``c`` may be labelled
    as; ``vocabulary`` = the categories false positives are drawn from (the detector's label set)."""

    similar: dict[str, tuple[str, ...]] = field(default_factory=dict)
    vocabulary: tuple[str, ...] = ()

    @classmethod
    def from_groups(cls, groups: list[tuple[str, ...]], vocabulary: tuple[str, ...] = ()) -> "CategoryModel":
        """Each group is a set of mutually confusable categories."""
        similar: dict[str, set[str]] = {}
        for g in groups:
            for c in g:
                similar.setdefault(c, set()).update(x for x in g if x != c)
        vocab = tuple(sorted(set(vocabulary) | set(similar)))
        return cls({c: tuple(sorted(s)) for c, s in similar.items()}, vocab)


@dataclass(frozen=True)
class DetectorModel:
    """An instance segmenter's errors (probabilities per detection unless said otherwise).

    frame_local_ids: fresh ids in every frame. miss_rate: chance that a clearly visible instance is
    not detected; small_pixels: below this many pixels the detection chance falls linearly to 0.
    hard_fraction / hard_miss: a fraction of instances is hard for the whole scene (missed with
    ``hard_miss`` instead). false_positives: expected false detections per frame (Poisson), blobs of
    ``fp_pixels`` (range) on one surface. confusion: chance that a detection is labelled as a similar
    class; sticky_fraction / sticky_rate: a fraction of instances is confused persistently, each with one
    fixed wrong class at ``sticky_rate``. mask_px: the largest erosion/dilation of a mask boundary;
    mask_jitter: chance that a boundary pixel flips.
    """

    frame_local_ids: bool = True
    miss_rate: float = 0.0
    small_pixels: int = 0
    hard_fraction: float = 0.0
    hard_miss: float = 0.0
    false_positives: float = 0.0
    fp_pixels: tuple[int, int] = (60, 600)
    confusion: float = 0.0
    sticky_fraction: float = 0.0
    sticky_rate: float = 0.0
    mask_px: int = 0
    mask_jitter: float = 0.0


@dataclass(frozen=True)
class DepthModel:
    """Depth errors: ``sigma(z) = sigma_const + sigma_quad * z**2`` metres, a fraction ``correlated``
    of the variance shared by pixels within about ``corr_px``; ``dropout`` of the pixels missing;
    pixels within ``edge_px`` of a jump larger than ``edge_rel * z`` invalid; beyond ``max_range`` invalid."""

    sigma_const: float = 0.0
    sigma_quad: float = 0.0
    correlated: float = 0.0
    corr_px: float = 6.0
    dropout: float = 0.0
    edge_rel: float = 0.0
    edge_px: int = 0
    max_range: float = float("inf")


@dataclass(frozen=True)
class OdometryModel:
    """Dead-reckoning noise per frame-to-frame motion, in the robot's frame: ``sigma_xy_m`` metres
    along and across the motion, ``sigma_yaw_deg`` degrees of heading (standard deviations), plus
    ``scale_xy`` / ``scale_yaw`` of the motion itself (a wheel that slips in proportion to the distance)."""

    sigma_xy_m: float = 0.0
    sigma_yaw_deg: float = 0.0
    scale_xy: float = 0.0
    scale_yaw: float = 0.0


@dataclass(frozen=True)
class PerceptionProfile:
    name: str
    detector: DetectorModel | None = None  # None: the simulator's instance masks, unchanged
    depth: DepthModel | None = None
    odometry: OdometryModel | None = None
    seed: int = 0
    checkpoint: str | None = None  # a learned detector (spatial_memory.detector) in place of the instance masks

    def __post_init__(self) -> None:
        for part, model in (("detector", self.detector), ("depth", self.depth), ("odometry", self.odometry)):
            if model is None:
                continue
            for k, v in asdict(model).items():
                vals = v if isinstance(v, (tuple, list)) else (v,)
                if any(isinstance(x, (int, float)) and not isinstance(x, bool) and x < 0 for x in vals):
                    raise ValueError(f"perception profile {self.name!r}: {part}.{k} must be >= 0, got {v!r}")
        if self.checkpoint is not None and self.detector is not None:
            raise ValueError(
                f"perception profile {self.name!r}: a learned detector (checkpoint) replaces the simulated one; "
                "set detector to None"
            )
        d = self.detector
        if d is not None:
            for k in ("miss_rate", "hard_fraction", "hard_miss", "confusion", "sticky_fraction", "sticky_rate"):
                if getattr(d, k) > 1:
                    raise ValueError(
                        f"perception profile {self.name!r}: detector.{k} is a probability, got {getattr(d, k)}"
                    )
        if self.depth is not None and not (0 <= self.depth.correlated <= 1 and self.depth.dropout < 1):
            raise ValueError(f"perception profile {self.name!r}: depth.correlated in [0, 1] and dropout < 1")

    @property
    def exact(self) -> bool:
        """True for the simulator's own perception (nothing is changed)."""
        return self.detector is None and self.depth is None and self.odometry is None and self.checkpoint is None

    @property
    def frame_local_ids(self) -> bool:
        return self.checkpoint is not None or (self.detector is not None and self.detector.frame_local_ids)

    def with_seed(self, seed: int) -> "PerceptionProfile":
        return replace(self, seed=int(seed))

    def stream(self, key: Any, categories: CategoryModel | None = None, scene: Any = None) -> "PerceptionStream":
        """The sensors of one recording (an episode, a video, a clip): odometry drift accumulates over
        the frames it is called on, in order. ``key`` (strings, ints) names the recording; ``scene``
        (default: the key's first element) the scene: per-instance detector behaviour (hard to detect,
        persistently confused) is a function of the scene, the same in every recording of it."""
        return PerceptionStream(self, key, categories or CategoryModel(), scene)

    def view(
        self, frame: CameraFrame, key: Any, categories: CategoryModel | None = None, scene: Any = None
    ) -> CameraFrame:
        """One view on its own (a current view without a pose): depth and detector errors, no odometry."""
        return self.stream(key, categories, scene).perceive(frame, odometry=False)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PerceptionProfile":
        d = dict(d)
        check_keys(d, field_names(cls), "perception profile")
        parts = {"detector": DetectorModel, "depth": DepthModel, "odometry": OdometryModel}
        for k, typ in parts.items():
            v = d.get(k)
            if isinstance(v, dict):
                v = dict(v)
                if "fp_pixels" in v:
                    v["fp_pixels"] = tuple(int(x) for x in v["fp_pixels"])
                d[k] = from_dict(typ, v, f"perception {k}")
        return cls(**d)


def _key_ints(key: Any) -> list[int]:
    items = key if isinstance(key, (tuple, list)) else (key,)
    return [zlib.crc32(str(x).encode()) if not isinstance(x, (int, np.integer)) else int(x) & 0xFFFFFFFF for x in items]


class PerceptionStream:
    """Applies a profile to consecutive frames of one recording (see :meth:`PerceptionProfile.stream`).

    ``T_drift``: the current odometry error, world-from-odometry-estimate (4x4, a rotation about z and
    a floor translation): the pose a frame reports is ``T_drift @ T_true``."""

    def __init__(self, profile: PerceptionProfile, key: Any, categories: CategoryModel, scene: Any = None) -> None:
        self.profile, self.categories = profile, categories
        self.key = _key_ints(key)
        self.scene_key = self.key[:1] if scene is None else _key_ints(scene)
        self.n = 0
        self.T_drift = np.eye(4)
        self._prev_true: np.ndarray | None = None  # planar (x, y, yaw) of the last frame, true
        self._prev_est: np.ndarray | None = None  # ... as dead reckoning has it
        self._instances: dict[int, tuple[float, str | None]] = {}
        self.learned = None
        if profile.checkpoint is not None:  # the learned detector (torch) is loaded only when a profile uses one
            from .detector import cached_detector

            self.learned = cached_detector(profile.checkpoint)
            self.learned.check(categories=categories.vocabulary or None)

    def __call__(self, frame: CameraFrame) -> CameraFrame:
        return self.perceive(frame)

    def perceive(self, frame: CameraFrame, odometry: bool = True) -> CameraFrame:
        if not isinstance(frame, CameraFrame):
            raise TypeError(f"a perception profile corrupts CameraFrames, got {type(frame).__name__}")
        p = self.profile
        rng = np.random.default_rng([p.seed, *self.key, self.n])
        self.n += 1
        depth, instance, labels, T = frame.depth, frame.instance, frame.labels, frame.T_world_cam
        if p.depth is not None:
            depth = corrupt_depth(frame.depth, p.depth, rng)
        if self.learned is not None:
            instance, labels = self._learned(frame.rgb, depth, rng)
        elif p.detector is not None and frame.instance is not None:
            instance, labels = self._detect(frame, depth, rng)
        if p.odometry is not None and odometry:
            T = self._odometry(frame.T_world_cam, rng)
        if p.exact:
            return frame
        return CameraFrame(
            rgb=frame.rgb, depth=depth, K=frame.K, T_world_cam=T, instance=instance, labels=labels, step=frame.step
        )

    # ------------------------------------------------------------------ odometry
    def _odometry(self, T_true: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        m = self.profile.odometry
        cur = np.array([T_true[0, 3], T_true[1, 3], camera_yaw(T_true)])
        if self._prev_true is None:
            est = cur.copy()
        else:
            prev, pe = self._prev_true, self._prev_est
            c, s = np.cos(prev[2]), np.sin(prev[2])
            d = cur[:2] - prev[:2]
            dx, dy = c * d[0] + s * d[1], -s * d[0] + c * d[1]  # the motion in the previous robot frame
            dth = float(wrap_angle(cur[2] - prev[2]))
            dist = float(np.hypot(dx, dy))
            sxy = m.sigma_xy_m + m.scale_xy * dist
            syaw = np.radians(m.sigma_yaw_deg) + m.scale_yaw * abs(dth)
            dx, dy = dx + rng.normal(0.0, sxy), dy + rng.normal(0.0, sxy)
            dth = dth + rng.normal(0.0, syaw)
            ce, se = np.cos(pe[2]), np.sin(pe[2])
            est = np.array([pe[0] + ce * dx - se * dy, pe[1] + se * dx + ce * dy, pe[2] + dth])
        self._prev_true, self._prev_est = cur, est
        # the drift takes the true planar pose to the estimated one
        T_est = make_T(rot_z(est[2]), [est[0], est[1], 0.0])
        T_cur = make_T(rot_z(cur[2]), [cur[0], cur[1], 0.0])
        self.T_drift = T_est @ np.linalg.inv(T_cur)
        return self.T_drift @ T_true

    # ------------------------------------------------------------------ detector
    def _learned(self, rgb: np.ndarray, depth: np.ndarray, rng: np.random.Generator):
        """The learned detector's instances on the frame as the robot sees it (its noisy depth), under fresh
        frame-local ids."""
        found = self.learned.detect(rgb, depth)
        k = len(found.labels)
        lut = np.zeros(k + 1, dtype=np.int32)
        if k:
            lut[1:] = rng.choice(MAX_LOCAL_ID - 1, size=k, replace=False) + 1
        return lut[found.instance], {int(lut[i]): c for i, c in sorted(found.labels.items(), key=lambda kv: lut[kv[0]])}

    def _instance(self, gid: int, category: str) -> tuple[float, str | None]:
        """(miss probability, the class it is persistently confused with or None) of a true instance,
        fixed for the scene."""
        if gid not in self._instances:
            d = self.profile.detector
            r = np.random.default_rng([self.profile.seed, *self.scene_key, int(gid), 0x51])
            miss = d.hard_miss if r.random() < d.hard_fraction else d.miss_rate
            sticky = None
            sim = self.categories.similar.get(category, ())
            if r.random() < d.sticky_fraction and sim:
                sticky = sim[int(r.integers(len(sim)))]
            self._instances[gid] = (float(miss), sticky)
        return self._instances[gid]

    def _detect(self, frame: CameraFrame, depth: np.ndarray, rng: np.random.Generator):
        d = self.profile.detector
        inst = frame.instance
        H, W = inst.shape
        out = np.zeros((H, W), dtype=np.int32)
        cats: list[str] = []
        flat = inst.ravel()
        counts = np.bincount(np.maximum(flat, 0))
        boxes = ndimage.find_objects(np.maximum(inst, 0))
        claimed = np.zeros((H, W), dtype=bool)
        dets = []
        for gid in np.flatnonzero(counts).tolist():
            if gid <= 0 or gid not in frame.labels:
                continue
            category = frame.labels[gid]
            miss, sticky = self._instance(gid, category)
            n = int(counts[gid])
            p_det = (1.0 - miss) * (min(1.0, n / d.small_pixels) if d.small_pixels > 0 else 1.0)
            if rng.random() >= p_det:
                continue
            if sticky is not None and rng.random() < d.sticky_rate:
                category = sticky
            elif d.confusion > 0 and rng.random() < d.confusion:
                sim = self.categories.similar.get(category, ())
                if sim:
                    category = sim[int(rng.integers(len(sim)))]
            dets.append((gid, category, boxes[gid - 1]))
            sl = boxes[gid - 1]
            claimed[sl] |= inst[sl] == gid
        for gid, category, sl in dets:
            sl, m = _mask_errors(inst, gid, sl, claimed, d, rng)
            free = m & (out[sl] == 0)
            if free.any():
                cats.append(category)
                out[sl][free] = len(cats)
        n_fp = int(rng.poisson(d.false_positives)) if d.false_positives > 0 else 0
        for _ in range(n_fp):
            blob, under = _fp_blob(depth, out, inst, d.fp_pixels, rng)
            if blob is None:
                continue
            vocab = self.categories.vocabulary
            base = frame.labels.get(int(under), "")
            sim = self.categories.similar.get(base, ())
            pool = sim if sim and rng.random() < 0.5 else vocab
            if not pool:
                continue
            sl, m = blob
            cats.append(str(pool[int(rng.integers(len(pool)))]))
            out[sl][m] = len(cats)
        # ids: fresh in every frame (or, with frame_local_ids off, the true ids and new ones for false positives)
        k = len(cats)
        if d.frame_local_ids:
            new = rng.choice(MAX_LOCAL_ID - 1, size=k, replace=False) + 1 if k else np.zeros(0, dtype=np.int64)
        else:
            new = np.array([g for g, _, _ in dets][:k] + [MAX_LOCAL_ID + i for i in range(max(k - len(dets), 0))])
        lut = np.zeros(k + 1, dtype=np.int32)
        lut[1:] = new
        # the table is listed by id, not in detection order (the true instance ids' order, false positives
        # last): frame-local ids are a random sample, so their order is a shuffle of the detections
        return lut[out], {int(new[i]): cats[i] for i in np.argsort(new, kind="stable")}


def _mask_errors(inst, gid, sl, claimed, d: DetectorModel, rng: np.random.Generator):
    """(slices, mask) of one detection: the true mask eroded or dilated by up to ``mask_px`` (dilation
    only into pixels no detected true instance claims), boundary pixels flipped at ``mask_jitter``."""
    H, W = inst.shape
    pad = d.mask_px + 2
    r0, r1 = max(sl[0].start - pad, 0), min(sl[0].stop + pad, H)
    c0, c1 = max(sl[1].start - pad, 0), min(sl[1].stop + pad, W)
    sl = (slice(r0, r1), slice(c0, c1))
    m = inst[sl] == gid
    if d.mask_px <= 0 and d.mask_jitter <= 0:
        return sl, m
    free = m | ~claimed[sl]
    r = int(rng.integers(-d.mask_px, d.mask_px + 1)) if d.mask_px > 0 else 0
    if r > 0:
        m = ndimage.binary_dilation(m, iterations=r) & free
    elif r < 0:
        eroded = ndimage.binary_erosion(m, iterations=-r)
        m = eroded if eroded.sum() >= 0.3 * m.sum() else m
    if d.mask_jitter > 0:
        edge = m & ~ndimage.binary_erosion(m)
        m = m & ~(edge & (rng.random(m.shape) < d.mask_jitter))
        grow = ndimage.binary_dilation(m) & ~m & free
        m = m | (grow & (rng.random(m.shape) < d.mask_jitter))
    return sl, m


def _fp_blob(depth, out, inst, size_range, rng):
    """A false detection: a compact blob of pixels on one surface (depth within 5 % of its seed's), not
    on a detection; ((slices, mask), true instance under its seed) or (None, 0)."""
    H, W = depth.shape
    for _ in range(8):
        v, u = int(rng.integers(H)), int(rng.integers(W))
        z = depth[v, u]
        if not (np.isfinite(z) and z > 0) or out[v, u] != 0:
            continue
        area = rng.uniform(*size_range)
        aspect = rng.uniform(0.5, 2.0)
        h, w = max(int(np.sqrt(area / aspect)), 3), max(int(np.sqrt(area * aspect)), 3)
        sl = (slice(max(v - h // 2, 0), min(v + h // 2 + 1, H)), slice(max(u - w // 2, 0), min(u + w // 2 + 1, W)))
        sub = depth[sl]
        ok = np.isfinite(sub) & (np.abs(sub - z) < 0.05 * z) & (out[sl] == 0)
        if ok.sum() < 0.5 * size_range[0]:
            continue
        return (sl, ok), int(inst[v, u])
    return None, 0


# ---------------------------------------------------------------------------------------- depth
def corrupt_depth(depth: np.ndarray, m: DepthModel, rng: np.random.Generator) -> np.ndarray:
    """Noisy float32 depth (0 = no reading) from exact depth (see :class:`DepthModel`)."""
    d = np.asarray(depth, dtype=np.float64)
    valid = np.isfinite(d) & (d > 0)
    z = np.where(valid, d, 0.0)
    bad = ~valid
    if m.edge_rel > 0:
        big = np.where(valid, d, 1e3)
        jump = np.zeros(d.shape, dtype=bool)
        for axis in (0, 1):
            diff = np.abs(np.diff(big, axis=axis))
            near = np.minimum(
                np.delete(big, -1, axis=axis), np.delete(big, 0, axis=axis)
            )  # the nearer side sets the scale
            j = diff > m.edge_rel * near
            if axis == 0:
                jump[:-1] |= j
                jump[1:] |= j
            else:
                jump[:, :-1] |= j
                jump[:, 1:] |= j
        if m.edge_px > 1:
            jump = ndimage.binary_dilation(jump, iterations=m.edge_px - 1)
        bad |= jump
    sigma = m.sigma_const + m.sigma_quad * z**2
    if sigma.max() > 0:
        noise = rng.standard_normal(d.shape)
        if m.correlated > 0:
            field_ = ndimage.gaussian_filter(rng.standard_normal(d.shape), m.corr_px / 2.0, mode="wrap")
            field_ /= max(float(field_.std()), 1e-12)
            noise = np.sqrt(1.0 - m.correlated) * noise + np.sqrt(m.correlated) * field_
        z = z + sigma * noise
    if m.dropout > 0:
        bad |= rng.random(d.shape) < m.dropout
    bad |= (z <= 0.05) | (z > m.max_range)
    return np.where(bad, 0.0, z).astype(np.float32)
