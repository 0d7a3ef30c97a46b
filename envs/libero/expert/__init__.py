"""Scripted LIBERO expert: skills composed by a BDDL-goal planner (docs/LIBERO.md).

The expert is privileged: it reads the simulator (through :class:`~.sim.SimView`: poses,
collision geometry, ray casts, contacts, joints, LIBERO's own predicate evaluation) and emits the
same 7-dim delta-EEF actions a policy would (OSC_POSE in [-1, 1]; the gripper -1 open / +1
close, always one of the two).

Modules: ``geometry`` (gripper model, box overlap), ``sim`` (the handle to the simulator),
``control`` (motion primitives), ``grasp`` (grasp planning), ``placement`` (where to put things),
``skill`` (the skill protocol), ``pick_place``, ``knob``, ``drawer``, ``door``, ``push``,
``planner`` (goal predicates -> ordered sub-goals -> skills).
"""

from .geometry import Grasp, box_separation
from .planner import LiberoExpert, order_goals

__all__ = ["Grasp", "LiberoExpert", "box_separation", "order_goals"]
