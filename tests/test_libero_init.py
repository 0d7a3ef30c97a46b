"""env.init_states=sampled: fresh placements from the task's BDDL regions, a function of the trial, never
the official init states (demonstrations from states the official evaluation does not use)."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_arm_init_noise_moves_the_arms_start_as_a_function_of_the_trial():
    # the official states' arm starts are spread (robosuite's default 0.02 rad noise at their recording);
    # env.arm_init_noise gives sampled states the same, reproducibly, and leaves the placement to the sampler
    cfg = {"name": "libero", "suite": "libero_spatial", "render": False, "hard_reset": False}
    still, noisy = (
        make_env({**cfg, "init_states": "sampled"}, 0),
        make_env({**cfg, "init_states": "sampled", "arm_init_noise": 0.02}, 0),
    )
    try:

        def hand(env, trial):
            obs, _ = env.reset(options={"trial": trial})
            return np.asarray(obs.state)[:3].copy()

        h_still = [hand(still, k) for k in range(3)]
        h_noisy = [hand(noisy, k) for k in range(3)]
        np.testing.assert_allclose(h_still[0], h_still[1], atol=1e-4)  # no noise: the arm always starts alike
        assert all(np.linalg.norm(h - h_still[0]) > 1e-3 for h in h_noisy)  # with noise: it moves
        assert np.linalg.norm(h_noisy[0] - h_noisy[1]) > 1e-3  # differently per trial
        np.testing.assert_allclose(hand(noisy, 0), h_noisy[0], atol=1e-6)  # and reproducibly
    finally:
        still.close()
        noisy.close()
    with pytest.raises(ValueError, match="arm_init_noise"):
        make_env({**cfg, "arm_init_noise": 0.02}, 0)  # an official state fixes the arm
    with pytest.raises(ValueError, match="arm_init_noise"):
        make_env({**cfg, "init_states": "sampled", "arm_init_noise": -1}, 0)
