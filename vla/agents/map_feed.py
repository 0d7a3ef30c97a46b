"""``WithMemory``: any agent, with the spatial memory as its input.

Every step the wrapper runs :class:`~vla.transforms.map_inputs.MemoryInputs` on the observation (the
frame is fused, ``obs.memory`` gains the map and the object table) and hands the enriched
observation to the wrapped agent, which may read those entries or ignore them. Questions are
answered from the memory (``answers="memory"``) or by the wrapped agent (``answers="agent"``: a
learned policy that answers from its own model). The wrapper is privileged exactly when the wrapped
agent is (it only forwards ``bind``), and exposes the live memory for servers and viewers.

:class:`MemoryAnswers` answers GST questions from memory inputs (the answerer of :mod:`vla.questions.answering`,
with the inputs' perception profile and memory settings); the transform itself answers nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec

from ..transforms.map_inputs import MemoryInputs
from .base import Seedable, is_privileged


class MemoryAnswers:
    """``answers(question) -> str``: a GST answer from ``inputs``' memory (mid-episode: the live memory;
    offline: the question's own stream, fused with the same settings). ``frame_only``: the frame-only
    control instead, a memory of the question's current view alone (:mod:`vla.questions.single_frame`)."""

    def __init__(self, inputs: MemoryInputs, frame_only: bool = False) -> None:
        self.inputs, self.frame_only = inputs, frame_only
        self._answerer = None  # built at the first question: the memory's scale depends on the env's spec

    def answerer(self) -> Any:
        """The :class:`~vla.questions.answering.MemoryAnswerer`, with the inputs' profile and memory overrides."""
        from vla.questions.answering import AnswererConfig, MemoryAnswerer

        if self._answerer is None:
            cfg = self.inputs.config
            tabletop = not self.inputs.mobile_base or cfg.memory == "tabletop"
            self._answerer = MemoryAnswerer(
                AnswererConfig(
                    tabletop=tabletop,
                    perception=cfg.perception,
                    overrides=cfg.memory_overrides,
                    frame_only=self.frame_only,
                )
            )
        return self._answerer

    def __call__(self, question: Any) -> str:
        return self.answerer().answer(question, live=self.inputs.memory)


class WithMemory:
    def __init__(
        self, agent: Any, inputs: MemoryInputs, answers: str = "memory", memory_answers: MemoryAnswers | None = None
    ) -> None:
        if answers not in ("memory", "agent"):
            raise ValueError(f"answers must be 'memory' or 'agent', got {answers!r}")
        self.agent, self.inputs, self.answers = agent, inputs, answers
        self.memory_answers = memory_answers if memory_answers is not None else MemoryAnswers(inputs)
        self.name = f"{getattr(agent, 'name', type(agent).__name__)}+memory"
        self.privileged = is_privileged(agent)

    def bind(self, env: Any) -> None:
        if not self.privileged:
            raise RuntimeError("WithMemory.bind: the wrapped agent is not privileged and must not receive the env")
        self.agent.bind(env)

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self.inputs.seed(seed)
        if isinstance(self.agent, Seedable):
            self.agent.seed(seed)

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        self.inputs.reset(spec)
        self.agent.reset(instruction, spec)

    def act(self, observation: Observation) -> np.ndarray:
        return self.agent.act(self.inputs(observation))

    def answer(self, question: Any) -> str:
        return self.memory_answers(question) if self.answers == "memory" else self.agent.answer(question)

    @property
    def memory(self):
        return self.inputs.memory

    def live_memory(self):
        return self.inputs.live_memory()

    def live_map(self) -> np.ndarray | None:
        return self.inputs.live_map()
