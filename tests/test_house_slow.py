"""envs/house, slow: the expert over many test-split episodes, primitives-only scenes (run with -m slow)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.house.config import HouseConfig, split_seeds
from envs.house.env import HouseEnv

pytestmark = pytest.mark.slow


def run_expert(env: HouseEnv, trial: int) -> dict:
    obs, _ = env.reset(options={"trial": trial})
    expert = env.expert()
    expert.reset()
    info = {}
    for _ in range(env.max_episode_steps):
        obs, _, term, trunc, info = env.step(expert.act(obs))
        assert not info["blocked"]
        if term or trunc:
            break
    return info


def test_expert_success_on_test_scenes():
    results = []
    for seed in split_seeds("test", 5):
        env = HouseEnv(HouseConfig(seed=seed))
        try:
            results += [run_expert(env, t)["success"] for t in range(4)]
        finally:
            env.close()
    assert np.mean(results) >= 0.95, results


def test_primitives_only_and_other_camera():
    env = HouseEnv(
        HouseConfig(seed=900007, use_meshes=False, width=320, height=240, camera_pitch_deg=15.0, camera_fovy=70.0)
    )
    try:
        assert env.scene.model.nmesh == 0
        obs, _ = env.reset(options={"trial": 0})
        f = obs.cameras["ego"]
        assert f.rgb.shape == (240, 320, 3)
        assert run_expert(env, 1)["success"]
    finally:
        env.close()


@pytest.mark.parametrize(
    "overrides",
    [{"max_left_m": 0.0}, {"agent_radius": 0.3}, {"max_turn_deg": 10.0, "max_forward_m": 0.1, "max_steps": 600}],
)
def test_expert_under_other_agent_limits(overrides):
    env = HouseEnv(HouseConfig(seed=900002, **overrides))
    try:
        assert all(run_expert(env, t)["success"] for t in range(3))
        route = env.exploration_route()
        assert {r for r in route.rooms if r} == {r.name for r in env.scene.spec.rooms}
    finally:
        env.close()
