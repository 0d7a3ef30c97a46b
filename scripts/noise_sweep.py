"""The synthetic noise sweep: how gracefully the memory's answers degrade with depth noise and drift.

A tool of ``scripts/bench_memory.py --noise`` (the older, simpler noise model; the perception profiles
the stack runs with are in :mod:`spatial_memory.profiles`).

:class:`NoiseModel` corrupts a stream of frames the way a robot's sensors do:

- depth noise growing with the square of the distance (structured-light / stereo), ``sigma(z) =
  depth_sigma * z**2`` metres, and a fraction ``depth_dropout`` of pixels with no reading;
- odometry drift: the reported pose is the true pose composed with a drift that performs a random
  walk in the floor plane, ``pose_drift_m`` metres (x and y) and ``pose_drift_deg`` degrees of yaw
  per frame (standard deviations).

:func:`evaluate` builds the synthetic apartment, walks through it, feeds the (noisy) frames to a
memory and scores what it answers against the scene's truth with GST-Bench's metrics
(:mod:`vla.gst.metrics`, docs/GST.md).
``scripts/bench_memory.py --noise`` prints the sweep recorded in ``docs/MEMORY.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import egocentric_bearing, make_T, rot_z, wrap_deg
from spatial_memory.memory import MemoryConfig, SpatialMemory
from spatial_memory.synthetic import BoxScene, apartment_scene, apartment_tour, default_camera
from vla.gst import metrics


@dataclass(frozen=True)
class NoiseModel:
    depth_sigma: float = 0.0
    depth_dropout: float = 0.0
    pose_drift_m: float = 0.0
    pose_drift_deg: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.depth_sigma, self.pose_drift_m, self.pose_drift_deg) < 0 or not 0 <= self.depth_dropout < 1:
            raise ValueError(f"NoiseModel needs non-negative sigmas and 0 <= depth_dropout < 1, got {self}")

    def stream(self) -> "NoisyStream":
        return NoisyStream(self)


@dataclass
class NoisyStream:
    """Applies a :class:`NoiseModel` to consecutive frames of one episode (the drift accumulates)."""

    model: NoiseModel
    T_drift: np.ndarray = field(default_factory=lambda: np.eye(4))

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.model.seed)

    def __call__(self, frame: CameraFrame) -> CameraFrame:
        m, rng = self.model, self.rng
        depth = frame.depth.copy()
        valid = np.isfinite(depth) & (depth > 0)
        if m.depth_sigma > 0:
            z = depth[valid].astype(np.float64)
            depth[valid] = np.maximum(z + rng.normal(0.0, 1.0, z.shape) * m.depth_sigma * z**2, 0.0).astype(np.float32)
        if m.depth_dropout > 0:
            depth[rng.random(depth.shape) < m.depth_dropout] = 0.0
        if m.pose_drift_m > 0 or m.pose_drift_deg > 0:
            dx, dy = rng.normal(0.0, m.pose_drift_m, 2)
            dyaw = np.radians(rng.normal(0.0, m.pose_drift_deg))
            self.T_drift = make_T(rot_z(dyaw), [dx, dy, 0.0]) @ self.T_drift
        return CameraFrame(
            rgb=frame.rgb,
            depth=depth,
            K=frame.K,
            T_world_cam=self.T_drift @ frame.T_world_cam,
            instance=frame.instance,
            labels=frame.labels,
            step=frame.step,
        )


# ---------------------------------------------------------------------------------------- metrics
def angle_macc(pred_deg, true_deg) -> float:
    """GST angle mAcc x100 over the answers (:func:`vla.gst.metrics.angle_macc`)."""
    return float(np.mean([metrics.angle_macc(p, t) for p, t in zip(pred_deg, true_deg)]) * 100)


def mra(pred, true) -> float:
    """GST mean relative accuracy x100 over the answers (:func:`vla.gst.metrics.mra`)."""
    return float(np.mean([metrics.mra(p, t) for p, t in zip(pred, true)]) * 100)


# ---------------------------------------------------------------------------------------- harness
def render_tour(
    scene: BoxScene | None = None, n_frames: int = 56, size: int = 96
) -> tuple[BoxScene, list[CameraFrame]]:
    """The clean frames of a walk through the synthetic apartment (render once, corrupt many times)."""
    scene = scene or apartment_scene()
    K = default_camera(size, size)
    return scene, [scene.render(T, K, size, size, step=i) for i, T in enumerate(apartment_tour(n_frames))]


def evaluate(
    noise: NoiseModel, scene: BoxScene, frames: list[CameraFrame], config: MemoryConfig | None = None
) -> dict[str, float]:
    """Integrate the noisy frames, then score the memory against the scene's truth.

    Object and agent errors compare the memory's frame to the world (drift shows in both). The
    egocentric answers are asked from the memory's own latest (drifted) pose and scored against the
    truth seen from the true pose, as an agent would be scored.
    """
    mem = SpatialMemory(config=config)
    stream = noise.stream()
    for f in frames:
        mem.integrate(stream(f))
    T_true = frames[-1].T_world_cam
    err_center, pred_dir, true_dir, pred_dist, true_dist = [], [], [], [], []
    missing = 0
    for box in scene.objects():
        try:
            obj = mem.object(box.category)
        except KeyError:
            missing += 1
            continue
        err_center.append(float(np.linalg.norm(obj.center - box.center)))
        d, r = mem.egocentric(box.category)
        td, tr = egocentric_bearing(T_true, box.center)
        pred_dir.append(d), true_dir.append(td), pred_dist.append(r), true_dist.append(tr)
    pose = mem.agent_pose()
    return {
        "objects_found": len(err_center),
        "objects_missing": missing,
        "center_err_mean_m": float(np.mean(err_center)) if err_center else float("nan"),
        "center_err_max_m": float(np.max(err_center)) if err_center else float("nan"),
        "direction_err_mean_deg": float(np.mean(np.abs(wrap_deg(np.array(pred_dir) - np.array(true_dir)))))
        if pred_dir
        else float("nan"),
        "distance_rel_err_mean": float(np.mean(np.abs(np.array(pred_dist) - np.array(true_dist)) / np.array(true_dist)))
        if pred_dist
        else float("nan"),
        "angle_mAcc": angle_macc(pred_dir, true_dir) if pred_dir else 0.0,
        "distance_MRA": mra(pred_dist, true_dist) if pred_dist else 0.0,
        "agent_pos_err_m": float(np.linalg.norm(pose.position[:2] - T_true[:2, 3])),
        "voxels": len(mem.voxels),
    }


NOISE_LEVELS = {
    "none": NoiseModel(),
    "depth 1cm@1m": NoiseModel(depth_sigma=0.01, depth_dropout=0.02),
    "depth 3cm@1m": NoiseModel(depth_sigma=0.03, depth_dropout=0.05),
    "drift 1cm+0.2deg/frame": NoiseModel(pose_drift_m=0.01, pose_drift_deg=0.2),
    "drift 3cm+0.5deg/frame": NoiseModel(pose_drift_m=0.03, pose_drift_deg=0.5),
    "depth 1cm + drift 1cm+0.2deg": NoiseModel(
        depth_sigma=0.01, depth_dropout=0.02, pose_drift_m=0.01, pose_drift_deg=0.2
    ),
}


def sweep(
    levels: dict[str, NoiseModel] | None = None, n_frames: int = 56, size: int = 96, seeds: tuple[int, ...] = (0, 1, 2)
) -> list[dict]:
    """One row per noise level: the mean of :func:`evaluate` over ``seeds``."""
    scene, frames = render_tour(n_frames=n_frames, size=size)
    rows = []
    for name, model in (levels or NOISE_LEVELS).items():
        runs = [evaluate(NoiseModel(**{**model.__dict__, "seed": s}), scene, frames) for s in seeds]
        rows.append({"noise": name, **{k: float(np.mean([r[k] for r in runs])) for k in runs[0]}})
    return rows
