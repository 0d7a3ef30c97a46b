"""The seams between envs, agents and the loop: observations as plain data, the EnvSpec, the agent
protocol (a non-privileged agent never reaches the env), subscriber errors, video frame sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envs.observation import Observation
from envs.spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import wrap_angle, wrap_deg


def _frame(h=8, w=10, labels=True):
    rng = np.random.default_rng(0)
    inst = rng.integers(0, 3, (h, w)).astype(np.int32)
    T = np.eye(4)
    T[:3, 3] = [1.0, 2.0, 1.5]
    return CameraFrame(
        rgb=rng.integers(0, 255, (h, w, 3), dtype=np.uint8),
        depth=rng.uniform(0.5, 3, (h, w)).astype(np.float32),
        K=np.array([[5.0, 0, w / 2], [0, 5.0, h / 2], [0, 0, 1]]),
        T_world_cam=T,
        instance=inst,
        labels={1: "bowl", 2: "plate"} if labels else {},
        step=4,
    )


def _spec(h=8, w=10):
    return EnvSpec(
        family="toy",
        action=ActionSpec((-1.0, -1.0), (1.0, 1.0), ("a", "b")),
        state=ArraySpec((3,), "float64", ("x", "y", "yaw")),
        cameras=(CameraSpec("ego", h, w),),
        sensors={"blocked": ArraySpec((), "bool")},
        task={"task_id": 0, "name": "toy", "instruction": "go", "max_steps": 5, "num_trials": 1},
    )


def _obs():
    return Observation(
        cameras={"ego": _frame()},
        state=np.array([0.5, -1.0, 0.1]),
        instruction="go to the bowl",
        step=4,
        sensors={"blocked": False},
        memory={"objects/category": np.array(["bowl"])},
    )


def test_observation_dict_round_trip_is_plain_data():
    obs = _obs()
    d = obs.to_dict()
    assert set(d) == {
        "prompt",
        "step",
        "state",
        "sensors/blocked",
        "memory/objects/category",
        *(f"cameras/ego/{k}" for k in ("rgb", "depth", "K", "T_world_cam", "instance", "label_ids", "label_names")),
    }
    for k, v in d.items():  # nothing a socket or a tensor cannot carry
        assert isinstance(v, (np.ndarray, bool, int, float, str)), k
        if isinstance(v, np.ndarray):
            assert v.dtype.kind in "biufU", k
    assert d["cameras/ego/label_ids"].tolist() == [1, 2] and d["cameras/ego/label_names"].tolist() == ["bowl", "plate"]
    back = Observation.from_dict(d)
    f0, f1 = obs.cameras["ego"], back.cameras["ego"]
    for name in ("rgb", "depth", "K", "T_world_cam", "instance"):
        np.testing.assert_array_equal(getattr(f0, name), getattr(f1, name))
    assert f1.labels == {1: "bowl", 2: "plate"} and f1.step == 4
    assert back.instruction == "go to the bowl" and back.step == 4 and back.sensors == {"blocked": False}
    np.testing.assert_array_equal(back.state, obs.state)
    assert back.memory["objects/category"].tolist() == ["bowl"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("prompt"), "missing key"),
        (lambda d: d.update({"cameras/ego/rgb": d["cameras/ego/rgb"][:4]}), "camera 'ego'.*depth must be HxW"),
        (lambda d: d.update({"sensors/blocked": {"a": 1}}), "sensors/blocked"),
        (lambda d: d.update({"state": np.array([object()], dtype=object)}), "state"),
        (lambda d: d.update({"bogus": 1}), "unknown observation key 'bogus'"),
        (lambda d: d.update({"cameras/ego/colour": 1}), "cameras/ego/colour"),
        (lambda d: d.update({"step": 2.5}), "step"),
    ],
)
def test_malformed_observation_dicts_are_refused_naming_the_key(mutate, message):
    d = _obs().to_dict()
    mutate(d)
    with pytest.raises(ValueError, match=message):
        Observation.from_dict(d)


def test_env_spec_checks_observations_and_round_trips_through_json():
    spec = _spec()
    d = _obs().to_dict()
    spec.check_observation(d)  # memory/* entries are allowed on top of the declared features
    assert EnvSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert set(spec.features()) >= {"state", "cameras/ego/rgb", "sensors/blocked"}
    bad = dict(d, state=np.zeros(4))
    with pytest.raises(ValueError, match="'state' must have shape \\(3,\\)"):
        spec.check_observation(bad)
    with pytest.raises(ValueError, match="missing key 'sensors/blocked'"):
        spec.check_observation({k: v for k, v in d.items() if k != "sensors/blocked"})
    with pytest.raises(ValueError, match="does not declare"):
        spec.check_observation(dict(d, **{"sensors/wheel": 1.0}))
    np.testing.assert_array_equal(spec.action.check([3.0, -0.5]), [1.0, -0.5])  # clipped to the bounds
    for bad_action, msg in (([np.nan, 0], "NaN"), ([0, 0, 0], "shape"), ("x", "numeric")):
        with pytest.raises(ValueError, match=msg):
            spec.action.check(bad_action)


def test_real_envs_declare_what_they_emit():
    """The house env's observations match the spec it declares (checked by the spec, key by key)."""
    from envs.registry import make_env

    env = make_env({"name": "house", "seed": 900001, "max_steps": 5, "use_meshes": False, "width": 64, "height": 48}, 0)
    try:
        obs, _ = env.reset(options={"trial": 0})
        spec = env.env_spec
        assert spec.family == "house" and spec.action.names == ("forward_m", "left_m", "yaw_rad")
        assert spec.camera("ego").height == 48 and spec.camera("ego").width == 64
        spec.check_observation(obs.to_dict())
        obs, *_ = env.step(np.array([0.1, 0.0, 0.2]))
        spec.check_observation(obs.to_dict())
        np.testing.assert_allclose(spec.action.high, env.action_space.high)
    finally:
        env.close()


