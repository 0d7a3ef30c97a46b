"""Does the policy follow the instruction? Another task's instruction in this task's scene
(``env.instruction=distractor``).

In libero_spatial every scene holds two black bowls: the task's (``akita_black_bowl_1``) and another
(``akita_black_bowl_2``), which stands where some other task's bowl starts (task 0's second bowl is
"next to the ramekin", task 5's target). Given that other task's instruction in this scene, a policy
that reads the instruction picks the second bowl; one that recognises the scene picks its usual bowl.
This module finds, from the BDDL files alone, for a task's scene the task whose goal object starts
where one of the scene's other objects of the same category starts (the same relation and region
name), and rewrites that task's goal onto this scene's object: the episode's success is then the
instruction followed. The episode row's ``took`` (:mod:`envs.libero.progress`) says which object of
the category met the goal predicate, so a confusion table needs no video.
"""

from __future__ import annotations

from functools import lru_cache

from . import suites
from .progress import category, first_move


@lru_cache(maxsize=None)
def _problem(suite: str, task_id: int) -> dict:
    from libero.libero.envs.bddl_utils import robosuite_parse_problem

    return robosuite_parse_problem(suites.benchmark(suite).get_task_bddl_file_path(task_id))


def _moved(problem: dict) -> str | None:
    """The object the goal's first move (``On`` / ``In``) puts somewhere."""
    move = first_move(problem["goal_state"])
    return move[1] if move else None


def _starts(problem: dict) -> dict[str, tuple[str, str]]:
    return {p[1]: (p[0].lower(), p[2]) for p in problem["initial_state"] if len(p) == 3}


def distractor(suite: str, task_id: int) -> tuple[int, list[list[str]]]:
    """``(k, goal)``: task ``k``'s instruction names another object of this scene (its goal object starts
    where that object starts here), and ``goal`` is task ``k``'s goal on this scene's objects. Raises
    ValueError when no task of the suite names another object of this scene."""
    mine = _problem(suite, task_id)
    target = _moved(mine)
    here = _starts(mine)
    names = set(here) | {o for objs in mine["objects"].values() for o in objs}
    names |= {o for objs in mine["fixtures"].values() for o in objs} | set(mine["regions"])
    others = {o: s for o, s in here.items() if target and o != target and category(o) == category(target)}
    for k in range(suites.benchmark(suite).get_num_tasks()):
        if k == task_id:
            continue
        theirs = _problem(suite, k)
        obj = _moved(theirs)
        if obj is None or category(obj) != category(target or ""):
            continue
        start = _starts(theirs).get(obj)
        for o, s in sorted(others.items()):
            if s != start:
                continue
            goal = [[o if x == obj else x for x in g] for g in theirs["goal_state"]]
            if all(x in names for g in goal for x in g[1:]):
                return k, goal
    raise ValueError(
        f"env.instruction=distractor: no task of {suite} names another {category(target or '?')} of task "
        f"{task_id}'s scene (the suite that has one per scene: libero_spatial)"
    )
