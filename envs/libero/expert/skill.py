"""The skill protocol: a small state machine that emits one action per step until it is done.

A skill is built for one sub-goal (``PickPlace(view, "bowl_1", "plate_1")``, ``OpenDrawer(...)``)
and driven by the planner: ``act()`` every step while ``status == "running"``; then ``"done"``
(it believes its sub-goal reached: the planner checks the predicate) or ``"failed"`` (with a
``reason``). ``retry()`` starts it over, keeping what it learnt (e.g. grasp sides that failed).
"""

from __future__ import annotations

import numpy as np

from .control import Progress
from .sim import SimView


class Skill:
    name = "skill"

    def __init__(self, view: SimView) -> None:
        self.view = view
        self.status = "running"
        self.reason = ""
        self.phase = "start"
        self.t_phase = 0
        self.steps = 0
        self.attempts = 0
        self.progress = Progress()

    # ------------------------------------------------------------------ driving
    def act(self) -> np.ndarray | None:
        """The next action, or None when the skill ended without one (then the planner decides
        what comes next in the same step)."""
        self.t_phase += 1
        self.steps += 1
        return self.step()

    def step(self) -> np.ndarray | None:  # pragma: no cover - every skill overrides it
        raise NotImplementedError

    def retry(self) -> None:
        """Start over after the planner found the sub-goal not reached."""
        self.attempts += 1
        self.status, self.reason = "running", ""
        self.start_phase("start")

    # ------------------------------------------------------------------ helpers
    def start_phase(self, phase: str) -> None:
        self.phase, self.t_phase = phase, 0
        self.progress = Progress()
        self.on_phase(phase)

    def on_phase(self, phase: str) -> None:
        """Hook: per-phase state to reset."""

    def finish(self) -> None:
        """Mark the skill done (no action: the planner asks the next skill in the same step)."""
        self.status = "done"

    def fail(self, reason: str) -> None:
        self.status, self.reason = "failed", reason

    def describe(self) -> str:
        return f"{self.name}[{self.phase}]"
