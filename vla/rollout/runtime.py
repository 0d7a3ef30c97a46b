"""The closed loop: ``run_episode(env, agent, key, subscribers)`` (docs/ARCHITECTURE.md, "One frame").

The loop knows nothing about videos, logs, demonstrations, spatial questions or maps: those hang
off it as :class:`Subscriber`\\ s. The memory belongs to the agent. A learned policy, a scripted
expert or a random agent drop in unchanged.

What the agent gets: ``reset(instruction, env.env_spec)`` and one :class:`Observation` per step,
as its sensors make it: with a perception profile (``perception``; :mod:`envs.perception`) the
agent's observation has the profile's depth noise, detector errors (frame-local ids) and odometry
drift, while subscribers also see the env's exact one (``episode.observation``; what the agent got is
``episode.agent_observation``). Only an agent that declares itself privileged
(:func:`~vla.agents.base.is_privileged`: scripted experts) is bound to the env; every other agent never
receives it.

Frames are rendered only when read: with an env that renders on demand
(:class:`envs.base.RendersOnDemand`: LIBERO), no subscriber and exact perception, the loop asks the agent
after each ``act`` whether its next ``act`` reads the frames (:class:`~vla.agents.base.ReadsFrames`: a
chunk played open loop does not, nor a scripted expert) and the env skips the camera passes of the
steps nobody reads. Subscribers (videos, demonstrations, mid-episode questions, viewers) and perception
profiles (one noise stream over the frames) take every frame, so their runs render as before.

An env may report per-episode numbers in ``info["episode_metrics"]`` (a dict of numbers and bools,
e.g. the house env's ``spl`` and ``reached``): the final step's values go into the episode row.

Errors: an exception of the env or the agent fails the episode, with the error recorded in the
result (the caller decides whether the run goes on; the evaluator does). An
:class:`~vla.agents.base.InfrastructureError` (the agent's server is gone, ...) is marked as such
(``result.infra``): the episode ended, but not by the policy, and is not a failure of it. A subscriber that raises
does not fail the episode: its error is recorded in ``result.extra["subscriber_errors"]``, it gets
no more ``on_step`` calls in that episode, and its ``on_episode_end`` still runs (so it can clean
up), guarded the same way.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from envs.base import Observation, RendersOnDemand, VLAEnv

from ..agents.base import InfrastructureError, is_privileged, reads_next_frame


@dataclass
class Episode:
    """What subscribers see of the running episode (subscribers are trusted: they see the env)."""

    key: dict[str, Any]  # identifies the episode: env, suite, task_id, task, trial
    env: VLAEnv
    agent: Any
    instruction: str
    observation: Observation | None = None  # the env's own (exact) observation
    step: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    agent_observation: Observation | None = None  # what the agent received (its sensors' version)
    sensors: Any = None  # the robot's sensors (envs.perception.RobotSensors), None for exact perception


@dataclass
class EpisodeResult:
    success: bool
    steps: int
    seconds: float
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # subscribers may add fields (e.g. gst scores)
    infra: str | None = None  # the kind of infrastructure error that ended it (not a result of the policy)
    stops_run: bool = False  # that error would end every later episode too


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

    def reads_frames(self, episode: Episode) -> bool:
        """Whether this subscriber reads the camera frames of ``episode``'s every step (the default: the
        env then renders every step). One that returns False lets the env skip rendering the steps no
        one else reads (:class:`envs.base.RendersOnDemand`); asked once, after ``on_episode_start``."""
        return True

    def episode_logs(self, out: Path) -> list:
        """Side logs (:class:`vla.eval.sidelog.EpisodeLog`) this subscriber fills from
        ``result.extra``, e.g. ``gst.jsonl``; the evaluator writes and resumes them."""
        return []


def error_text(exc: BaseException) -> str:
    """``Type: message (at file:line)`` of an exception, for result rows."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


