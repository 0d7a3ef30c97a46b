"""The contract every environment implements (docs/ARCHITECTURE.md, "Contracts").

An environment is a ``gymnasium.Env`` whose observations are :class:`~envs.observation.Observation`
objects (what a policy may see; a flat plain-data dict via ``to_dict()``), which declares what it
emits and accepts in an :class:`~envs.spec.EnvSpec` (``env.env_spec``), and which exposes privileged
:class:`~envs.truth.SceneTruth` (for experts, question generation and scoring only; never shown to
a policy). Environments are grouped in *families* (``libero``, ``house``, ...) registered in
:mod:`envs.registry`; a family lists its tasks and builds one env per task, and an episode is a
``(task_id, trial)`` pair.

Optional capabilities are declared protocols, checked with ``isinstance``: :class:`HasTopDownMaps`
(ground-truth maps on a shared frame), :class:`RecordsDemos` (what an official-format dataset file
stores besides observations).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from spatial_memory.lattice import CellLattice

from .observation import Observation, check_plain
from .spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
from .truth import Box, NavGrid, ObjectTruth, Room, SceneTruth


class NoEpisode(RuntimeError):
    """``reset`` cannot make an episode in this scene (e.g. no object the task can use as a target): a
    property of the scene, not bad input; generators that sweep scenes skip it and say so."""


@dataclass(frozen=True)
class TaskInfo:
    task_id: int
    name: str
    instruction: str
    max_steps: int
    num_trials: int  # how many distinct initial states (trials) the task defines

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "instruction": self.instruction,
            "max_steps": self.max_steps,
            "num_trials": self.num_trials,
        }


class Expert(Protocol):
    """A privileged scripted policy built by an env (``env.expert()``) from its own scene truth."""

    def reset(self) -> None: ...

    def act(self, obs: Observation) -> np.ndarray: ...


class VLAEnv(gym.Env):
    """Base class: gymnasium API, the env's :class:`EnvSpec`, privileged access. ``info['success']``
    after every step."""

    metadata = {"render_modes": ["rgb_array"]}
    instruction: str = ""
    max_episode_steps: int = 0
    task: TaskInfo

    @property
    def env_spec(self) -> EnvSpec:
        """What this env emits and accepts (named ``env_spec``: gymnasium's ``spec`` is its registry entry)."""
        raise NotImplementedError(f"{type(self).__name__} does not declare its EnvSpec")

    def scene_truth(self) -> SceneTruth:
        raise NotImplementedError

    def expert(self) -> Expert:
        raise NotImplementedError(f"{type(self).__name__} has no scripted expert")


@runtime_checkable
class HasTopDownMaps(Protocol):
    """Ground-truth top-down maps of the scene on one shared frame (privileged: for questions)."""

    def topdown_frame(self) -> Any: ...

    def topdown_map(self, level: str) -> np.ndarray: ...


@runtime_checkable
class RendersPose(Protocol):
    """A mobile camera that can be put anywhere (an apartment's ego camera): ``render_pose([x, y, yaw])``
    renders the frame seen from that world pose (T_world_cam in the odometry frame, ``T_world_odom``
    maps it to the world) and ``scene_truth().navigable`` says where it may stand."""

    T_world_odom: np.ndarray

    def render_pose(self, pose_world: np.ndarray, step: int = 0) -> Any: ...


@runtime_checkable
class RendersOnDemand(Protocol):
    """``render_next(wanted)``: which cameras the next ``step()`` renders: all (True), none (False) or the
    names in ``wanted``. The others are missing from that step's observation (``cameras == {}`` when none
    is rendered, and the step costs what the physics costs); every frame that is rendered is the frame
    the env would have rendered anyway, bit for bit. The rollout loop asks for frames only when the agent
    or a subscriber reads them (:func:`vla.rollout.runtime.run_episode`)."""

    def render_next(self, wanted: bool | Collection[str]) -> None: ...


@runtime_checkable
class DrawsVideoFrame(Protocol):
    """``video_frame(episode)``: the env's own picture of the moment for videos (e.g. ego view + map)."""

    def video_frame(self, episode: Any = None) -> np.ndarray: ...


@runtime_checkable
class RecordsDemos(Protocol):
    """What an official-format demonstration file stores besides observations (``record=``)."""

    record_names: dict[str, str]  # camera name -> dataset key prefix

    def sim_state(self) -> np.ndarray: ...

    def dataset_attrs(self) -> dict[str, str]: ...

    def instance_names(self) -> dict[int, str]: ...

    def model_xml(self) -> str: ...

    def record_frame(self, frame: Any) -> dict[str, np.ndarray]: ...  # rgb, depth, K, T_world_cam[, instance]


def check_action(action: Any, space: gym.spaces.Box) -> np.ndarray:
    """Validate an agent's action against a Box space: shape, finiteness; clip to the bounds."""
    try:
        a = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"action must be numeric with shape {space.shape}, got {action!r}") from exc
    if a.shape != space.shape:
        raise ValueError(f"action must have shape {space.shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"action contains NaN or inf: {a.tolist()}")
    return np.clip(a, space.low, space.high)


__all__ = [
    "ActionSpec",
    "ArraySpec",
    "Box",
    "CameraSpec",
    "CellLattice",
    "DrawsVideoFrame",
    "EnvSpec",
    "Expert",
    "HasTopDownMaps",
    "NavGrid",
    "ObjectTruth",
    "Observation",
    "RecordsDemos",
    "Room",
    "SceneTruth",
    "TaskInfo",
    "VLAEnv",
    "check_action",
    "check_plain",
]
