"""``agent=dagger``: a learner acts, a teacher labels (DAgger's data collection).

Behaviour cloning trains on the states the teacher visits; a learner that errs reaches states no
demonstration shows, and its errors compound over a long episode. DAgger (Ross et al., 2011) rolls
the learner out, asks the teacher what it would have done in every state the learner visits, adds
those labelled states to the data and trains again. Here the learner is any agent (``learner``: an
agent config, e.g. ``{name: vla, checkpoint: ...}``), the teacher an agent that is not privileged
(``teacher``: e.g. ``{name: memory}``, the memory navigator, whose action is a function of the
memory it builds from the very frames the learner sees), and ``beta`` the probability of executing
the teacher's action instead of the learner's at a step (0: the learner always acts).

``noise`` (one standard deviation per action dimension) adds Gaussian noise to the executed action,
which the teacher still labels: with ``beta: 1`` and no learner that is DART's data collection
(Laskey et al., 2017), the teacher driving with perturbations so that the data shows it recovering
from states slightly off its own path, before any learner exists.

Every step both act on the observation; the executed action is returned, the teacher's is
:meth:`label` (:class:`~vla.agents.base.LabelsActions`), which ``record=DIR`` stores as the
demonstration's action (``executed_actions`` beside it). Record every episode, not only the
successful ones: ``vla-rollout ... agent=dagger record=DIR record_keep=all``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import ActionSpec, EnvSpec
from vla_common.strict import from_dict

from .base import Seedable, is_privileged


@dataclass(frozen=True)
class DAggerOptions:
    learner: dict[str, Any] | None = None  # the agent that acts (e.g. {name: vla, checkpoint: DIR})
    teacher: dict[str, Any] = field(default_factory=lambda: {"name": "memory"})  # the agent that labels
    beta: float = 0.0  # probability of executing the teacher's action at a step
    noise: list[float] | None = None  # std of Gaussian noise on the executed action, per dimension (DART)
    execute_bins: int = 0  # > 0: execute the bin centre a data.action_normalization=spec policy decodes (0: off)

    def __post_init__(self) -> None:
        if float(self.beta) < 1.0 and (not self.learner or "name" not in self.learner):
            raise ValueError(
                "agent=dagger needs agent.learner={name: ..., ...} (the agent that acts), "
                "unless agent.beta=1 (the teacher always acts, e.g. with agent.noise: DART)"
            )
        if not self.teacher or "name" not in self.teacher:
            raise ValueError("agent=dagger needs agent.teacher={name: ..., ...} (the agent that labels)")
        if not 0.0 <= float(self.beta) <= 1.0:
            raise ValueError(f"agent.beta must be in [0, 1], got {self.beta}")
        if self.noise is not None and (
            not len(self.noise) or any(not np.isfinite(float(x)) or float(x) < 0 for x in self.noise)
        ):
            raise ValueError(f"agent.noise must be one std >= 0 per action dimension, got {self.noise}")
        if (
            isinstance(self.execute_bins, bool)
            or int(self.execute_bins) != self.execute_bins
            or (self.execute_bins != 0 and self.execute_bins < 2)
        ):
            raise ValueError(f"agent.execute_bins must be 0 (off) or a number of bins >= 2, got {self.execute_bins!r}")


class DAggerAgent:
    name = "dagger"
    privileged = False

    def __init__(self, seed: int = 0, **options: Any) -> None:
        from . import make_agent

        self.options = from_dict(DAggerOptions, options, "dagger agent")
        self.teacher = make_agent(dict(self.options.teacher), seed=seed)
        learns = self.options.learner and self.options.beta < 1.0
        self.learner = make_agent(dict(self.options.learner), seed=seed) if learns else None
        for role, agent in (("learner", self.learner), ("teacher", self.teacher)):
            if agent is not None and is_privileged(agent):
                raise ValueError(
                    f"the DAgger {role} {type(agent).__name__} is privileged (it plans on scene truth): "
                    "labels must come from what the learner's sensors give"
                )
        self._rng = np.random.default_rng(seed)
        self._label: np.ndarray | None = None
        self._action: ActionSpec | None = None
        self._bins: Any = None  # the spec's statistics when execute_bins > 0

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self._rng = np.random.default_rng(seed)
        for agent in self._agents():
            if isinstance(agent, Seedable):
                agent.seed(seed)

    def _agents(self) -> list[Any]:
        return [a for a in (self.learner, self.teacher) if a is not None]

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        for agent in self._agents():
            agent.reset(instruction, spec)
        self._label = None
        self._action = spec.action
        if self.options.noise is not None and len(self.options.noise) != spec.action.dim:
            raise ValueError(
                f"agent.noise has {len(self.options.noise)} values for the env's {spec.action.dim}-dimensional "
                f"action [{', '.join(spec.action.names)}]"
            )
        if self.options.execute_bins:
            from vla.actions import ActionStats

            low, high = np.asarray(spec.action.low), np.asarray(spec.action.high)
            self._bins = ActionStats.from_actions(np.stack([low, high])).with_bounds(low, high)

    def act(self, observation: Observation) -> np.ndarray:
        # each agent gets its own copy: the memory transforms add entries to the observation they fuse
        teacher = np.asarray(self.teacher.act(_copy(observation)), dtype=np.float64)
        self._label = teacher
        executed = teacher
        if self.learner is not None:
            learner = np.asarray(self.learner.act(_copy(observation)), dtype=np.float64)
            executed = teacher if self._rng.random() < float(self.options.beta) else learner
        if self.options.noise is not None:
            executed = self._perturbed(executed)
        if self._bins is not None:
            from vla.actions import decoded

            executed = decoded(executed, self._bins, int(self.options.execute_bins))
        return executed

    def _perturbed(self, action: np.ndarray) -> np.ndarray:
        std = np.asarray(self.options.noise, dtype=np.float64)
        return self._action.check(action + self._rng.normal(0.0, 1.0, action.shape) * std)  # clipped to bounds

    def label(self) -> np.ndarray | None:
        return self._label

    def answer(self, question: Any) -> str:
        return (self.learner or self.teacher).answer(question)

    def live_map(self) -> np.ndarray | None:
        draw = getattr(self.learner, "live_map", None) or getattr(self.teacher, "live_map", None)
        return draw() if callable(draw) else None


def _copy(observation: Observation) -> Observation:
    from dataclasses import replace

    return replace(observation, memory=dict(observation.memory))
