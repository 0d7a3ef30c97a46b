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
