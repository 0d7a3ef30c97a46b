"""The agent protocol: what the rollout loop, the GST questioner and the server talk to.

``reset(instruction, spec)`` at the start of an episode (``spec``: the env's
:class:`~envs.spec.EnvSpec` -- action bounds, cameras, state layout; the only thing of the env a
policy receives), ``act(observation) -> action`` every step and ``answer(question) -> str`` when
asked a spatial question (free text, parsed by the GST harness). A learned policy implements
exactly this and drops into the loop unchanged.

**Privileged agents** (scripted experts, which plan on scene truth) declare ``privileged = True``
and implement ``bind(env)``; the loop calls ``bind`` before ``reset`` for them and for no one
else: a non-privileged agent never receives the env (the loop checks, see
:func:`vla.rollout.runtime.run_episode`).

Optional capabilities are declared protocols, checked with ``isinstance`` (never ``hasattr``):
:class:`Seedable` (per-episode seeds from the evaluator), :class:`DrawsLiveMap` (a picture of the
agent's map for videos), :class:`HasLiveMemory` (a live :class:`~spatial_memory.SpatialMemory`
that servers and viewers may query), :class:`LabelsActions` (a teacher's action for the step, which
a demonstration recorder stores instead of the executed one: DAgger), :class:`ReadsFrames` (whether
the next ``act`` reads the observation's camera frames: when no one does, an env that renders on
demand skips them).
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec


@runtime_checkable
class Agent(Protocol):
    name: str

    def reset(self, instruction: str, spec: EnvSpec) -> None: ...

    def act(self, observation: Observation) -> np.ndarray: ...

    def answer(self, question: Any) -> str: ...


@runtime_checkable
class PrivilegedAgent(Agent, Protocol):
    privileged: bool

    def bind(self, env: Any) -> None: ...


@runtime_checkable
class Seedable(Protocol):
    def seed(self, seed: int | tuple[int, ...]) -> None: ...


@runtime_checkable
class DrawsLiveMap(Protocol):
    def live_map(self) -> np.ndarray | None: ...


@runtime_checkable
class LabelsActions(Protocol):
    """``label()``: the action a teacher would have taken on the last observation given to ``act``
    (None: no label). A demonstration recorder stores it as the demonstration's action, whatever
    was executed: DAgger's data, the teacher's actions on the states the learner visits."""

    def label(self) -> np.ndarray | None: ...


@runtime_checkable
class HasLiveMemory(Protocol):
    """``live_memory()``: the agent's current :class:`~spatial_memory.SpatialMemory` (None before
    the first frame). Readers in other threads must query a ``snapshot()`` of it."""

    def live_memory(self) -> Any: ...


@runtime_checkable
class ReadsFrames(Protocol):
    """``reads_next()``: which camera frames the next ``act`` will read of the observation it gets (asked
    after each ``act``, before the env steps): all (True), none (False) or the cameras named. An agent
    that plays a queued chunk open loop, or plans on scene truth, says False, one whose memory fuses one
    camera between the policy's requests names it, and the env may skip rendering the rest
    (:class:`envs.base.RendersOnDemand`); an agent without this capability reads every frame."""

    def reads_next(self) -> bool | Collection[str]: ...


def reads_next_frame(agent: Any) -> bool | frozenset[str]:
    """Which camera frames ``agent``'s next ``act`` reads: True (all, also when it does not say), False
    (none) or the set of the cameras named."""
    if not isinstance(agent, ReadsFrames):
        return True
    wanted = agent.reads_next()
    return bool(wanted) if isinstance(wanted, (bool, np.bool_)) else frozenset(wanted)


class InfrastructureError(RuntimeError):
    """An episode ended by something outside the policy and its task (the policy's server, a worker
    process, an env that cannot be built): the episode says nothing about the policy. The evaluator
    keeps it out of success rates, lists it in ``infra_errors.jsonl`` and the summary, and runs it
    again on the next run of the same command. ``stops_run``: every later episode would end the
    same way, so the run stops with this reason."""

    kind = "infrastructure"
    stops_run = False


class AgentUnavailable(InfrastructureError):
    """The agent's server cannot be reached (refused, gone, no reply): the run stops."""

    kind = "agent_unavailable"
    stops_run = True


class AgentSessionLost(InfrastructureError):
    """The agent's server no longer has this episode's session (it restarted): the episode cannot go
    on; the next one starts afresh."""

    kind = "session_lost"


def is_privileged(agent: Any) -> bool:
    """Whether ``agent`` declared itself privileged (``privileged = True`` and a ``bind`` method)."""
    return getattr(agent, "privileged", False) is True and callable(getattr(agent, "bind", None))


def check_agent(agent: Any) -> Any:
    """``agent`` if it implements the protocol; a ``ValueError`` that says what is missing otherwise
    (at construction, not mid-episode)."""
    name = type(agent).__name__
    for method in ("reset", "act", "answer"):
        if not callable(getattr(agent, method, None)):
            raise ValueError(
                f"agent {name} has no {method}() method; agents implement reset(instruction, spec), "
                "act(obs), answer(question)"
            )
    try:
        params = [
            p
            for p in inspect.signature(agent.reset).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return agent
    if len(params) < 2 and not any(
        p.kind == p.VAR_POSITIONAL for p in inspect.signature(agent.reset).parameters.values()
    ):
        raise ValueError(
            f"agent {name}.reset() must take (instruction, spec): the EnvSpec replaces bind(env) "
            "for non-privileged agents"
        )
    if callable(getattr(agent, "bind", None)) and not isinstance(getattr(agent, "privileged", None), bool):
        # a bind() that would silently never be called; wrappers declare privileged = False explicitly
        raise ValueError(
            f"agent {name} has bind(env) but does not declare privileged = True (or False); a policy gets "
            "the EnvSpec in reset() instead"
        )
    return agent
