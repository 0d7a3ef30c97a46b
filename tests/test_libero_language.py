"""The language check (``env.instruction=distractor``, envs/libero/language.py): each libero_spatial scene
given the instruction of the task whose bowl stands there as the other bowl, its goal rewritten onto
that bowl, and the episode row saying which bowl was taken."""

import pytest

from envs.libero import language, suites
from envs.libero.env import LiberoEnv
from envs.registry import list_tasks
from tests.test_libero_expert import run_episode


def test_each_spatial_scene_has_a_task_naming_its_other_bowl():
    names = [t.instruction for t in suites.task_infos("libero_spatial")]
    for i in range(10):
        k, goal = language.distractor("libero_spatial", i)
        assert k != i and goal == [["on", "akita_black_bowl_2", "plate_1"]], (i, k, goal)
        # the other task's bowl starts where this scene's second bowl stands
        here = language._starts(language._problem("libero_spatial", i))["akita_black_bowl_2"]
        theirs = language._starts(language._problem("libero_spatial", k))["akita_black_bowl_1"]
        assert here == theirs, (i, k)
    assert language.distractor("libero_spatial", 0)[0] == names.index(
        "pick up the black bowl next to the ramekin and place it on the plate"
    )
    infos = list_tasks({"name": "libero", "suite": "libero_spatial", "instruction": "distractor"})
    assert [t.instruction for t in infos] == [names[language.distractor("libero_spatial", i)[0]] for i in range(10)]


def test_bad_instruction_options_are_refused_by_name():
    with pytest.raises(ValueError, match="env.instruction must be one of"):
        list_tasks({"name": "libero", "suite": "libero_spatial", "instruction": "shuffled"})
    with pytest.raises(ValueError, match="no task of libero_object names another"):
        LiberoEnv("libero_object", 0, render=False, instruction="distractor")


@pytest.mark.parametrize("instruction,bowl", [("own", "akita_black_bowl_1"), ("distractor", "akita_black_bowl_2")])
def test_the_goal_follows_the_instruction_and_the_row_says_which_bowl_was_taken(instruction, bowl):
    """~10 s each: the expert plans from the env's goal, so it takes the bowl the instruction names."""
    env = LiberoEnv("libero_spatial", 0, render=False, instruction=instruction)
    try:
        success, steps, _ = run_episode(env, 0)
        info_goal = env.sim_env.parsed_problem["goal_state"]
        text = env.instruction
        m = env._progress.metrics()
    finally:
        env.close()
    assert success, f"{instruction}: no success in {steps} steps"
    assert info_goal == [["on", bowl, "plate_1"]]
    assert ("next to the ramekin" in text) == (instruction == "distractor")
    assert m["took"] == m["goal_object"] == bowl and m["failed_stage"] == ""
