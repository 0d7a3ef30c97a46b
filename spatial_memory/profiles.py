"""Perception profiles whole: for each named profile, the sensors it models and the memory and
localisation settings built for those sensors.

A profile (``perception=gt|realistic|harsh|learned``) is three things that must agree:

* the **sensor models** (:data:`PROFILES`, :class:`~.perception.PerceptionProfile`): what the env's
  frames become before an agent sees them -- ``gt`` (the simulator's exact perception, unchanged),
  ``realistic`` (a good RGB-D camera, a decent instance segmenter, wheel odometry) and ``harsh`` (a poor
  stereo camera, a weak detector, poor odometry); their numbers are discussed in docs/GST.md; ``learned``
  (``realistic``'s camera and odometry, and a detector trained here in place of the simulator's masks:
  :mod:`.detector`, its checkpoint by path: ``profile({"name": "learned", "checkpoint": PATH})``);
* the **memory** built for them (:data:`MEMORY_SETTINGS`, :func:`memory_config_for`): with a detector's
  frame-local ids, objects are associated by category and 3D proximity; the drift correction's prior is
  the odometry's specification (what the robot knows of its own sensors);
* the **localisation** of views without a pose (:data:`LOCALIZE_SETTINGS`, :func:`localize_config_for`).

The settings were tuned on the val split (docs/MEMORY.md, docs/BENCHMARKS.md).

    stream = PROFILES["realistic"].stream(("house/val/800001", "stream"), categories)
    memory = SpatialMemory(config=memory_config_for("realistic"))
"""

from __future__ import annotations

from typing import Any

from .memory_config import MemoryConfig
from .perception import DepthModel, DetectorModel, OdometryModel, PerceptionProfile

# ------------------------------------------------------------------------------------- sensor models
PROFILES: dict[str, PerceptionProfile] = {
    "gt": PerceptionProfile("gt"),
    # a good RGB-D camera (about 2 % of range at 3 m), a decent instance segmenter, wheel odometry
    # (the drift of the former "noise 1" level: 2 mm and 0.05 degrees per frame, plus 0.5 % slip)
    "realistic": PerceptionProfile(
        "realistic",
        detector=DetectorModel(
            frame_local_ids=True,
            miss_rate=0.1,
            small_pixels=300,
            hard_fraction=0.05,
            hard_miss=0.6,
            false_positives=0.3,
            confusion=0.08,
            sticky_fraction=0.05,
            sticky_rate=0.4,
            mask_px=2,
            mask_jitter=0.2,
        ),
        depth=DepthModel(
            sigma_const=0.002,
            sigma_quad=0.005,
            correlated=0.5,
            corr_px=6.0,
            dropout=0.02,
            edge_rel=0.05,
            edge_px=1,
            max_range=8.0,
        ),
        odometry=OdometryModel(sigma_xy_m=0.002, sigma_yaw_deg=0.05, scale_xy=0.005, scale_yaw=0.002),
    ),
    # a poor stereo camera, a weak detector, poor odometry (the former "noise 3" drift: 1 cm and 0.25
    # degrees per frame, plus 2 % slip)
    "harsh": PerceptionProfile(
        "harsh",
        detector=DetectorModel(
            frame_local_ids=True,
            miss_rate=0.25,
            small_pixels=500,
            hard_fraction=0.1,
            hard_miss=0.8,
            false_positives=1.0,
            confusion=0.2,
            sticky_fraction=0.1,
            sticky_rate=0.5,
            mask_px=4,
            mask_jitter=0.3,
        ),
        depth=DepthModel(
            sigma_const=0.005,
            sigma_quad=0.012,
            correlated=0.6,
            corr_px=8.0,
            dropout=0.05,
            edge_rel=0.04,
            edge_px=2,
            max_range=6.0,
        ),
        odometry=OdometryModel(sigma_xy_m=0.01, sigma_yaw_deg=0.25, scale_xy=0.02, scale_yaw=0.01),
    ),
}
# realistic's camera and odometry with a detector trained here (its checkpoint is given by path, see profile())
PROFILES["learned"] = PerceptionProfile(
    "learned", depth=PROFILES["realistic"].depth, odometry=PROFILES["realistic"].odometry
)
LEARNED = "learned"


