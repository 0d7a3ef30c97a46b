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
    from vla.agents.map_agent import MemoryAgent
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
    from vla.agents.map_agent import MemoryAgent

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
    from vla.transforms.map_inputs import MemoryInputs, MemoryInputsConfig

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
        from vla.transforms.map_inputs import route_features

        f = route_features({f"memory/{k}": v for k, v in m.items()})  # what a proprio token reads of them
        lead = np.radians(float(m["routes/direction_deg"][0]))
        np.testing.assert_allclose(f[:4], [1.0, kinds[0] == "target", np.sin(lead), np.cos(lead)], atol=1e-6)
        assert np.all(np.abs(f) <= 1.0)
        r = MapRoutes()
        r.reset("look around")  # not "go to the <category>": frontiers only
        frame = next(iter(obs.cameras.values()))
        r.observe(frame, np.asarray(obs.state)[:3])
        assert {x.kind for x in r.routes(inputs.memory, frame, np.asarray(obs.state)[:3])} <= {"frontier"}
    finally:
        env.close()
    with pytest.raises(ValueError, match="frontiers"):
        MapRoutes(frontiers=-1)


def _rows(kinds, cats, deg, length, objects=None):
    d = {
        "memory/routes/kind": np.array(kinds, dtype=np.str_),
        "memory/routes/category": np.array(cats, dtype=np.str_),
        "memory/routes/direction_deg": np.array(deg, dtype=np.float32),
        "memory/routes/length_m": np.array(length, dtype=np.float32),
    }
    if objects:
        cat, odeg, dist = zip(*objects)
        d.update(
            {
                "memory/objects/category": np.array(cat, dtype=np.str_),
                "memory/objects/direction_deg": np.array(odeg, dtype=np.float32),
                "memory/objects/distance_m": np.array(dist, dtype=np.float32),
            }
        )
    return d


def test_route_features_are_the_rows_as_numbers():
    """``proprio_keys=[memory/routes]``: per route [present, is target, sin, cos, length / 5 m capped at 1],
    the first two routes, then the target's table row [present, sin, cos, distance / 5 m]."""
    from vla.policy.inputs import InputConfig, proprio_vector
    from vla.transforms.map_inputs import ROUTE_FEATURES_DIM, route_features

    d = _rows(
        ["target", "frontier", "frontier"],
        ["mug", "unexplored", "unexplored"],
        [90.0, -30.0, 5.0],
        [2.5, 8.0, 1.0],
        objects=[("sofa", 10.0, 3.0), ("mug", 180.0, 1.0)],
    )
    want = [1, 1, 1, 0, 0.5, 1, 0, -0.5, np.sqrt(3) / 2, 1.0, 1, 0, -1, 0.2]
    assert ROUTE_FEATURES_DIM == len(want)
    np.testing.assert_allclose(route_features(d), want, atol=1e-6)
    # frontiers only (the memory has no target yet): the target's block stays empty
    only = route_features(_rows(["frontier"], ["unexplored"], [0.0], [1.0], objects=[("mug", 0.0, 1.0)]))
    np.testing.assert_allclose(only, [1, 0, 0, 1, 0.2] + [0] * 9, atol=1e-6)
    np.testing.assert_array_equal(route_features(_rows([], [], [], [])), np.zeros(ROUTE_FEATURES_DIM))
    with pytest.raises(ValueError, match="no memory/routes"):
        route_features({"memory/text": "nothing seen yet"})
    # the proprio token reads them after the named data keys, in order
    cfg = InputConfig(cameras=(), proprio="token", proprio_keys=("sensors/motion", "memory/routes"), augment=False)
    assert InputConfig.from_dict(cfg.to_dict()) == cfg
    got = proprio_vector({**d, "sensors/motion": np.array([0.1, 0.0, -0.2])}, cfg.proprio_keys)
    np.testing.assert_allclose(got, [0.1, 0.0, -0.2, *want], atol=1e-6)


def test_proprio_statistics_pass_the_route_features_through():
    """The routes' columns need no statistics (already in [-1, 1]): fixed bounds, mask False, so the
    normalisation leaves them as they are; a data key beside them keeps its own statistics, in order."""
    from vla.train.data import proprio_statistics
    from vla.transforms.map_inputs import ROUTE_FEATURES_DIM

    class Episodes:  # a source as the loader sees one: a key, a length and its states by key
        key = "house"

        def __len__(self):
            return 5

        def states(self, keys):
            assert keys == ("sensors/motion",)
            return np.arange(15, dtype=np.float64).reshape(5, 3)

    (st,) = proprio_statistics([Episodes()], ("memory/routes", "sensors/motion")).values()
    assert st.dim == ROUTE_FEATURES_DIM + 3
    x = np.concatenate([np.linspace(-1, 1, ROUTE_FEATURES_DIM), [0.0, 7.0, 14.0]])
    y = st.normalize(x)
    np.testing.assert_allclose(y[:ROUTE_FEATURES_DIM], x[:ROUTE_FEATURES_DIM])
    assert y[ROUTE_FEATURES_DIM] < -0.9 and y[-1] > 0.9  # motion's columns: their own q01 / q99
    question_set = type("Questions", (), {"key": "qa"})()  # no states: left out
    (alone,) = proprio_statistics([question_set, Episodes()], ("memory/routes",)).values()
    assert alone.dim == ROUTE_FEATURES_DIM and not alone.mask.any()


def test_a_policy_that_reads_the_routes_only_as_numbers_reads_the_memory():
    """``proprio_keys=[memory/routes]`` with neither the map image nor the table in words still reads the
    memory: training builds its memory inputs (with the routes and the table their last block reads), the
    checkpoint keeps them, and the agent builds the same transform at inference."""
    from vla.policy import memory_inputs
    from vla.policy.config import PolicyConfig

    cfg = PolicyConfig(inputs={"cameras": ["ego"], "proprio": "token", "proprio_keys": ["memory/routes"]})
    assert cfg.inputs.uses_memory
    trained = cfg.with_memory(None, 64)  # what vla-train settles before training (no data.memory given)
    assert trained.memory is not None and {"routes", "objects"} <= set(trained.memory.inputs)
    assert "topdown" not in trained.memory.inputs  # nothing the policy does not read is computed
    assert trained.memory_inputs_config() == trained.memory
    assert memory_inputs(trained) is not None  # the agent's transform
    # a policy that reads no memory at all still gets none
    plain = PolicyConfig(inputs={"cameras": ["ego"], "proprio": "token", "proprio_keys": ["sensors/motion"]})
    assert not plain.inputs.uses_memory and plain.with_memory(None, 64).memory is None
