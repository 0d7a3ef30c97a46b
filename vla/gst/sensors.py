"""What a perception profile makes of a question's sensor media (offline question sets).

The question files hold the simulator's exact recordings (the scorer's truth stays exact); an agent
under a profile other than ``gt`` receives them through :class:`AgentSensors`
(``question.for_agent(sensors)``), as a robot's sensors would have recorded them:

* ``stream`` (the exploration video's sensor stream): depth noise, detector errors with frame-local
  ids, odometry drift accumulating over the video;
* ``current_sensors`` (an offline current view, no pose): depth noise and detector errors;
* ``clip_stream`` (a Traj clip): a separate recording, so its odometry starts at its own origin (the
  clip's first pose, on the floor) and drifts on its own; under ``gt`` the clip keeps the video's
  odometry frame (today's protocol).

Each medium is corrupted once, deterministically (seeded by the profile's seed, the scene and the
file), and cached: every question of a scene sees the same noisy recording.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import camera_yaw, invert_T, make_T, rot_z
from spatial_memory.perception import CategoryModel, PerceptionProfile


class AgentSensors:
    def __init__(self, profile: PerceptionProfile, categories: CategoryModel | None = None, cache_size: int = 24):
        self.profile = profile
        self.categories = categories or CategoryModel()
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self.cache_size = cache_size

    def __call__(self, question: Any, name: str, obj: Any) -> Any:
        if self.profile.exact:
            return obj
        ref = question.media[name]
        key = (question.scene, name, str(ref) if not isinstance(ref, list) else tuple(map(str, ref)))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        out = self.perceive(question.scene, name, str(key[2]), obj)
        self._cache[key] = out
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def perceive(self, scene: str, name: str, ref: str, obj: Any) -> Any:
        p, cats = self.profile, self.categories
        if name == "current_sensors":
            return p.view(obj, (scene, name, ref), cats, scene=scene)
        frames: list[CameraFrame] = list(obj)
        if name == "clip_stream" and frames:
            frames = reorigin(frames)
        stream = p.stream((scene, name, ref), cats, scene=scene)
        return [stream(f) for f in frames]


def reorigin(frames: list[CameraFrame]) -> list[CameraFrame]:
    """The frames with their poses in the odometry frame of their own first pose (on the floor)."""
    T0 = frames[0].T_world_cam
    T_world_origin = make_T(rot_z(camera_yaw(T0)), [T0[0, 3], T0[1, 3], 0.0])
    T_origin_world = invert_T(T_world_origin)
    return [
        CameraFrame(f.rgb, f.depth, f.K, T_origin_world @ f.T_world_cam, f.instance, f.labels, f.step) for f in frames
    ]


def sensors_for(profile: PerceptionProfile, family: str = "house") -> AgentSensors | None:
    """The question media transform of a profile (None for ``gt``: exact media, unchanged)."""
    if profile.exact:
        return None
    from envs.perception import categories

    return AgentSensors(profile, categories(family))


def sensors_of_config(cfg: dict[str, Any]) -> tuple[PerceptionProfile, AgentSensors | None]:
    """(perception profile, sensors) of a ``vla-gst`` config (``perception=``, ``env.name``): what
    ``eval`` (in every worker process too) and ``export`` give the agent."""
    from envs.perception import perception_profile

    profile = perception_profile(cfg.get("perception"))
    return profile, sensors_for(profile, cfg["env"]["name"])


__all__ = ["AgentSensors", "reorigin", "sensors_for", "sensors_of_config", "np"]
