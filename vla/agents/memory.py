"""The memory agent: acts and answers from its own :class:`SpatialMemory` only (never scene truth).

Every step it fuses the ego camera frame into the memory (``obs.cameras``: the first camera, or
option ``camera``) and asks the :class:`~vla.agents.navigation.MemoryNavigator` for an action.
``bind(env)`` reads nothing but ``env.action_space``; with an action space that is not a mobile
base's ``[forward_m, left_m, yaw_rad]`` (LIBERO's arm) it holds still (zero actions) and only
remembers, unless option ``driver`` names another agent that acts (``agent.driver=scripted``, or
any ``"pkg.mod:Class"`` such as a learned policy): the memory then rides along, fusing the same
frames, and the memory alone answers questions. The memory is ``agent.memory`` (a fresh one per
episode), for mid-episode questions and for inspection. Navigation: docs/NAVIGATION.md.

    agent = MemoryAgent(seed=0)                    # or make_agent({"name": "memory", ...})
    agent.bind(env); agent.reset(obs.instruction)
    action = agent.act(obs)                        # integrate, then navigate
    agent.memory.objects(); agent.navigator.phase  # "explore" | "goto" | "done"
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from envs.base import Observation
from spatial_memory import MemoryConfig, SpatialMemory

from .navigation import MemoryNavigator, NavigatorConfig

MEMORY_PRESETS = ("auto", "apartment", "tabletop")


@dataclass(frozen=True)
class MemoryAgentOptions:
    """Options of ``agent=memory`` (``configs/agent/memory.yaml``).

    camera: the camera whose frames are fused (None = the first in ``obs.cameras``). memory:
    ``"apartment"`` (``MemoryConfig()``, 5 cm voxels), ``"tabletop"`` (``MemoryConfig.tabletop()``,
    LIBERO scale) or ``"auto"`` (apartment for a mobile base's ``[forward_m, left_m, yaw_rad]``
    action space, tabletop for any other). memory_overrides: fields of :class:`MemoryConfig` to
    change (e.g. pixel_stride). navigator: fields of :class:`NavigatorConfig` to change.
    """

    camera: str | None = None
    memory: str = "auto"
    memory_overrides: dict[str, Any] = field(default_factory=dict)
    navigator: dict[str, Any] = field(default_factory=dict)
    driver: str | None = None  # another agent acts (e.g. "scripted" or "pkg.mod:Policy"); the memory only answers
    # perception noise (the noisy-perception variant): depth noise sigma(z) = depth_sigma * z^2,
    # a fraction of dropped depth pixels, and odometry drift per frame (a random walk)
    depth_sigma: float = 0.0
    depth_dropout: float = 0.0
    pose_drift_m: float = 0.0
    pose_drift_deg: float = 0.0

    def noise_model(self, seed: int = 0):
        from spatial_memory.noise import NoiseModel

        if not (self.depth_sigma or self.depth_dropout or self.pose_drift_m or self.pose_drift_deg):
            return None
        return NoiseModel(self.depth_sigma, self.depth_dropout, self.pose_drift_m, self.pose_drift_deg, seed)

    def __post_init__(self) -> None:
        self.noise_model()  # validates the noise options
        if self.memory not in MEMORY_PRESETS:
            raise ValueError(f"memory agent option 'memory' must be one of {MEMORY_PRESETS}, got {self.memory!r}")
        valid = {f.name for f in fields(MemoryConfig)}
        bad = sorted(set(self.memory_overrides or {}) - valid)
        if bad:
            raise ValueError(f"unknown memory_overrides {bad}; valid: {sorted(valid)}")
        NavigatorConfig.from_dict(self.navigator)  # validate both configs now, not mid-run
        self.memory_config()

    def memory_config(self, mobile_base: bool = True) -> MemoryConfig:
        overrides = dict(self.memory_overrides or {})
        if "carve_margin" in overrides:
            overrides["carve_margin"] = tuple(overrides["carve_margin"])
        if self.memory == "tabletop" or (self.memory == "auto" and not mobile_base):
            return MemoryConfig.tabletop(**overrides)
        return MemoryConfig(**overrides)


class MemoryAgent:
    name = "memory"

    def __init__(self, seed: int = 0, **options: Any) -> None:
        self.options = MemoryAgentOptions(**options)
        self.seed_value = seed
        self.action_space = None
        self.navigator = MemoryNavigator(NavigatorConfig.from_dict(self.options.navigator))
        self.memory: SpatialMemory | None = None
        self._noisy = None
        self.instruction = ""
        self.driver = None
        if self.options.driver:
            from . import make_agent

            if self.options.driver == "memory":
                raise ValueError("agent.driver cannot be the memory agent itself")
            self.driver = make_agent({"name": self.options.driver}, seed=seed)

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self.seed_value = seed  # the memory is deterministic; a driver may not be
        if self.driver is not None and hasattr(self.driver, "seed"):
            self.driver.seed(seed)

    @property
    def mobile_base(self) -> bool:
        """Whether actions are a base's ``[forward_m, left_m, yaw_rad]`` (the navigator drives);
        otherwise (e.g. LIBERO's arm) the agent holds still and only builds its memory."""
        return self.action_space is None or tuple(getattr(self.action_space, "shape", ())) == (3,)

    def bind(self, env: Any) -> None:
        # a non-privileged agent reads only what it may send
        self.action_space = env.action_space
        if self.driver is not None and hasattr(self.driver, "bind"):
            self.driver.bind(env)
        if self.mobile_base and self.driver is None:
            self.navigator.set_action_limits(env.action_space.low, env.action_space.high)

    def reset(self, instruction: str) -> None:
        self.instruction = instruction
        self.memory = SpatialMemory(config=self.options.memory_config(self.mobile_base))
        noise = self.options.noise_model(seed=hash(self.seed_value) % (2**31))
        self._noisy = noise.stream() if noise is not None else None
        self.navigator.reset(instruction if self.mobile_base else "")
        if self.driver is not None:
            self.driver.reset(instruction)

    def _camera(self, observation: Observation) -> str:
        cams = observation.cameras
        if not cams:
            raise ValueError("the memory agent needs a camera frame in obs.cameras (is rendering off?)")
        if self.options.camera is not None:
            if self.options.camera not in cams:
                raise ValueError(f"camera {self.options.camera!r} not in the observation; cameras: {sorted(cams)}")
            return self.options.camera
        return next(iter(cams))

    def act(self, observation: Observation) -> np.ndarray:
        if self.memory is None:
            self.reset(observation.instruction)
        camera = self._camera(observation)
        frame = observation.cameras[camera]
        self.memory.integrate(self._noisy(frame) if self._noisy is not None else frame)
        if self.driver is not None:
            return self.driver.act(observation)
        if not self.mobile_base:
            return np.zeros(self.action_space.shape, dtype=self.action_space.dtype)
        action = self.navigator.act(observation, self.memory, camera=camera)
        if self.action_space is not None:
            return np.clip(action, self.action_space.low, self.action_space.high).astype(self.action_space.dtype)
        return action

    # =================================================================================== answering
    # GST questions: mid-episode from ``self.memory`` (the episode so far, with the current pose known);
    # offline from a memory built from the question's own sensor stream. Never from scene truth.
    def answer(self, question: Any) -> str:
        from vla.gst.answering import AnswererConfig, MemoryAnswerer

        if not hasattr(self, "_answerer"):
            self._answerer = MemoryAnswerer(
                AnswererConfig(
                    tabletop=not self.mobile_base or self.options.memory == "tabletop", noise=self.options.noise_model()
                )
            )
        if question.current_pose is not None and self._noisy is not None:
            from dataclasses import replace

            # the pose the robot believes: its (drifting) odometry, as its memory does
            question = replace(question, current_pose=self._noisy.T_drift @ question.current_pose)
        return self._answerer.answer(question, live=self.memory)

    def live_map(self) -> np.ndarray | None:
        """The memory's medium-level map with trajectory and agent arrow (the video's right panel)."""
        if self.memory is None or self.memory.n_frames == 0:
            return None
        return self.memory.topdown("medium", trajectory=True, agent=True)
