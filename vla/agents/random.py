"""Uniform random actions (and, for questions, uniform random answers): the chance anchor."""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.base import Observation


class RandomAgent:
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self._space = None

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self.rng = np.random.default_rng(seed)

    def bind(self, env: Any) -> None:
        # only the action space's bounds are read: a random agent knows what it may send, nothing else
        self._space = env.action_space

    def reset(self, instruction: str) -> None:
        pass

    def act(self, observation: Observation) -> np.ndarray:
        if self._space is None:
            raise RuntimeError("RandomAgent needs the env's action space (the rollout loop binds it)")
        return self.rng.uniform(self._space.low, self._space.high)

    def answer(self, question: Any) -> str:
        from vla.gst.answers import random_answer  # the answer spaces live with the GST harness

        return random_answer(question, self.rng)
