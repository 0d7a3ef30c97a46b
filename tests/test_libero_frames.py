"""Rendering only what is read (``env.render_next``, envs/libero/frames.py; the loop's side in
vla/rollout/runtime.py), with one render context kept across resets (envs/libero/render_context.py). On
two suites, with RGB, depth and instance masks, over resets of three trials: every frame a step renders
on demand is the frame the same step renders when every step renders and every reset builds a fresh
context (today's path), bit for bit, and the simulator's state is the same after every step; a step
whose frames nobody reads has none. The loop
asks for frames only when the agent will read them and nothing else (a subscriber, a perception
profile) takes every frame."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from envs.base import Observation
from spatial_memory.frame import CameraFrame
from vla.rollout.runtime import Subscriber, run_episode

STEPS = 24
BOTH = ("agentview", "wrist")
# which steps' frames are read: a chunk of 4 played open loop (then one with a memory that fuses the
# agentview camera between the requests), then an irregular stretch, one camera at a time too
READ = [t % 4 == 3 for t in range(8)] + [True if t % 4 == 3 else {"agentview"} for t in range(8)]
READ += [True, False, {"wrist"}, True, {"agentview"}, False, True, ["agentview", "wrist"]]


def _same_frames(a: Observation, b: Observation, where: str = "", cameras=BOTH) -> None:
    assert set(a.cameras) == set(BOTH) and set(b.cameras) == set(cameras), f"cameras {where}"
    for name in cameras:
        fa, fb = a.cameras[name], b.cameras[name]
        for key in ("rgb", "depth", "instance", "K", "T_world_cam"):
            x, y = getattr(fa, key), getattr(fb, key)
            assert x.dtype == y.dtype and np.array_equal(x, y), f"{name}.{key} differs at step {fa.step} {where}"
        assert fa.labels == fb.labels


def _same_masks_as_robosuite(env) -> None:
    seen = 0
    for o in env._env.env._observables.values():
        if o.name.endswith("_segmentation_instance"):
            ours = o._sensor._wrapped  # inside the frame gate
            a, b = ours({}), ours._original({})
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), o.name
            assert len(np.unique(a)) > 2  # objects in view, not a blank mask
            seen += 1
    assert seen == 2


@pytest.mark.parametrize("suite", ["libero_object", "libero_spatial"])
def test_frames_rendered_on_demand_are_the_frames_of_every_step(suite):
    """``every`` is today's path (every step rendered, a new render context at every reset);
    ``on_demand`` renders the steps READ says and keeps its first render context across resets."""
    from envs.libero.env import LiberoEnv

    cfg = {"cameras": ("agentview", "wrist"), "resolution": 48, "depth": True, "segmentation": True}
    every, on_demand = LiberoEnv(suite, 0, **cfg), LiberoEnv(suite, 0, **cfg)
    try:
        every._ensure_sim()  # every reset of `every` builds a fresh context, as before
        every._keep_context.context = None
        every._keep_context._attach = every._keep_context.after_reset = lambda sim: None
        for trial, steps in ((0, STEPS), (1, 6), (2, 6)):
            # today's path ran one env per process: its own context was current when a hard reset rendered
            # (here the other env's may be, when its last step rendered)
            every._env.sim._render_context_offscreen.gl_ctx.make_current()
            a, _ = every.reset(options={"trial": trial})
            b, _ = on_demand.reset(options={"trial": trial})
            _same_frames(a, b, f"(the reset of trial {trial})")
            _steps(every, on_demand, steps)
        assert every._keep_context.reused == 0 and on_demand._keep_context.reused == 3
        # the instance masks' lookup table against robosuite's own per-pixel mapping, on this state
        _same_masks_as_robosuite(on_demand)
        # one step only: the next step renders unless asked again
        on_demand.render_next(False)
        on_demand.step(np.zeros(7))
        assert set(on_demand.step(np.zeros(7))[0].cameras) == {"agentview", "wrist"}
        with pytest.raises(ValueError, match=r"camera\(s\) \['front'\] not among"):
            on_demand.render_next({"front"})
    finally:
        every.close()
        on_demand.close()


def _steps(every, on_demand, n: int) -> None:
    from envs.libero.env import CAMERAS

    actions = np.random.default_rng(n).uniform(-0.5, 0.5, (n, 7))
    for t, (action, read) in enumerate(zip(actions, READ)):
        on_demand.render_next(read)
        a, ra, da, ta, _ = every.step(action)
        b, rb, db, tb, _ = on_demand.step(action)
        sa, sb = every._env.sim.get_state().flatten(), on_demand._env.sim.get_state().flatten()
        assert np.array_equal(sa, sb), f"the simulator's state differs after step {t}"
        assert np.array_equal(a.state, b.state) and (ra, da, ta) == (rb, db, tb)
        for k in a.sensors:
            assert np.array_equal(a.sensors[k], b.sensors[k]), k
        shown = () if read is False else BOTH if read is True else tuple(read)
        if shown:
            _same_frames(a, b, f"at step {t}", shown)
        else:
            assert b.cameras == {}, f"step {t} was not to be rendered"
        for name in set(BOTH) - set(shown):  # the camera passes of a camera not asked for did not run
            for kind in ("image", "depth", "segmentation_instance"):
                assert on_demand._raw[f"{CAMERAS[name]}_{kind}"].size == 1, f"{name} {kind} rendered at step {t}"


class _Env:
    """A stand-in for an env that renders on demand: its observations have a frame only when asked."""

    max_episode_steps = 8
    instruction = "do it"
    env_spec = None

    def __init__(self) -> None:
        self.asked: list[bool] = []
        self._next = True

    def render_next(self, wanted: bool) -> None:
        self.asked.append(bool(wanted))
        self._next = bool(wanted)

    def _obs(self) -> Observation:
        frame = CameraFrame(np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), np.float32), np.eye(3), np.eye(4))
        cams = {"cam": frame} if self._next else {}
        self._next = True
        return Observation(cameras=cams, state=np.zeros(1, np.float32), instruction=self.instruction, step=0)

    def reset(self, seed=None, options=None):
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.0, False, False, {}


class _Plain:
    """An agent without the ReadsFrames capability."""

    name = "plain"

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def reset(self, instruction: str, spec: Any) -> None:
        pass

    def act(self, observation: Observation) -> np.ndarray:
        self.seen.append(bool(observation.cameras))
        return np.zeros(1)

    def answer(self, question: Any) -> str:
        return ""


class _Chunks(_Plain):
    """Reads the frames every third step (a chunk of 3 played open loop)."""

    name = "chunks"

    def __init__(self) -> None:
        super().__init__()
        self.t = 0

    def act(self, observation: Observation) -> np.ndarray:
        self.t += 1
        return super().act(observation)

    def reads_next(self) -> bool:
        return self.t % 3 == 0


def test_the_loop_asks_for_the_frames_the_agent_reads_and_all_of_them_when_others_read_them():
    env, agent = _Env(), _Chunks()
    result = run_episode(env, agent, {"trial": 0})
    assert result.error is None and result.steps == 8
    assert env.asked == [False, False, True, False, False, True, False, False]
    assert agent.seen == [True, False, False, True, False, False, True, False]
    # a subscriber (videos, demonstrations, questions) takes every frame: nothing is skipped
    env, agent = _Env(), _Chunks()
    run_episode(env, agent, {"trial": 0}, subscribers=[Subscriber()])
    assert env.asked == [] and all(agent.seen)
    # an agent that does not say reads every frame
    env, plain = _Env(), _Plain()
    run_episode(env, plain, {"trial": 0})
    assert env.asked == [True] * 8 and all(plain.seen)


class _Capture:
    """A subscriber of its own class (the hooks only), counting the frames it is shown."""

    def on_episode_start(self, episode) -> None:
        self.frames = []

    def on_step(self, episode, action, observation, reward, info) -> None:
        self.frames.append(bool(observation.cameras))

    def on_episode_end(self, episode, result) -> None:
        result.extra["captured"] = self.frames


def test_a_video_of_some_trials_leaves_the_others_rendered_on_demand(tmp_path):
    from vla.rollout.video import VideoWriter

    videos = VideoWriter(tmp_path, mode="all", trials=range(3, 4))
    filmed, watched = _Env(), _Chunks()
    r = run_episode(filmed, watched, {"task_id": 0, "trial": 3}, subscribers=[videos])
    assert filmed.asked == [] and all(watched.seen) and r.extra["video"] == "env_task000_trial003_failure.mp4"
    unfilmed, agent = _Env(), _Chunks()
    r = run_episode(unfilmed, agent, {"task_id": 0, "trial": 4}, subscribers=[videos])
    assert unfilmed.asked == [False, False, True, False, False, True, False, False] and "video" not in r.extra
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env_task000_trial003_failure.mp4"]
    # a subscriber whose answer raises is taken to read every frame
    broken = Subscriber()
    broken.reads_frames = lambda episode: 1 / 0
    env, agent = _Env(), _Chunks()
    r = run_episode(env, agent, {"trial": 0}, subscribers=[broken])
    assert env.asked == [] and "reads_frames" in r.extra["subscriber_errors"][0]
    # as is one that does not say (subscribers need not derive from Subscriber), without an error
    env, agent = _Env(), _Chunks()
    r = run_episode(env, agent, {"trial": 0}, subscribers=[_Capture()])
    assert env.asked == [] and "subscriber_errors" not in r.extra and len(r.extra["captured"]) == 8
