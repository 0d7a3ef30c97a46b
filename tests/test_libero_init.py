"""env.init_states=sampled: fresh placements from the task's BDDL regions, a function of the trial, never
the official init states (demonstrations from states the official evaluation does not use)."""

from __future__ import annotations

import numpy as np

from envs.registry import list_tasks, make_env


def _bowl(env, trial):
    env.reset(options={"trial": trial})
    return env.scene_truth().object("akita_black_bowl_1").position.copy()


def test_sampled_init_states_are_seeded_by_the_trial_and_are_not_the_official_ones():
    cfg = {"name": "libero", "suite": "libero_spatial", "render": False, "hard_reset": False}
    official, sampled = make_env(cfg, 0), make_env({**cfg, "init_states": "sampled"}, 0)
    try:
        s0, s1, s0_again = _bowl(sampled, 0), _bowl(sampled, 1), _bowl(sampled, 0)
        np.testing.assert_allclose(s0, s0_again)  # reproducible
        assert np.linalg.norm(s0 - s1) > 1e-3  # another trial, another placement
        for k in range(3):  # none of them is an official init state
            assert np.linalg.norm(_bowl(official, k) - s0) > 1e-3
        assert list_tasks({**cfg, "init_states": "sampled"})[0].num_trials > 50
    finally:
        official.close()
        sampled.close()


def test_a_sampled_trial_does_not_depend_on_the_resets_before_it():
    # the microwave starts open: its door's init sampler is one LIBERO re-adds on every reload
    cfg = {"name": "libero", "suite": "libero_10", "render": False, "init_states": "sampled"}
    env = make_env(cfg, 9)
    try:

        def state(trial):
            env.reset(options={"trial": trial})
            sim = env.sim_env.sim  # the model is reloaded on reset: look the joint up each time
            door = sim.data.qpos[sim.model.get_joint_qpos_addr("microwave_1_microjoint")]
            return np.array([*env.scene_truth().object("white_yellow_mug_1").position, door])

        first = state(1)
        state(0)
        np.testing.assert_allclose(state(1), first, atol=1e-6)
    finally:
        env.close()
