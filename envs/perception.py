"""Perception profiles applied to what an agent receives from an env (the sensor models themselves are
pure geometry: :mod:`spatial_memory.perception`).

Two things need env knowledge and live here:

* which categories a detector confuses (:func:`categories`): a capability of the env family
  (:class:`~envs.registry.HasCategories`; the apartments' similar classes -- a sofa and an armchair, a
  mug and a toothbrush cup, ... -- and the label set false positives are drawn from);
* what an observation is (:class:`RobotSensors`): every camera frame of an :class:`Observation`
  passes the profile's detector and depth models; on a mobile base (state ``x_m, y_m, yaw_rad``),
  the odometry model drifts every camera pose and the state together, as one robot's dead reckoning
  would. A fixed-base arm (LIBERO) gets no odometry drift: its camera poses come from kinematics.

Noise applies to what the agent receives, never to what the scorer uses: the env's own observation,
scene truth and recorded material stay exact.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from spatial_memory.geometry import wrap_angle
from spatial_memory.perception import CategoryModel, PerceptionProfile, PerceptionStream
from spatial_memory.profiles import profile as make_profile

from .observation import Observation
from .spec import EnvSpec

ODOMETRY_STATE = ("x_m", "y_m", "yaw_rad")


def categories(family: str) -> CategoryModel:
    """The category model of an env family's detector: the family's own (:class:`~envs.registry.HasCategories`),
    else empty (nothing confused, no false-positive labels)."""
    from .registry import HasCategories, family as get_family, names

    if family not in names():
        return CategoryModel()
    fam = get_family(family)
    return fam.categories() if isinstance(fam, HasCategories) else CategoryModel()


@dataclass(frozen=True)
class PerceptionConfig:
    """The ``perception`` config group (``perception=gt|realistic|harsh|learned``): a named profile of
    :data:`spatial_memory.profiles.PROFILES`, the noise's seed, ``overrides``
    (``{detector|depth|odometry: {field: value}}``) on top of the named profile's numbers, and for
    ``learned`` the detector's ``checkpoint`` (a path; :mod:`spatial_memory.detector`)."""

    name: str = "gt"
    seed: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None

    def profile(self) -> PerceptionProfile:
        return make_profile(asdict(self))


def perception_profile(cfg: Any) -> PerceptionProfile:
    """The profile of a config (``perception=`` group: ``{name, seed, overrides, checkpoint}``), a name or
    None (gt). A learned detector's checkpoint is read now, so that a bad one fails before any episode."""
    p = make_profile(cfg)
    if p.checkpoint is not None:
        from spatial_memory.detector import cached_detector

        cached_detector(p.checkpoint)
    return p


class RobotSensors:
    """One robot's sensors for one episode: ``sensors(obs)`` is the observation as the robot gets it.

    ``key`` names the episode (the scene first: per-instance detector behaviour is per scene). The
    odometry drift is shared by all cameras of the robot (``T_drift``)."""

    def __init__(self, profile: PerceptionProfile, key: Any, spec: EnvSpec, scene: Any = None) -> None:
        self.profile = profile
        self.key = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        self.scene = scene
        self.categories = categories(spec.family)
        names = spec.state.names or ()
        self.mobile = tuple(names[:3]) == ODOMETRY_STATE
        self._streams: dict[str, PerceptionStream] = {}
        self.T_drift = np.eye(4)

    def stream(self, camera: str) -> PerceptionStream:
        if camera not in self._streams:
            self._streams[camera] = self.profile.stream(self.key + (camera,), self.categories, scene=self.scene)
        return self._streams[camera]

    def __call__(self, obs: Observation) -> Observation:
        if self.profile.exact:
            return obs
        cams = {}
        for i, (name, frame) in enumerate(obs.cameras.items()):
            s = self.stream(name)
            f = s.perceive(frame, odometry=self.mobile and i == 0)
            if self.mobile and i == 0:
                self.T_drift = s.T_drift
            elif self.mobile:  # the other cameras ride on the same (drifting) base
                f = _with_pose(f, self.T_drift @ frame.T_world_cam)
            cams[name] = f
        state = np.array(obs.state, dtype=np.float64, copy=True)
        if self.mobile and state.shape[0] >= 3:
            c, s_ = self.T_drift[0, 0], self.T_drift[1, 0]
            x, y = state[0], state[1]
            state[0] = c * x - s_ * y + self.T_drift[0, 3]
            state[1] = s_ * x + c * y + self.T_drift[1, 3]
            state[2] = wrap_angle(float(state[2] + np.arctan2(s_, c)))
            state = state.astype(np.asarray(obs.state).dtype)
        return Observation(
            cameras=cams,
            state=state,
            instruction=obs.instruction,
            step=obs.step,
            sensors=dict(obs.sensors),
            memory=dict(obs.memory),
        )


def _with_pose(frame, T):
    from spatial_memory.frame import CameraFrame

    return CameraFrame(frame.rgb, frame.depth, frame.K, T, frame.instance, frame.labels, frame.step)
