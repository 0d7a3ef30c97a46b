"""The env's own scripted expert as an agent (privileged: it reads scene truth; for data and sanity)."""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec

from .base import reads_next_frame


class ScriptedAgent:
    name = "scripted"
    privileged = True  # the loop binds it to the env; its expert plans on scene truth

    def __init__(self, seed: int = 0) -> None:
        self._env = None
        self._expert = None

    def seed(self, seed: int | tuple[int, ...]) -> None:
        pass  # deterministic

    def bind(self, env: Any) -> None:
        if env is not self._env:
            self._env, self._expert = env, env.expert()

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        if self._expert is None:
            raise RuntimeError("ScriptedAgent is privileged: bind(env) before reset() (the rollout loop does)")
        self._expert.reset()

    def act(self, observation: Observation) -> np.ndarray:
        return self._expert.act(observation)

    def reads_next(self) -> bool:
        """Whether the expert reads the frames (an expert that plans on scene truth alone says no)."""
        return self._expert is None or reads_next_frame(self._expert)

    def answer(self, question: Any) -> str:
        raise NotImplementedError("the scripted expert does not answer questions; use agent=memory or agent=random")