class _Guarded:
    """Calls subscriber hooks; a hook that raises is recorded and its subscriber muted for the episode."""

    def __init__(self, subscribers: Iterable[Subscriber]) -> None:
        self.subscribers = list(subscribers)
        self.muted: set[int] = set()
        self.errors: list[str] = []

    def read_frames(self, episode: Episode) -> bool:
        """Whether any subscriber not muted reads every frame of ``episode`` (one that does not say, or whose
        answer raises, does)."""
        for i, s in enumerate(self.subscribers):
            if i in self.muted:
                continue
            reads = getattr(s, "reads_frames", None)  # subscribers need not derive from Subscriber
            if reads is None:
                return True
            try:
                if reads(episode):
                    return True
            except Exception as exc:  # noqa: BLE001 - as a hook that raises
                self.muted.add(i)
                self.errors.append(f"{type(s).__name__}.reads_frames: {error_text(exc)}")
                return True
        return False

    def call(self, hook: str, *args: Any) -> None:
        for i, s in enumerate(self.subscribers):
            if i in self.muted and hook != "on_episode_end":
                continue
            try:
                getattr(s, hook)(*args)
            except Exception as exc:  # noqa: BLE001 - a broken subscriber must not fail the episode
                self.muted.add(i)
                self.errors.append(f"{type(s).__name__}.{hook}: {error_text(exc)}")


def run_episode(
    env: VLAEnv,
    agent: Any,
    key: dict[str, Any],
    subscribers: Iterable[Subscriber] = (),
    seed: int | None = None,
    perception: Any = None,
) -> EpisodeResult:
    """Run one episode: reset, then act/step until success, truncation or ``env.max_episode_steps``.
    ``perception``: a profile (name, config dict or :class:`~spatial_memory.perception.PerceptionProfile`;
    None = the env's exact observations) applied to what the agent receives."""
    subs = _Guarded(subscribers)
    t0 = time.perf_counter()
    episode = Episode(key=key, env=env, agent=agent, instruction="")
    success, error, infra = False, None, None
    try:
        sensors = _sensors(perception, key, env)
        episode.sensors = sensors
        if is_privileged(agent):
            agent.bind(env)
        obs, info = env.reset(seed=seed, options={"trial": key["trial"]})
        episode.instruction, episode.observation, episode.info = env.instruction, obs, info
        episode.agent_observation = sensors(obs) if sensors is not None else obs
        agent.reset(env.instruction, env.env_spec)
        subs.call("on_episode_start", episode)
        # render only what is read: no subscriber that takes every frame (videos of this episode,
        # demonstrations, questions, viewers), exact perception (a profile's noise is one stream over the
        # frames), and the agent's word
        on_demand = isinstance(env, RendersOnDemand) and not subs.read_frames(episode) and sensors is None
        for _ in range(env.max_episode_steps):
            action = np.asarray(agent.act(episode.agent_observation))
            if on_demand:
                env.render_next(reads_next_frame(agent))
            obs, reward, terminated, truncated, info = env.step(action)
            episode.step += 1
            episode.observation, episode.info = obs, info
            episode.agent_observation = sensors(obs) if sensors is not None else obs
            subs.call("on_step", episode, action, obs, reward, info)
            if terminated or truncated:
                break
        success = bool(episode.info.get("success", False))
    except InfrastructureError as exc:  # not the policy's doing: the evaluator does not count it
        error, infra = error_text(exc), exc
    except Exception as exc:  # noqa: BLE001 - any failure of the env or the agent fails this episode only
        error = error_text(exc)
    result = EpisodeResult(
        success=success and error is None, steps=episode.step, seconds=time.perf_counter() - t0, error=error
    )
    if infra is not None:
        result.infra, result.stops_run = infra.kind, bool(infra.stops_run)
    metrics = episode.info.get("episode_metrics")
    if isinstance(metrics, dict):  # the env's per-episode numbers (e.g. SPL), kept in the episode row
        result.extra.update(metrics)
    subs.call("on_episode_end", episode, result)
    if subs.errors:
        result.extra["subscriber_errors"] = subs.errors
    result.seconds = time.perf_counter() - t0
    return result


def _sensors(perception: Any, key: dict[str, Any], env: VLAEnv):
    """The robot's sensors for one episode (None for the env's exact perception)."""
    if perception is None:
        return None
    from envs.perception import RobotSensors, perception_profile

    profile = perception_profile(perception)
    if profile.exact:
        return None
    scene = (key.get("suite", key.get("env")), key.get("task_id"))
    return RobotSensors(profile, (*scene, key.get("trial")), env.env_spec, scene=scene)
