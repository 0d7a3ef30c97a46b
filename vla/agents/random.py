"""Uniform random actions (and, for questions, uniform random answers): the chance anchor."""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec


class RandomAgent:
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self._low: np.ndarray | None = None
        self._high: np.ndarray | None = None

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        # only the action bounds are read: a random agent knows what it may send, nothing else
        self._low, self._high = np.asarray(spec.action.low), np.asarray(spec.action.high)

    def reads_next(self) -> bool:
        return False  # uniform actions: the frames are never looked at

    def act(self, observation: Observation) -> np.ndarray:
        if self._low is None:
            raise RuntimeError(
                "RandomAgent needs reset(instruction, spec) before act(): the spec holds the action bounds"
            )
        return self.rng.uniform(self._low, self._high)

    def answer(self, question: Any) -> str:
        from vla.questions.answers import random_answer

        return random_answer(question, self.rng)
