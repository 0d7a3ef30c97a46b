"""The memory suite ``libero_mem`` (envs/libero/mem/): LIBERO's own code loads every task from its
BDDL file, the goal's region for the cream cheese is the bowl's initial region, and the suite goes
through the same paths as the official ones (task list, step limit, sampled init states)."""

import numpy as np
import pytest

from envs.libero import suites
from envs.libero.config import SAMPLED_TRIALS
from envs.libero.env import LiberoEnv
from envs.libero.mem import SUITE, tasks
from envs.registry import list_tasks, make_env

from tests.test_libero_expert import run_episode

MEM = {"name": "libero", "suite": SUITE, "init_states": "sampled"}


def test_bddl_files_are_what_the_template_builds():
    """The committed files are the generator's output (python -m envs.libero.mem.tasks rewrites them)."""
    files = sorted(p.name for p in tasks.BDDL_DIR.glob("*.bddl"))
    assert files == sorted(f"{t.name}.bddl" for t in tasks.TASKS)
    for t in tasks.TASKS:
        assert tasks.path(t).read_text() == tasks.bddl(t), t.name


def test_task_list_and_protocol():
    infos = list_tasks(MEM)
    assert [t.name for t in infos] == [t.name for t in tasks.TASKS]
    assert [t.instruction for t in infos] == [t.language for t in tasks.TASKS]
    assert all(t.max_steps == suites.MAX_STEPS[SUITE] and t.num_trials == SAMPLED_TRIALS for t in infos)
    # the two tasks of a pair: one instruction, the bowl starting in another spot
    pairs = {}
    for t in tasks.TASKS:
        pairs.setdefault(t.language, []).append(t.start)
    assert all(sorted(starts) == sorted(tasks.SPOTS) for starts in pairs.values()), pairs


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_env({**MEM, "init_states": "official"}, 0),
        lambda: LiberoEnv(SUITE, 0, render=False),
        lambda: list_tasks({"name": "libero", "suite": SUITE}),
    ],
)
def test_official_init_states_are_refused_with_the_way_out(make):
    with pytest.raises(ValueError, match="init_states=sampled"):
        make()


@pytest.fixture(scope="module")
def loaded():
    """Every task built by LIBERO's ControlEnv from its BDDL file and reset to sampled state 0."""
    out = {}
    for i, t in enumerate(tasks.TASKS):
        env = LiberoEnv(SUITE, i, render=False, init_states="sampled")
        try:
            _, info = env.reset(options={"trial": 0})
            inner = env.sim_env
            holds = {
                "bowl_on_recall": inner._eval_predicate(["on", tasks.BOWL, t.recall_region]),
                "cheese_on_recall": inner._eval_predicate(["on", tasks.CHEESE, t.recall_region]),
            }
            out[t.name] = (env.bddl_file, inner.parsed_problem, info, holds, env.instruction)
        finally:
            env.close()
    return out


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.name)
def test_task_loads_through_libero_and_recalls_the_start(loaded, task):
    bddl_file, problem, info, holds, instruction = loaded[task.name]
    assert bddl_file == str(tasks.path(task))
    assert problem["problem_name"] == tasks.PROBLEM.lower() and instruction == task.language
    init = [[w.lower() if k == 0 else w for k, w in enumerate(p)] for p in problem["initial_state"]]
    goal = problem["goal_state"]
    # the cheese's goal region is the region the bowl starts in, and the bowl must leave it
    (bowl_start,) = [p[2] for p in init if p[:2] == ["on", tasks.BOWL]]
    (cheese_goal,) = [p[2] for p in goal if p[:2] == ["on", tasks.CHEESE]]
    assert cheese_goal == bowl_start == task.recall_region
    (bowl_goal,) = [p for p in goal if p[1] == tasks.BOWL]
    assert bowl_goal[2] != bowl_start
    # the sampled placement put the bowl there and not the cheese: the goal does not hold at reset
    assert holds == {"bowl_on_recall": True, "cheese_on_recall": False}
    assert info["success"] is False
    # the other spot is declared in every task of the suite but is nobody's start
    other = [s for s in tasks.SPOTS if f"{tasks.TABLE}_{s}" != bowl_start]
    assert other and all(f"{tasks.TABLE}_{s}" in problem["regions"] for s in other)
    assert not any(p[2] == f"{tasks.TABLE}_{s}" for p in init if len(p) == 3 for s in other)


def test_pair_twins_differ_only_in_the_bowls_start():
    by_text = {}
    for t in tasks.TASKS:
        by_text.setdefault(t.language, []).append(t)
    assert len(by_text) == len(tasks.TASKS) // 2
    for a, b in by_text.values():
        la, lb = tasks.bddl(a).splitlines(), tasks.bddl(b).splitlines()
        assert len(la) == len(lb)
        differ = [(x.strip(), y.strip()) for x, y in zip(la, lb) if x != y]
        bowl_init = [(f"(On {tasks.BOWL} {r.recall_region})") for r in (a, b)]
        assert differ[0] == tuple(bowl_init), differ  # the bowl's start
        assert len(differ) == 2 and differ[1][0].startswith("(And") and a.start in differ[1][0]  # the goal


@pytest.mark.slow
def test_expert_solves_a_drawer_task_from_a_sampled_state():
    """~15 s: the bowl into the top drawer, the cheese where the bowl stood, the drawer closed."""
    env = LiberoEnv(SUITE, 1, render=False, init_states="sampled")
    try:
        success, steps, expert = run_episode(env, 0)
        cheese = env.sim_env.sim.data.body_xpos[env.sim_env.obj_body_id[tasks.CHEESE]][:2]
        spot = env.sim_env.sim.data.get_site_xpos(tasks.TASKS[1].recall_region)[:2]
    finally:
        env.close()
    assert success, f"no success in {steps} steps (phase {expert.phase}, {expert.regrasps} re-grasps)"
    assert np.linalg.norm(cheese - spot) < 0.025


def test_episode_metrics_name_the_stage_a_plate_episode_reached():
    """~5 s: the stages of the plate goal (pick bowl, bowl on plate, pick cheese, cheese on the bowl's
    start), reached one after the other by the expert; the row names the first stage not reached."""
    from envs.libero.progress import goal_stages

    task = tasks.TASKS[2]
    names = [n for n, _ in goal_stages([[p[0].lower(), *p[1:]] for p in task.goal])]
    assert names == [
        f"pick {tasks.BOWL}",
        f"on {tasks.BOWL} {tasks.PLATE}",
        f"pick {tasks.CHEESE}",
        f"on {tasks.CHEESE} {task.recall_region}",
    ]
    env = LiberoEnv(SUITE, 2, render=False, init_states="sampled")
    try:
        obs, info = env.reset(options={"trial": 0})
        expert = env.expert()
        expert.reset()
        seen = []  # (stages reached, failed stage) at each step, kept when it changes
        while True:
            obs, _, terminated, truncated, info = env.step(expert.act(obs))
            m = info["episode_metrics"]
            if not seen or seen[-1] != (m["stages_reached"], m["failed_stage"]):
                seen.append((m["stages_reached"], m["failed_stage"]))
            if terminated or truncated:
                break
    finally:
        env.close()
    assert info["success"]
    assert [s for s, _ in seen] == [0, 1, 2, 3, 4], seen  # each stage in turn, none skipped
    assert seen[0] == (0, f"pick {tasks.BOWL}") and seen[2] == (2, f"pick {tasks.CHEESE}")
    assert seen[-1] == (4, "") and m["stages"] == 4
