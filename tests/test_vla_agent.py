"""``agent=vla`` in closed loop: a tiny Qwen2.5-VL policy of the real classes (random weights, exported
with ``save_pretrained``; no trained weights exist here) drives ``vla-rollout env=house`` in a
subprocess. Every recorded action is checked against the policy's own answer, computed here in-process
from the recorded observation (a second path through the same checkpoint), and against the env's
bounds; a memory-reading checkpoint runs with mid-episode GST questions answered by the model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import VENV_BIN, cli_env

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
HOUSE = [
    "env=house",
    "env.seed=900001",
    "env.use_meshes=false",
    "env.width=64",
    "env.height=64",
    "env.max_steps=6",
    "env.num_trials=2",
    "eval.trials_per_task=2",
    "eval.workers=0",
    "progress=false",
]
LOW, HIGH = np.array([-0.25, -0.25, -0.5]), np.array([0.25, 0.25, 0.5])


def _export(path: Path, memory: dict | None = None, chunk: int = 2) -> Path:
    from vla.actions import ActionStats
    from vla.config import compose
    from vla.policy import ModelConfig, PolicyConfig, build_policy

    cfg = compose("train", ["model=tiny_qwen2_5_vl", "policy=house_memory" if memory else "policy=house"])
    mcfg = ModelConfig.from_dict({**cfg["model"], "image_size": 56})
    pcfg = PolicyConfig.from_dict({**cfg["policy"], "chunk": chunk, "memory": memory})
    rng = np.random.default_rng(3)
    # statistics wider than the env's bounds, so that clipping to the action space is exercised
    stats = {"house_nav": ActionStats.from_actions(rng.uniform(2 * LOW, 2 * HIGH, (400, 3)))}
    torch.manual_seed(0)
    policy = build_policy(mcfg, pcfg, stats)
    with torch.no_grad():  # as if trained: action rows differ, so the decoded bins vary with the input
        policy.action_in.data += 0.5 * torch.randn_like(policy.action_in)
    return policy.save_pretrained(path)


def _rollout(args: list[str]) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [str(VENV_BIN / "vla-rollout"), *HOUSE, *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class _Capture:
    """A subscriber keeping (observation the agent saw, action it chose) for every step."""

    def __init__(self) -> None:
        self.pairs: list[tuple[dict, np.ndarray]] = []

    def on_episode_start(self, episode) -> None:
        self._seen = episode.observation.to_dict()

    def on_step(self, episode, action, observation, reward, info) -> None:
        self.pairs.append((self._seen, np.asarray(action)))
        self._seen = observation.to_dict()

    def on_episode_end(self, episode, result) -> None:
        self.result = result


def test_closed_loop_actions_are_the_policys_own_chunks_within_bounds(tmp_path):
    """The runtime's real loop with the agent built from the rollout config; the policy, loaded again
    here, is asked for each re-planning step's chunk from the observation the agent saw."""
    from envs.registry import make_env
    from vla.agents import make_agent
    from vla.config import compose
    from vla.policy import load_policy
    from vla.rollout.runtime import run_episode

    ck = _export(tmp_path / "policy")
    cfg = compose("rollout", [*HOUSE, "agent=vla", f"agent.checkpoint={ck}"])
    env, agent = make_env(cfg["env"]), make_agent(cfg["agent"])
    cap = _Capture()
    run_episode(env, agent, {"task_id": 0, "trial": 0}, [cap], seed=7)
    assert cap.result.error is None and len(cap.pairs) == 6
    actions = np.stack([a for _, a in cap.pairs])
    assert np.isfinite(actions).all() and (actions >= LOW).all() and (actions <= HIGH).all()
    assert len(np.unique(actions.round(6), axis=0)) > 1  # not one constant action
    policy = load_policy(ck)
    policy.eval()
    for t in range(0, 6, 2):  # chunk = 2: step t's observation decides the actions of steps t and t + 1
        chunk = np.clip(policy.infer_batch([cap.pairs[t][0]])[0], LOW, HIGH)
        np.testing.assert_allclose(actions[t : t + 2], chunk, atol=1e-6)


@pytest.mark.slow  # resume itself is tested for every agent in test_rollout_eval; this is the CLI path end to end
def test_vla_rollout_runs_the_checkpoint_and_resumes(tmp_path):
    ck = _export(tmp_path / "policy")
    out = tmp_path / "run"
    _rollout(["agent=vla", f"agent.checkpoint={ck}", f"out={out}"])
    episodes = _jsonl(out / "episodes.jsonl")
    assert len(episodes) == 2 and not any(e.get("error") for e in episodes), episodes
    before = (out / "episodes.jsonl").read_text()
    _rollout(["agent=vla", f"agent.checkpoint={ck}", f"out={out}"])  # resume: nothing left to run
    assert (out / "episodes.jsonl").read_text() == before