# ------------------------------------------------------------------------- the memory for the sensors
# a detector's ids are frame-local: objects by category and proximity, confirmed by repeated detections; noisy
# depth scatters voxels around surfaces: a voxel shows on the maps from 2 hits, a wall pixel needs 5 of the 12
# voxels of the wall band, and walls are thinned to the ridge of their voxel density
_DETECTOR = {
    "association": "proximity",
    "min_observations": 2,
    "min_support": 0.25,
    "map": {"min_wall_voxels": 5, "min_hits": 2, "wall_ridge": True},
}
# fields of MemoryConfig per profile; the drift correction's prior is the odometry's specification
MEMORY_SETTINGS: dict[str, dict[str, Any]] = {
    "gt": {},
    "realistic": {
        **_DETECTOR,
        "drift": {
            "cell": 0.2,
            "odom_sigma_m": 0.002,
            "odom_sigma_deg": 0.05,
            "odom_scale_xy": 0.005,
            "odom_scale_yaw": 0.002,
            "depth_sigma": [0.002, 0.005],
        },
    },
    "harsh": {
        **_DETECTOR,
        "drift": {
            "cell": 0.2,
            "odom_sigma_m": 0.01,
            "odom_sigma_deg": 0.25,
            "odom_scale_xy": 0.02,
            "odom_scale_yaw": 0.01,
            "depth_sigma": [0.005, 0.012],
        },
    },
}
MEMORY_SETTINGS["learned"] = MEMORY_SETTINGS["realistic"]  # the same camera and odometry, a detector's frame-local ids

# fields of LocalizeConfig per profile: noisy depth spreads the view's points around surfaces, so a scan
# pixel is a block median and the tolerances widen with the noise
LOCALIZE_SETTINGS: dict[str, dict[str, Any]] = {
    "gt": {},
    "realistic": {"scan_block_median": True},
    "harsh": {"scan_block_median": True, "inlier_m": 0.15, "likelihood_sigma": 0.15, "free_gap": 0.5},
    "learned": {"scan_block_median": True},
}


def _known(name: str) -> None:
    if name not in PROFILES:
        raise ValueError(f"unknown perception profile {name!r}; choose from {sorted(PROFILES)}")


def memory_config_for(profile: str, tabletop: bool = False, overrides: dict[str, Any] | None = None) -> MemoryConfig:
    """The memory for a profile's sensors, apartment or tabletop scale, with ``overrides`` (fields of
    :class:`MemoryConfig`) on top."""
    _known(profile)
    cfg = {**MEMORY_SETTINGS[profile], **dict(overrides or {})}
    if "carve_margin" in cfg:
        cfg["carve_margin"] = tuple(cfg["carve_margin"])
    return MemoryConfig.tabletop(**cfg) if tabletop else MemoryConfig(**cfg)


def localize_config_for(profile: str):
    """The localisation settings (a ``LocalizeConfig``) for views taken with a profile's sensors."""
    from . import LocalizeConfig

    _known(profile)
    return LocalizeConfig(**LOCALIZE_SETTINGS[profile])


def profile(name_or_cfg: str | dict | PerceptionProfile | None) -> PerceptionProfile:
    """A profile by name (``gt``, ``realistic``, ``harsh``), from a config dict (``{"name": ...,
    "seed": ..., "overrides": {"depth": {...}}, "checkpoint": PATH}`` or a full profile dict), or as given.
    ``learned`` needs its detector's checkpoint (and only it takes one)."""
    if name_or_cfg is None:
        return PROFILES["gt"]
    if isinstance(name_or_cfg, PerceptionProfile):
        return _needs_checkpoint(name_or_cfg)
    if isinstance(name_or_cfg, str):
        _known(name_or_cfg)
        return _needs_checkpoint(PROFILES[name_or_cfg])
    cfg = dict(name_or_cfg)
    name = cfg.get("name", "gt")
    overrides = cfg.pop("overrides", None) or {}
    seed = int(cfg.pop("seed", 0))
    checkpoint = cfg.pop("checkpoint", None)
    if set(cfg) - {"name"}:  # a full profile
        return _needs_checkpoint(PerceptionProfile.from_dict({**cfg, "seed": seed, "checkpoint": checkpoint}))
    _known(name)
    if checkpoint is not None and name != LEARNED:
        raise ValueError(
            f"perception.checkpoint is the learned detector's; perception={name} has a simulated one "
            f"(use perception={LEARNED} perception.checkpoint={checkpoint})"
        )
    base = PROFILES[name].to_dict()
    for part, vals in overrides.items():
        if part not in ("detector", "depth", "odometry"):
            raise ValueError(f"perception overrides: unknown part {part!r} (detector, depth, odometry)")
        if vals is None:
            base[part] = None
        else:
            base[part] = {**(base[part] or {}), **vals}
    base["seed"] = seed
    base["checkpoint"] = None if checkpoint is None else str(checkpoint)
    return _needs_checkpoint(PerceptionProfile.from_dict(base))


def _needs_checkpoint(p: PerceptionProfile) -> PerceptionProfile:
    if p.name == LEARNED and p.checkpoint is None:
        raise ValueError(
            f"perception={LEARNED} needs its detector's checkpoint: perception.checkpoint=PATH "
            "(train one with: python -m vla.detector train, docs/MEMORY.md)"
        )
    return p
