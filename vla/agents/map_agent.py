"""The memory agent: acts and answers from its own :class:`SpatialMemory` only (never scene truth).

It is :class:`~vla.agents.map_feed.WithMemory` around the memory navigator: every step the
memory transform (:class:`~vla.transforms.map_inputs.MemoryInputs`) fuses the ego camera frame (the
first camera, or option ``camera``) and adds the ``memory/*`` inputs to the observation; the
:class:`~vla.navigation.MemoryNavigator` then turns "go to the <category>" into base actions
``[forward_m, left_m, yaw_rad]`` from the observation and the memory. With an action space that is
not a mobile base's (LIBERO's arm) it holds still (zero actions) and only remembers, unless option
``driver`` names another agent that acts (``agent.driver=scripted``, or any ``"pkg.mod:Class"``
such as a learned policy): the memory then rides along, fusing the same frames, and the memory
alone answers questions. The memory is ``agent.memory`` (a fresh one per episode), for mid-episode
questions, servers and inspection. Navigation: docs/NAVIGATION.md.

    agent = MemoryAgent(seed=0)                    # or make_agent({"name": "memory", ...})
    agent.reset(obs.instruction, env.env_spec)
    action = agent.act(obs)                        # integrate, then navigate
    agent.memory.objects(); agent.navigator.phase  # "explore" | "goto" | "done"
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec
from vla_common.strict import from_dict

from ..policy import memory_inputs
from ..transforms.map_inputs import MemoryInputs, MemoryInputsConfig, is_mobile_base
from ..navigation import MemoryNavigator, NavigatorConfig
from ..navigation.routes import RouteFollower
from .map_feed import MemoryAnswers, WithMemory


@dataclass(frozen=True)
class MemoryAgentOptions:
    """Options of ``agent=memory``: the fields of :class:`MemoryInputsConfig` (camera, memory preset
    and overrides, which inputs, the perception profile it is built for), plus ``navigator`` (fields of
    :class:`NavigatorConfig`, all of them by default), ``follow`` (``"routes"``: the base drives by the
    map's routes alone, :class:`~vla.navigation.routes.RouteFollower`, instead of the navigator)
    and ``driver`` (another agent that acts; the memory only answers). The navigator needs only the
    object table, so ``inputs`` defaults to ``["objects"]`` (the map image costs tens of milliseconds
    per step). ``answer_from``: ``"memory"`` (GST answers
    from everything the memory fused) or ``"frame"``, the frame-only control (the current view alone,
    the same perception and geometry: :mod:`vla.questions.single_frame`)."""

    navigator: dict[str, Any] = field(default_factory=lambda: asdict(NavigatorConfig()))
    follow: str = "navigator"  # "routes": drive by the map's routes alone (RouteFollower), not the navigator
    driver: str | None = None
    camera: str | None = None
    memory: str = "auto"
    memory_overrides: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[str, ...] = ("objects",)
    map_level: str = "medium"
    map_size: tuple[int, int] = (256, 256)
    map_frame: str = "fit"
    map_extent_m: float = 8.0
    max_objects: int = 32
    perception: str = "gt"
    answer_from: str = "memory"

    def __post_init__(self) -> None:
        if self.answer_from not in ("memory", "frame"):
            raise ValueError(f"agent.answer_from must be 'memory' or 'frame', got {self.answer_from!r}")
        if self.follow not in FOLLOW:
            raise ValueError(f"agent.follow must be one of {FOLLOW}, got {self.follow!r}")
        if self.driver == "memory":
            raise ValueError("agent.driver cannot be the memory agent itself")
        NavigatorConfig.from_dict(self.navigator)  # validate both configs now, not mid-run
        self.inputs_config()

    def inputs_config(self) -> MemoryInputsConfig:
        keys = {f.name for f in fields(MemoryInputsConfig)}
        return MemoryInputsConfig(**{k: getattr(self, k) for k in keys})


FOLLOW = ("navigator", "routes")


class _Navigate:
    """The navigator as an agent of the memory inputs (holds still on an arm: no base to drive)."""

    name = "navigator"

    def __init__(self, navigator: MemoryNavigator, inputs: MemoryInputs, answers: MemoryAnswers) -> None:
        self.navigator, self.inputs, self.answers = navigator, inputs, answers
        self.mobile_base = True
        self._zero: np.ndarray | None = None

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        self.mobile_base = is_mobile_base(spec)
        self.stop = tuple(spec.action.names[3:4]) == ("stop",)  # the ObjectNav protocol: signal stop when done
        self._zero = np.zeros(spec.action.dim)
        if self.mobile_base:
            self.navigator.set_action_limits(np.asarray(spec.action.low[:3]), np.asarray(spec.action.high[:3]))
            self._low, self._high = np.asarray(spec.action.low), np.asarray(spec.action.high)
        self.navigator.reset(instruction if self.mobile_base else "")

    def act(self, observation: Observation) -> np.ndarray:
        if not self.mobile_base:
            return self._zero.copy()
        action = self.navigator.act(observation, self.inputs.memory, camera=self.inputs.camera(observation))
        if self.stop:
            action = np.append(action, 1.0 if self.navigator.phase == "done" else 0.0)
        return np.clip(action, self._low, self._high)

    def answer(self, question: Any) -> str:
        return self.answers(question)


class MemoryAgent(WithMemory):
    name = "memory"

    def __init__(self, seed: int = 0, **options: Any) -> None:
        self.options = from_dict(MemoryAgentOptions, options, "memory agent")
        inputs = memory_inputs(self.options.inputs_config(), seed=seed)
        nav_cfg = NavigatorConfig.from_dict(self.options.navigator).for_perception(self.options.perception)
        self.navigator = RouteFollower(nav_cfg) if self.options.follow == "routes" else MemoryNavigator(nav_cfg)
        self.driver = None
        if self.options.driver:
            from . import make_agent

            self.driver = make_agent({"name": self.options.driver}, seed=seed)
        answers = MemoryAnswers(inputs, frame_only=self.options.answer_from == "frame")  # one answerer for both
        acting = self.driver if self.driver is not None else _Navigate(self.navigator, inputs, answers)
        super().__init__(acting, inputs, memory_answers=answers)
        self.name = "memory"

    @property
    def mobile_base(self) -> bool:
        """Whether actions are a base's ``[forward_m, left_m, yaw_rad]`` (the navigator drives);
        otherwise (e.g. LIBERO's arm) the agent holds still and only builds its memory."""
        return self.inputs.mobile_base
