"""The agent protocol (DESIGN §3): what the rollout loop and the GST questioner talk to.

``reset(instruction)`` at the start of an episode, ``act(observation) -> action`` every step and
``answer(question) -> str`` when asked a spatial question mid-episode (free text, parsed by the
GST harness). A learned policy implements exactly this and drops into the loop unchanged.

Privileged agents (scripted experts) additionally implement ``bind(env)``; the loop calls it before
``reset`` so they can read scene truth. A policy never receives the env.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs.base import Observation


@runtime_checkable
class Agent(Protocol):
    name: str

    def reset(self, instruction: str) -> None: ...

    def act(self, observation: Observation) -> np.ndarray: ...

    def answer(self, question: Any) -> str: ...


@runtime_checkable
class PrivilegedAgent(Agent, Protocol):
    def bind(self, env: Any) -> None: ...
