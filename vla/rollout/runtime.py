"""The closed loop: ``run_episode(env, agent, subscribers)`` (DESIGN §11).

The loop knows nothing about videos, logs, demonstrations, spatial questions or maps: those hang
off it as :class:`Subscriber`s. The memory belongs to the agent. A learned policy, a scripted
expert or a random agent drop in unchanged.

A simulator or agent exception fails the episode with the error recorded in the result; the
caller decides whether the run goes on (the evaluator does).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from envs.base import Observation, VLAEnv


@dataclass
class Episode:
    """What subscribers see of the running episode."""

    key: dict[str, Any]  # identifies the episode: env, suite, task_id, task, trial
    env: VLAEnv
    agent: Any
    instruction: str
    observation: Observation | None = None
    step: int = 0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeResult:
    success: bool
    steps: int
    seconds: float
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # subscribers may add fields (e.g. gst scores)


class Subscriber:
    """Base class with no-op hooks; override what you need."""

    def on_episode_start(self, episode: Episode) -> None:
        pass

    def on_step(
        self, episode: Episode, action: np.ndarray, observation: Observation, reward: float, info: dict
    ) -> None:
        pass

    def on_episode_end(self, episode: Episode, result: EpisodeResult) -> None:
        pass


def _error_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def run_episode(
    env: VLAEnv,
    agent: Any,
    key: dict[str, Any],
    subscribers: Iterable[Subscriber] = (),
    seed: int | None = None,
) -> EpisodeResult:
    """Run one episode: reset, then act/step until success, truncation or ``env.max_episode_steps``."""
    subscribers = list(subscribers)
    t0 = time.perf_counter()
    episode = Episode(key=key, env=env, agent=agent, instruction="")
    success, error = False, None
    try:
        if hasattr(agent, "bind"):
            agent.bind(env)
        obs, info = env.reset(seed=seed, options={"trial": key["trial"]})
        episode.instruction, episode.observation, episode.info = env.instruction, obs, info
        agent.reset(env.instruction)
        for s in subscribers:
            s.on_episode_start(episode)
        for _ in range(env.max_episode_steps):
            action = np.asarray(agent.act(obs))
            obs, reward, terminated, truncated, info = env.step(action)
            episode.step += 1
            episode.observation, episode.info = obs, info
            for s in subscribers:
                s.on_step(episode, action, obs, reward, info)
            if terminated or truncated:
                break
        success = bool(episode.info.get("success", False))
    except Exception as exc:  # noqa: BLE001 - any failure fails this episode only
        error = _error_text(exc)
    result = EpisodeResult(
        success=success and error is None, steps=episode.step, seconds=time.perf_counter() - t0, error=error
    )
    for s in subscribers:
        try:
            s.on_episode_end(episode, result)
        except Exception as exc:  # noqa: BLE001 - a broken subscriber must not lose the result
            msg = f"subscriber {type(s).__name__} failed: {_error_text(exc)}"
            result.error = f"{result.error}; {msg}" if result.error else msg
    result.seconds = time.perf_counter() - t0
    return result
