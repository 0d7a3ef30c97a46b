"""The BDDL-goal planner: a task's goal predicates become an ordered list of sub-goals, each driven
by one skill, checked with LIBERO's own predicate evaluation.

Ordering rules (the goals of a task are a conjunction; the order is ours):

1. an articulated object is opened (after the closes of rule 2) when a goal puts something *in*
   it and it is closed at reset (an implicit sub-goal: "open the top drawer and put the bowl
   inside" names only ``In``);
2. ``close`` goals of articulations nothing is put into (an open drawer above another one is in
   the way of the hand that closes the lower one: "close the bottom drawer and open the top one"),
   then explicit ``open`` goals, then ``turnon`` / ``turnoff``, then the ``on`` / ``in`` goals in
   the order the task lists them, then the ``close`` goals of what was just filled ("put the bowl
   in the drawer and close it").

At every skill's end the planner evaluates all predicates again and runs the first sub-goal that
does not hold (a retry of its skill when it has one: skills keep what they learnt), so a goal
undone by a later skill is redone. An implicit ``open`` counts only while its dependent goal
does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .door import CloseDoor, OpenDoor
from .drawer import CloseDrawer, OpenDrawer
from .knob import TurnKnob
from .control import move
from .insert import InsertPlace, find_cover
from .pick_place import PickPlace
from .placement import assign_slots
from .push import Push, is_pushable
from .sim import SimView
from .skill import Skill

PLACE = ("on", "in")
SETTLE_WAIT = 40  # steps the expert waits at most for a scene still in motion at the start
SETTLED_SPEED = 0.05  # m/s: the fastest object slower than this: the scene is at rest
PUSH_FLAT = True  # flat wide objects (a plate) are pushed


@dataclass
class SubGoal:
    predicate: list[str]
    implicit: bool = False  # not part of the task's goal: a precondition of ``needed_by``
    needed_by: list[str] | None = None
    skill: Skill | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.predicate[0].lower()

    def __str__(self) -> str:
        return " ".join(self.predicate) + (" (implicit)" if self.implicit else "")


def articulation_of(view: SimView, name: str) -> tuple[str, list[str]] | None:
    """(owner, joints) of the articulation a region or fixture moves with, or None: a drawer's
    region moves with its drawer's joint, a microwave's heating region with the door."""
    if view.is_site(name):
        joints = view.joints_of(name)
        if joints:
            return name, joints
        parent = view.site_parent(name)
        if parent and view.is_fixture(parent):
            kind = type(view.libero_object(parent)).__name__
            if kind == "Microwave":
                return parent, view.joints_of(parent)
        return None
    if view.is_fixture(name):
        joints = view.joints_of(name)
        return (name, joints) if joints else None
    return None


def order_goals(view: SimView) -> list[SubGoal]:
    goals = view.goal
    for p in goals:
        kind = p[0].lower()
        if kind in PLACE and len(p) == 3:
            continue
        if kind in ("open", "close", "turnon", "turnoff") and len(p) == 2:
            continue
        raise NotImplementedError(f"the expert has no skill for the goal predicate {p} of {view.task_name}")
    filled = {}
    for p in goals:
        if p[0].lower() == "in":
            art = articulation_of(view, p[2])
            if art is not None:
                filled.setdefault(art[0], []).append(p)
    opens, closes_first, turns, places, closes_last, implicit = [], [], [], [], [], []
    for p in goals:
        kind = p[0].lower()
        if kind == "open":
            opens.append(SubGoal(p))
        elif kind == "close":
            art = articulation_of(view, p[1])
            owner = art[0] if art else p[1]
            (closes_last if owner in filled else closes_first).append(SubGoal(p))
        elif kind in ("turnon", "turnoff"):
            turns.append(SubGoal(p))
        else:
            places.append(SubGoal(p))
    explicit_open = {articulation_of(view, g.predicate[1])[0] for g in opens if articulation_of(view, g.predicate[1])}
    for owner, preds in filled.items():
        if owner in explicit_open:
            continue
        if not view.holds(["open", owner]):
            implicit.append(SubGoal(["open", owner], implicit=True, needed_by=preds[0]))
    return closes_first + opens + implicit + turns + places + closes_last


def make_skill(view: SimView, goal: SubGoal) -> Skill:
    p = goal.predicate
    kind = goal.kind
    if kind == "on" and PUSH_FLAT and is_pushable(view, p[1], p[2]):
        return Push(view, p[1], p[2])
    if kind in PLACE:  # an InsertPlace instead once it starts, if a roof covers the target then
        return PickPlace(view, p[1], p[2], kind)
    if kind in ("turnon", "turnoff"):
        return TurnKnob(view, p[1], on=kind == "turnon")
    if kind in ("open", "close") and view.is_site(p[1]) and view.joints_of(p[1]):
        return OpenDrawer(view, p[1]) if kind == "open" else CloseDrawer(view, p[1])
    if kind in ("open", "close") and view.is_fixture(p[1]) and view.joints_of(p[1]):
        return OpenDoor(view, p[1]) if kind == "open" else CloseDoor(view, p[1])
    raise NotImplementedError(f"the expert has no skill for {p} in {view.task_name}")


class LiberoExpert:
    """Privileged scripted expert for LIBERO tasks: plans sub-goals from the BDDL goal and drives
    one skill at a time (``env.expert()``)."""

    def __init__(self, env) -> None:
        self.env = env
        self.view: SimView | None = None
        self.goals: list[SubGoal] = []
        self.current: SubGoal | None = None
        self.log: list[tuple[int, str]] = []  # (step, sub-goal started) for diagnostics
        self.t = 0

    def reset(self) -> None:
        self.view = SimView(self.env)
        self.goals = order_goals(self.view)
        for g in self.goals:  # build every skill now: an unsupported goal is refused at reset
            g.skill = make_skill(self.view, g)
        assign_slots(self.view, [g.skill.placement for g in self.goals if isinstance(g.skill, PickPlace)])
        self.current, self.log, self.t = None, [], 0

    # ------------------------------------------------------------------ diagnostics
    @property
    def phase(self) -> str:
        return self.current.skill.describe() if self.current else "idle"

    @property
    def regrasps(self) -> int:
        return sum(getattr(g.skill, "regrasps", 0) for g in self.goals)

    # ------------------------------------------------------------------ driving
    def _pending(self) -> SubGoal | None:
        for g in self.goals:
            if g.implicit:
                if not self.view.holds(g.needed_by) and not self.view.holds(g.predicate):
                    return g
                continue
            if not self.view.holds(g.predicate):
                return g
        return None

    def _cover_check(self, goal: SubGoal) -> None:
        """A pick-and-place about to start whose target has a roof over it (a microwave; not a
        drawer that was closed at reset and is open now) becomes an :class:`InsertPlace`."""
        skill = goal.skill
        if type(skill) is not PickPlace or skill.steps:
            return
        cover = find_cover(self.view, skill.placement, skill.obj)
        if cover is not None:
            goal.skill = InsertPlace(self.view, skill.obj, skill.target, skill.relation, cover, skill.placement)

    def reads_next(self) -> bool:
        return False  # it plans on the simulator's state (self.view), never on the observation's frames

    def act(self, obs=None) -> np.ndarray:
        if self.view is None:
            raise RuntimeError("call reset() before act()")
        self.t += 1
        if self.current is None and self.t <= SETTLE_WAIT and self.view.fastest_object() > SETTLED_SPEED:
            # some LIBERO init states start with objects in collision: they jump and fall during the
            # first steps. Plans made on a scene in flight go wrong, so wait for it to come to rest.
            pos, R = self.view.grip()
            return move(self.view, pos, R, -1.0, cap=0.3, symmetric=False)
        for _ in range(3):
            if self.current is None or self.current.skill.status != "running":
                nxt = self._pending()
                if nxt is None:
                    break
                if nxt.skill.status != "running":
                    nxt.skill.retry()
                self._cover_check(nxt)
                self.current = nxt
                self.log.append((self.t, str(nxt)))
            a = self.current.skill.act()
            if a is not None:
                return a
        pos, R = self.view.grip()  # every goal holds (or nothing to do this step): keep still, open
        return move(self.view, pos, R, -1.0, cap=0.3, symmetric=False)