def test_one_angle_wrap_with_one_range():
    a = np.array([np.pi, -np.pi, 3 * np.pi, -3 * np.pi, 0.25, 2 * np.pi + 0.25, -2 * np.pi - 0.25])
    w = wrap_angle(a)
    assert np.all((w > -np.pi) & (w <= np.pi))
    np.testing.assert_allclose(w, [np.pi, np.pi, np.pi, np.pi, 0.25, 0.25, -0.25], atol=1e-12)
    np.testing.assert_allclose(np.radians(wrap_deg(np.degrees(a))), w, atol=1e-9)  # degrees agree
    assert wrap_angle(0.1) == 0.1  # in range: untouched, bit for bit


# ============================================================================ the loop
class _ToyEnv:
    """A minimal env (gymnasium-like) for the loop's contract; the loop under test is the real one."""

    def __init__(self, steps=5):
        from envs.base import TaskInfo

        self.task = TaskInfo(0, "toy", "go", steps, 1)
        self.instruction, self.max_episode_steps = "go", steps
        self.env_spec = _spec()
        self.secret = "scene truth"
        self.t = 0

    def reset(self, seed=None, options=None):
        self.t = 0
        return self._obs(), {"success": False}

    def step(self, action):
        self.env_spec.action.check(action)
        self.t += 1
        done = self.t >= 3
        return self._obs(), float(done), done, False, {"success": done}

    def _obs(self):
        return Observation(
            cameras={"ego": _frame()}, state=np.zeros(3), instruction="go", step=self.t, sensors={"blocked": False}
        )


class _Snoop:
    """A non-privileged agent that would love to see the env: it records what it is handed."""

    name = "snoop"
    privileged = False

    def __init__(self):
        self.seen = []

    def bind(self, env):  # declared non-privileged: the loop must never call this
        self.seen.append(("bind", env))

    def reset(self, instruction, spec):
        self.seen.append(("reset", instruction, spec))

    def act(self, observation):
        self.seen.append(("act", observation))
        return np.zeros(2)

    def answer(self, question):
        return ""


def _reachable(obj, target, depth=3, seen=None):
    """Whether ``target`` is reachable from ``obj`` through attributes, dicts and sequences."""
    seen = set() if seen is None else seen
    if obj is target:
        return True
    if depth < 0 or id(obj) in seen or isinstance(obj, (str, bytes, int, float, np.ndarray)):
        return False
    seen.add(id(obj))
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple, set)):
        children = list(obj)
    else:
        children = list(getattr(obj, "__dict__", {}).values())
    return any(_reachable(c, target, depth - 1, seen) for c in children)


