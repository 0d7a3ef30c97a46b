"""Routes on the memory's map (vla/navigation/routes.py) on real apartments: the target's route
drives the base exactly as the navigator does on the same path, the follower of the routes alone
reaches its target and signals stop, and the routes reach a policy as memory inputs."""

from __future__ import annotations

import numpy as np
import pytest

from envs.control import step_towards


def _env(split="test", max_steps=200, stop=False):
    from envs.registry import make_env
    from vla.config import compose

    cfg = compose("rollout", ["env=house"])["env"]
    cfg.update(split=split, num_scenes=1, num_trials=10, max_steps=max_steps, use_meshes=False, stop_action=stop)
    return make_env(cfg, 0)


def _nearest_trial(env) -> int:
    geo = {}
    for k in range(6):
        _, info = env.reset(options={"trial": k})
        geo[k] = info["geodesic_start_m"]
    return min(geo, key=geo.get)


def test_the_targets_route_drives_as_the_navigator_does():
    """The navigator that replans every step (map-deciding: no look-around, no hysteresis) drives; at
    every step it heads for the target along a fresh path, before any bump, the action towards the
    target route's point is the navigator's own, to the bit (same layers, grid, planner, pursuit)."""
    from vla.agents.memory import MemoryAgent
    from vla.navigation.routes import MapRoutes

    env = _env()
    try:
        trial = _nearest_trial(env)
        agent = MemoryAgent(seed=0, navigator={"initial_turns": 0, "replan_every": 1, "switch_margin_m": 0.0})
        obs, _ = env.reset(options={"trial": trial})
        agent.reset(obs.instruction, env.env_spec)
        routes = MapRoutes(agent.navigator.config)
        routes.reset(obs.instruction)
        compared, bumped = 0, False
        for _ in range(150):
            action = agent.act(obs)
            nav, frame = agent.navigator, next(iter(obs.cameras.values()))
            pose = np.asarray(obs.state, dtype=np.float64)[:3]
            bumped |= bool(obs.sensors.get("blocked", False))
            routes.observe(frame, pose, bool(obs.sensors.get("blocked", False)))
            rows = routes.routes(agent.memory, frame, pose)
            if not bumped and nav.goal is not None and nav.goal.kind == "target" and not nav.goal.arrived:
                target = [r for r in rows if r.kind == "target"]
                assert target, "the navigator has a way to its target: so must the routes"
                np.testing.assert_array_equal(step_towards(pose, target[0].point, nav.limits), action)
                compared += 1
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        assert compared >= 5
    finally:
        env.close()


def test_the_route_follower_reaches_a_nearby_target_and_stops():
    """``agent.follow=routes`` on a real apartment with the stop protocol: success needs the stop."""
    from vla.agents.memory import MemoryAgent

    env = _env(stop=True)
    try:
        trial = _nearest_trial(env)
        agent = MemoryAgent(seed=0, follow="routes")
        obs, info = env.reset(options={"trial": trial})
        agent.reset(obs.instruction, env.env_spec)
        for _ in range(200):
            action = agent.act(obs)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert info["success"] and action[3] == 1.0 and agent.navigator.phase == "done"
    finally:
        env.close()
    with pytest.raises(ValueError, match="agent.follow"):
        MemoryAgent(follow="teleport")


def test_routes_as_memory_inputs():
    """With ``routes`` the memory inputs carry the routes and their words after the table; nothing to
    route to before the first frame, no target route for an instruction without a target."""
    from vla.navigation.routes import MapRoutes
    from vla.transforms.memory import MemoryInputs, MemoryInputsConfig

    env = _env()
    try:
        obs, _ = env.reset(options={"trial": 0})
        inputs = MemoryInputs(MemoryInputsConfig(inputs=("objects", "text", "routes"), map_size=(64, 64)))
        inputs.reset(env.env_spec)
        assert inputs.entries(obs.instruction) == {"frames": 0}
        for _ in range(3):
            m = inputs(obs).memory
            obs, *_ = env.step(np.array([0.0, 0.0, 0.5]))
        kinds = list(m["routes/kind"])
        assert kinds and set(kinds) <= {"target", "frontier"} and kinds.count("target") <= 1
        assert len(m["routes/direction_deg"]) == len(m["routes/length_m"]) == len(kinds)
        assert m["text"].split("; routes: ")[1].count(" m") == len(kinds)
        assert np.all(np.abs(m["routes/direction_deg"]) <= 180) and np.all(m["routes/length_m"] >= 0)
        r = MapRoutes()
        r.reset("look around")  # not "go to the <category>": frontiers only
        frame = next(iter(obs.cameras.values()))
        r.observe(frame, np.asarray(obs.state)[:3])
        assert {x.kind for x in r.routes(inputs.memory, frame, np.asarray(obs.state)[:3])} <= {"frontier"}
    finally:
        env.close()
    with pytest.raises(ValueError, match="frontiers"):
        MapRoutes(frontiers=-1)