def test_a_memory_reading_checkpoint_acts_and_answers_mid_episode_questions(tmp_path):
    memory = {"inputs": ["topdown", "objects", "text"], "map_level": "easy", "map_size": [56, 56], "max_objects": 4}
    ck = _export(tmp_path / "policy", memory=memory, chunk=1)
    out = tmp_path / "run"
    _rollout(
        [
            "agent=vla",
            f"agent.checkpoint={ck}",
            "agent.max_answer_tokens=6",
            "gst.at=[4]",
            "gst.subtasks=[EDs,GPs]",
            "eval.videos=all",
            f"out={out}",
        ]
    )
    episodes = _jsonl(out / "episodes.jsonl")
    assert len(episodes) == 2 and not any(e.get("error") for e in episodes), episodes
    rows = _jsonl(out / "gst.jsonl")
    assert {r["subtask"] for r in rows} == {"EDs", "GPs"}
    assert all(isinstance(r["prediction"], str) and "score" in r for r in rows)  # the model's free text, scored
    assert len(list((out / "videos").glob("*.mp4"))) == 2


def test_a_checkpoint_that_cannot_load_stops_the_run_at_once_with_the_reason(tmp_path):
    """With workers, a bad checkpoint is reported once, before any episode, not as N dead workers."""
    out = tmp_path / "run"
    r = subprocess.run(
        [
            str(VENV_BIN / "vla-rollout"),
            *HOUSE,
            "eval.workers=2",
            "agent=vla",
            f"agent.checkpoint={tmp_path}/none",
            f"out={out}",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 2 and "could not build the env or agent" in r.stderr and "none" in r.stderr, r.stderr[-2000:]
    episodes = out / "episodes.jsonl"
    assert not episodes.exists() or episodes.read_text() == ""  # nothing recorded: a fixed rerun starts clean


def test_offline_answers_fuse_each_stream_once_into_the_cache_training_reads(tmp_path, gst):
    """vla-gst eval with a memory-reading checkpoint: a scene's questions share one fused stream, and
    the files it leaves are the very ones a training run with the same memory config reads."""
    from vla.agents.vla import VLAAgent
    from vla.data import GSTQASource
    from vla.questions.question import load_questions

    memory = {"inputs": ["topdown", "objects", "text"], "map_level": "easy", "map_size": [56, 56], "max_objects": 4}
    ck = _export(tmp_path / "policy", memory=memory, chunk=1)
    cache = tmp_path / "cache"
    agent = VLAAgent(checkpoint=str(ck), device="cpu", max_answer_tokens=4, memory_cache=str(cache))
    questions = load_questions(gst)
    answers = [agent.answer(q.for_agent()) for q in questions]  # what vla-gst eval hands it
    assert all(isinstance(a, str) for a in answers)
    streams = {json.dumps(q.media.get("clip_stream", q.media["stream"])) for q in questions}
    assert len(streams) < len(questions)  # the fixture's scene shares its video stream
    assert agent._streams.fused == len(streams)
    # one file per question (its table is measured from its own view), none per stream alone
    assert len(list(cache.glob("q*.hdf5"))) == len(questions) == len(list(cache.glob("*.hdf5")))
    src = GSTQASource(gst, memory=memory, cache_dir=cache)
    for i in range(len(src)):
        src.sample(i)
    assert src._cache.fused == 0


def test_a_served_memory_checkpoint_builds_the_map_it_was_trained_with(tmp_path):
    """vla-serve policy_path= of a memory-reading checkpoint serves with its own memory inputs (no
    memory options typed again: before, it ran without its map unless they were), and refuses others."""
    from dataclasses import replace

    from envs.spec import ActionSpec
    from tests.serving import toy_spec, tour_observations
    from vla.serve.policy import load_batch_policy

    memory = {"inputs": ["topdown", "objects", "text"], "map_level": "easy", "map_size": [56, 56], "max_objects": 4}
    ck = _export(tmp_path / "policy", memory=memory, chunk=1)
    served = load_batch_policy(str(ck))
    assert served.metadata()["memory"] is True
    spec = replace(toy_spec(), action=ActionSpec(tuple(LOW), tuple(HIGH), ("forward_m", "left_m", "yaw_rad")))
    served.reset("s", "go to the sofa", spec)
    obs, _ = tour_observations(4)
    for o in obs:
        (action,) = served.infer_batch(["s"], [o])
        assert not isinstance(action, Exception), action
    memory_now = served.live_memory("s")
    assert memory_now is not None and len(memory_now.objects()) > 0  # the map the policy reads was built
    with pytest.raises(ValueError, match="trained with"):
        load_batch_policy(str(ck), memory={**memory, "map_size": [64, 64]})
    assert load_batch_policy(str(ck), memory=memory).memory_cfg is not None  # the same config is accepted


def test_the_runs_perception_profile_reaches_the_policys_memory(tmp_path):
    """``vla-rollout agent=vla perception=harsh`` builds the policy's memory for harsh sensors (the memory
    agent's rule), not with the settings of the profile the checkpoint was trained under (gt here); the
    run's own default (gt) and a run with no profile at all (vla-serve: the checkpoint's) stay as they were."""
    from spatial_memory.profiles import memory_config_for
    from vla.agents import make_agent
    from vla.config import compose

    memory = {"inputs": ["objects", "text"], "map_size": [56, 56], "max_objects": 4, "perception": "gt"}
    ck = _export(tmp_path / "policy", memory=memory, chunk=1)
    assert memory_config_for("harsh") != memory_config_for("gt")  # else this test could not tell them apart
    for profile, want in (("harsh", "harsh"), ("realistic", "realistic"), ("gt", "gt")):
        cfg = compose("rollout", ["env=house", "agent=vla", f"agent.checkpoint={ck}", f"perception={profile}"])
        agent = make_agent(cfg["agent"], seed=0)
        assert agent.inputs.config.perception == want
        agent.inputs.reset(None)  # a mobile base: the apartment's memory
        assert agent.inputs.memory.config == memory_config_for(want)
    served = compose("serve", ["agent=vla", f"agent.checkpoint={ck}"])["agent"]
    assert served["perception"] is None and make_agent(served).inputs.config.perception == "gt"


def test_between_the_policys_requests_a_memory_agent_asks_only_for_the_camera_its_memory_fuses(tmp_path):
    """An env that renders on demand renders, mid-chunk, only the camera the memory fuses at every step."""
    from envs.registry import make_env
    from vla.agents import make_agent

    memory = {"inputs": ["topdown", "objects", "text"], "map_level": "easy", "map_size": [56, 56], "max_objects": 4}
    ck = _export(tmp_path / "policy", memory=memory, chunk=2)
    env = make_env({"name": "house", "seed": 900001, "use_meshes": False, "width": 64, "height": 64}, 0)
    try:
        agent = make_agent({"name": "vla", "checkpoint": str(ck)})
        obs, _ = env.reset(seed=7, options={"trial": 0})
        agent.reset(env.instruction, env.env_spec)
        assert agent.reads_next() is True  # the first act asks the policy: every camera
        agent.act(obs)
        assert agent.reads_next() == frozenset(env.env_spec.camera_names[:1])  # the memory's (the first)
        agent.act(obs)
        assert agent.reads_next() is True  # the chunk played: the policy is asked again
    finally:
        env.close()


def test_a_libero_map_policy_acts_the_same_when_only_its_memorys_camera_renders_mid_chunk(tmp_path):
    """libero_mem's map arm (OFT's recipe, the memory fused from agentview with depth and masks): rendered on
    demand (both cameras when the policy is asked, agentview alone in between) its actions are those of
    the same episode with every camera rendered at every step."""
    from envs.libero.env import LiberoEnv
    from vla.actions import ActionStats
    from vla.agents import make_agent
    from vla.config import compose
    from vla.policy import ModelConfig, PolicyConfig, build_policy
    from vla.rollout.runtime import Subscriber, run_episode

    memory = {"camera": "agentview", "inputs": ["topdown", "objects", "text"], "map_level": "medium"}
    memory.update(map_frame="fit", map_size=[56, 56], max_objects=8)
    inputs = ["policy.inputs.memory_map=true", "policy.inputs.memory_text=true"]
    cfg = compose("train", ["model=tiny_qwen2_5_vl", "policy=libero_oft", *inputs])
    rng = np.random.default_rng(3)
    torch.manual_seed(0)
    policy = build_policy(
        ModelConfig.from_dict({**cfg["model"], "image_size": 56}),
        PolicyConfig.from_dict({**cfg["policy"], "memory": memory}),
        {"libero": ActionStats.from_actions(rng.uniform(-1, 1, (400, 7)))},
        proprio={"libero": ActionStats.from_actions(rng.normal(size=(200, 8)))},
    )
    with torch.no_grad():  # as if trained: the decoded bins vary with the input
        policy.action_in.data += 0.5 * torch.randn_like(policy.action_in)
    ck = str(policy.save_pretrained(tmp_path / "policy"))
    seen: dict[str, list] = {}
    for mode in ("on_demand", "every"):
        env = LiberoEnv(
            "libero_mem", 2, cameras=("agentview", "wrist"), resolution=48, depth=True, segmentation=True,
            max_steps=18, init_states="sampled",
        )  # fmt: skip
        agent, steps = make_agent({"name": "vla", "checkpoint": ck}), []
        act = agent.act
        agent.act = lambda obs, act=act, steps=steps: steps.append((sorted(obs.cameras), act(obs))) or steps[-1][1]
        try:  # a subscriber takes every frame
            r = run_episode(env, agent, {"task_id": 2, "trial": 0}, [Subscriber()] if mode == "every" else [])
        finally:
            env.close()
        assert r.error is None and r.steps == 18
        seen[mode] = steps
    asked = [["agentview", "wrist"] if t % 8 == 0 else ["agentview"] for t in range(18)]
    assert [c for c, _ in seen["on_demand"]] == asked and all(len(c) == 2 for c, _ in seen["every"])
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(seen["on_demand"], seen["every"]))
