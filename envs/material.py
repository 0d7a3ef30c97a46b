"""What spatial-question generation needs to know about one scene (privileged: never shown to an agent).

A :class:`SceneMaterial` holds the scene truth (world frame), the recorded frames (the exploration
video offline, the episode so far mid-episode) with their poses in the robot's odometry frame, the
world poses along the recording, the shared top-down frame and ground-truth maps, and a renderer for
views at arbitrary poses.

Each env family that can pose GST questions builds its own material beside the family (house:
``envs/house/material.py``; LIBERO: ``envs/libero/material.py``) and declares it by implementing
:class:`QuestionSource` on its family object; the GST harness (``vla/gst``) finds it through
:func:`envs.registry.family`, never by the env's class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from .truth import SceneTruth
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import camera_yaw
from spatial_memory.topdown import TopDownFrame


@dataclass
class SceneMaterial:
    name: str
    truth: SceneTruth
    T_world_odom: np.ndarray
    frames: list[CameraFrame]  # the video; T_world_cam in the odometry frame
    poses_world: np.ndarray  # Nx3 [x, y, yaw] of every recorded step (frames are a subset, frame.step indexes here)
    topdown: TopDownFrame
    maps: dict[str, np.ndarray]  # level -> ground-truth map image
    render: Callable[[np.ndarray], CameraFrame] | None = None  # world pose [x, y, yaw] -> frame (odometry pose)
    clips: list[tuple[int, int]] = field(default_factory=list)  # (start, end) step ranges for Traj
    supported: tuple[str, ...] = ()  # subtask codes this scene can generate
    min_target_distance_m: float | None = None  # targets nearer are degenerate (None: GenConfig's, room scale)

    def T_world_cam(self, frame: CameraFrame) -> np.ndarray:
        return self.T_world_odom @ frame.T_world_cam

    def camera_xy_yaw_world(self, frame: CameraFrame) -> tuple[np.ndarray, float]:
        T = self.T_world_cam(frame)
        return T[:2, 3].copy(), camera_yaw(T)


def sample_windows(
    poses_world: np.ndarray, num: int, length: int = 16, min_travel_m: float = 1.5, seed: int = 0
) -> list[tuple[int, int]]:
    """Up to ``num`` non-overlapping (start, end) windows of ``length`` steps that travel >= ``min_travel_m``."""
    rng = np.random.default_rng(seed)
    n = len(poses_world)
    step_len = np.hypot(*np.diff(poses_world[:, :2], axis=0).T) if n > 1 else np.zeros(0)
    starts = [s for s in range(0, max(n - length, 0) + 1) if step_len[s : s + length - 1].sum() >= min_travel_m]
    rng.shuffle(starts)
    chosen: list[tuple[int, int]] = []
    for s in starts:
        if len(chosen) >= num:
            break
        if all(s + length <= a or s >= b for a, b in chosen):
            chosen.append((s, s + length))
    return sorted(chosen)


@runtime_checkable
class QuestionSource(Protocol):
    """An env family that can pose GST questions about its scenes (see the module doc).

    ``subtasks``: the codes it supports. ``question_camera``: the camera whose view is the current
    view of mid-episode questions. ``live_material``: the episode so far (``frames``) as material;
    ``cache`` is a dict the caller keeps for one episode (maps, say). ``tds_pool``: scene name ->
    level -> ground-truth map, the scene's own and some distractors (empty: no TDS questions).
    ``offline_material``: an exploration of the scene from the env's current pose (``offline``
    families only; the others raise ``ValueError``). ``offline_tasks``: the env config and the
    ``(task id, scene name)`` pairs of ``n`` scenes of ``split`` from the ``first`` (what ``vla-gst
    generate`` iterates over; ``offline`` families only). ``scene_name``: a stable name.
    """

    subtasks: tuple[str, ...]
    offline: bool  # whether offline question sets can be generated (an exploration route exists)

    def question_camera(self, camera_names: list[str]) -> str: ...

    def live_material(self, env: Any, name: str, frames: list[CameraFrame], cache: dict) -> SceneMaterial: ...

    def tds_pool(self, env: Any, cache: dict) -> dict[str, dict[str, np.ndarray]]: ...

    def offline_material(self, env: Any, name: str, stride: int = 2, seed: int = 0) -> SceneMaterial: ...

    def offline_tasks(
        self, env_cfg: dict[str, Any], split: str, first: int, n: int
    ) -> tuple[dict[str, Any], list[tuple[int, str]]]: ...

    def scene_name(self, env: Any) -> str: ...
