"""The ObjectNav stop protocol on the apartments: with ``stop_action`` an episode succeeds only when the
agent signals stop at the goal; passing by is reported separately (``reached``), and SPL per episode."""

from __future__ import annotations

import numpy as np

from envs.registry import make_env


def _env(stop: bool):
    return make_env(
        {
            "name": "house",
            "seed": 900001,
            "max_steps": 120,
            "use_meshes": False,
            "width": 64,
            "height": 64,
            "stop_action": stop,
        },
        0,
    )


def _drive_to_goal_with_expert(env, stop_at_end: bool):
    """Drive with the privileged expert's motion (first 3 dims) and never stop until told."""
    expert = env.expert()
    obs, info = env.reset(options={"trial": 0})
    expert.reset()
    for t in range(env.max_episode_steps):
        a = np.asarray(expert.act(obs), dtype=np.float64)
        if info["at_goal"]:
            return obs, info, t
        a[3] = 0.0  # never stop on the way
        obs, _, terminated, truncated, info = env.step(a)
        assert not terminated or info["stopped"]
    raise AssertionError("the expert never reached the goal")


def test_stop_is_required_and_passing_by_is_not_success():
    env = _env(True)
    try:
        assert env.env_spec.action.names == ("forward_m", "left_m", "yaw_rad", "stop")
        obs, info, t = _drive_to_goal_with_expert(env, True)
        # at the goal but not stopped: no success, the episode goes on
        assert info["at_goal"] and not info["success"] and info["episode_metrics"]["reached"]
        pose = env.agent_pose()
        obs, reward, terminated, truncated, info = env.step(np.array([0.2, 0.0, 0.0, 1.0]))  # stop (and try to move)
        assert terminated and info["success"] and reward == 1.0
        np.testing.assert_allclose(env.agent_pose(), pose)  # stopping does not move the base
        m = info["episode_metrics"]
        # SPL from the env's own path: geodesic / max(path, geodesic), computed independently from the trajectory
        path = float(np.sum(np.hypot(*np.diff(env.trajectory[:, :2], axis=0).T)))
        assert abs(m["path_m"] - path) < 1e-3 and abs(m["spl"] - m["geodesic_m"] / max(path, m["geodesic_m"])) < 1e-3
        # stopping far from the goal ends the episode as a failure
        env.reset(options={"trial": 0})
        _, _, terminated, _, info = env.step(np.array([0.0, 0.0, 0.0, 0.9]))
        assert terminated and not info["success"] and info["episode_metrics"]["spl"] == 0.0
    finally:
        env.close()


def test_without_stop_the_predicate_ends_the_episode():
    env = _env(False)
    try:
        assert env.env_spec.action.dim == 3
        expert = env.expert()
        obs, info = env.reset(options={"trial": 0})
        expert.reset()
        for _ in range(env.max_episode_steps):
            obs, _, terminated, truncated, info = env.step(expert.act(obs))
            if terminated or truncated:
                break
        assert terminated and info["success"] and info["at_goal"] and info["episode_metrics"]["reached"]
    finally:
        env.close()