def test_a_non_privileged_agent_never_reaches_the_env():
    from vla.rollout.runtime import run_episode

    env, agent = _ToyEnv(), _Snoop()
    result = run_episode(env, agent, {"env": "toy", "task_id": 0, "trial": 0})
    assert result.success and result.error is None
    assert [s[0] for s in agent.seen] == ["reset", "act", "act", "act"]  # never bound
    assert agent.seen[0][2] is env.env_spec
    assert not _reachable(agent, env) and not _reachable(agent, env.secret)
    assert all(isinstance(s[1], Observation) for s in agent.seen[1:])


def test_privileged_agents_are_bound_and_undeclared_binds_are_refused():
    from vla.agents.base import check_agent
    from vla.rollout.runtime import run_episode

    class Expert(_Snoop):
        privileged = True

    env, agent = _ToyEnv(), Expert()
    run_episode(env, agent, {"env": "toy", "task_id": 0, "trial": 0})
    assert agent.seen[0] == ("bind", env)

    class Undeclared:  # a bind() that the loop would silently never call
        name = "undeclared"
        reset, act, answer, bind = _Snoop.reset, _Snoop.act, _Snoop.answer, _Snoop.bind

    with pytest.raises(ValueError, match="does not declare privileged"):
        check_agent(Undeclared())

    class OldStyle:
        name = "old"

        def reset(self, instruction):
            pass

        def act(self, obs):
            return np.zeros(2)

        def answer(self, q):
            return ""

    with pytest.raises(ValueError, match=r"reset\(\) must take \(instruction, spec\)"):
        check_agent(OldStyle())


def test_a_broken_subscriber_is_recorded_and_muted_but_agent_errors_still_fail():
    from vla.rollout.runtime import Subscriber, run_episode

    class Broken(Subscriber):
        def __init__(self):
            self.steps, self.ended = 0, False

        def on_step(self, episode, action, observation, reward, info):
            self.steps += 1
            raise OSError("disk full")

        def on_episode_end(self, episode, result):
            self.ended = True

    class Counter(Subscriber):
        def __init__(self):
            self.steps = 0

        def on_step(self, episode, action, observation, reward, info):
            self.steps += 1

    broken, counter = Broken(), Counter()
    result = run_episode(_ToyEnv(), _Snoop(), {"env": "toy", "task_id": 0, "trial": 0}, [broken, counter])
    assert result.success and result.error is None  # the episode itself went fine
    assert broken.steps == 1 and broken.ended and counter.steps == 3  # muted after its error; the others go on
    assert len(result.extra["subscriber_errors"]) == 1 and "OSError: disk full" in result.extra["subscriber_errors"][0]

    class Crash(_Snoop):
        def act(self, observation):
            raise RuntimeError("policy exploded")

    result = run_episode(_ToyEnv(), Crash(), {"env": "toy", "task_id": 0, "trial": 0}, [Counter()])
    assert not result.success and "RuntimeError: policy exploded" in result.error


def test_video_keeps_one_frame_size_when_the_live_map_appears(tmp_path):
    """The first-wave bug: the memory agent's map appears after a few steps and the frame grew
    ('All images in a movie should have same size'). The video must come out with every frame."""
    import imageio.v2 as imageio

    from vla.rollout.runtime import Episode, EpisodeResult
    from vla.rollout.video import VideoWriter

    class MapAgent(_Snoop):
        def __init__(self):
            super().__init__()
            self.t = 0

        def live_map(self):
            return None if self.t < 2 else np.full((200 + 10 * self.t, 300, 3), 90, np.uint8)  # appears, then grows

    agent = MapAgent()
    writer = VideoWriter(tmp_path, "all", fps=5)
    ep = Episode(
        key={"suite": "toy", "task_id": 0, "trial": 0},
        env=_ToyEnv(),
        agent=agent,
        instruction="go",
        observation=_ToyEnv()._obs(),
    )
    writer.on_episode_start(ep)
    for t in range(1, 6):
        agent.t = t
        ep.step = t
        writer.on_step(ep, np.zeros(2), ep.observation, 0.0, {})
    writer.on_episode_end(ep, EpisodeResult(success=True, steps=5, seconds=0.1))
    frames = imageio.mimread(writer.last_path)
    assert len(frames) == 6 and len({f.shape for f in frames}) == 1
    assert frames[-1][..., 0].min() < 120  # the map panel (grey 90) is in the last frame
