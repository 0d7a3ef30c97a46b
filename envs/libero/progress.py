"""How far a LIBERO episode got through its goal: the stage where a failure happened.

A task's goal is a conjunction of BDDL predicates (``(On bowl plate) (On cheese spot)``); success is
all of them at one step. Its *stages*, in the goal's order: for each predicate that moves an object
onto or into something (``On``, ``In``), first ``pick <object>`` -- the object lifted at least
:data:`LIFT_M` above where it rested at reset -- then the predicate itself; a predicate on one object
(``Close drawer``) is one stage. A stage is *reached* when it held at some step (a bowl placed and
knocked off again reached its place). The episode row gets

* ``stages``: how many the goal has; ``stages_reached``: how many of them were reached, counted in
  order up to the first one that never was;
* ``failed_stage``: the name of that first one (``"pick akita_black_bowl_1"``), ``"together"`` when
  every stage was reached but never all predicates at one step, ``""`` on success;
* ``took``: the first object of the goal object's category for which the goal's first move held at
  some step (``akita_black_bowl_2`` on the plate where the goal wanted ``akita_black_bowl_1``), ``""``
  for none: which bowl a policy took, for the language check (:mod:`envs.libero.language`); beside it
  ``goal_object``, the one the goal names.

Read from the simulator's state after each step (LIBERO's own predicate functions); nothing rendered.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

LIFT_M = 0.03  # an object counts as picked once lifted this far above its resting height
MOVES = ("on", "in")  # binary predicates that put their first object somewhere


def category(name: str) -> str:
    """An object's category: its BDDL name without the instance number (``akita_black_bowl_2`` ->
    ``akita_black_bowl``)."""
    return re.sub(r"_\d+$", "", name)


def first_move(goal: list[list[str]]) -> list[str] | None:
    """The goal's first predicate that puts an object somewhere (``On`` / ``In``), if any."""
    return next((list(p) for p in goal if len(p) == 3 and p[0].lower() in MOVES), None)


def goal_stages(goal: list[list[str]]) -> list[tuple[str, list[str]]]:
    """The goal's stages, in order: ``(name, predicate)``; a pick's predicate is ``["pick", object]``."""
    out: list[tuple[str, list[str]]] = []
    for pred in goal:
        if len(pred) == 3 and pred[0].lower() in MOVES:
            out.append((f"pick {pred[1]}", ["pick", pred[1]]))
        out.append((" ".join(pred), list(pred)))
    return out


class GoalProgress:
    """Tracks one episode's stages on a LIBERO problem env (``sim_env``: its ``parsed_problem``,
    ``_eval_predicate`` and ``object_states_dict``). :meth:`reset` after the env's reset, :meth:`update`
    after every step, :meth:`metrics` for the episode row."""

    def __init__(self, problem: Any):
        self.problem = problem
        goal = [list(p) for p in problem.parsed_problem["goal_state"]]
        self.stages = goal_stages(goal)
        self.first: list[int | None] = [None] * len(self.stages)
        self.rest_z: dict[str, float] = {}
        self.success = False
        move = self.move = first_move(goal)
        self.alike = sorted(o for o in problem.object_states_dict if category(o) == category(move[1])) if move else []
        self.took = ""

    def _z(self, obj: str) -> float:
        return float(np.asarray(self.problem.object_states_dict[obj].get_geom_state()["pos"])[2])

    def reset(self) -> None:
        self.first = [None] * len(self.stages)
        self.rest_z = {p[1]: self._z(p[1]) for _, p in self.stages if p[0] == "pick"}
        self.success = False
        self.took = ""

    def update(self, step: int, success: bool) -> None:
        self.success = self.success or bool(success)
        for i, (_, pred) in enumerate(self.stages):
            if self.first[i] is not None:
                continue
            if pred[0] == "pick":
                held = self._z(pred[1]) >= self.rest_z[pred[1]] + LIFT_M
            else:
                held = bool(self.problem._eval_predicate(pred))
            if held:
                self.first[i] = step
        if not self.took and self.move is not None:
            for o in self.alike:
                if self.problem._eval_predicate([self.move[0], o, self.move[2]]):
                    self.took = o
                    break

    def metrics(self) -> dict[str, Any]:
        reached = 0
        while reached < len(self.stages) and self.first[reached] is not None:
            reached += 1
        if self.success:
            failed = ""
        elif reached < len(self.stages):
            failed = self.stages[reached][0]
        else:
            failed = "together"
        named = self.move[1] if self.move is not None else ""
        return {
            "stages": len(self.stages),
            "stages_reached": reached,
            "failed_stage": failed,
            "took": self.took,
            "goal_object": named,
        }
