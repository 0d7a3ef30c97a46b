"""openpi's own client on LIBERO through vla-serve (slow: LIBERO renders on the CPU).

1. openpi's ``WebsocketClientPolicy`` and ``ActionChunkBroker`` drive a LIBERO episode against
   vla-serve serving a tiny checkpoint (the real Qwen2.5-VL classes, random weights whose action
   rows make the decoded bins follow the image) and the memory agent; every served action equals
   what ``agent=vla`` chooses in-process for the same observation.
2. The LIBERO evaluation loop written the way openpi's LIBERO example is
   (``scripts/openpi_libero_eval.py``: LIBERO's own env, its observation keys, its preprocessing,
   ten settling steps, a chunk asked for every five steps) runs through vla-serve and reports its
   success. The served policy replays the scripted expert's actions for that initial state (a
   stand-in that knows no scene truth and no step count but its own calls: no trained weights exist
   here), so success means every action crossed both protocols unchanged and in order.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.serving import served
from vla.serve import PolicyClient, PolicyServer, ServeConfig

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
pytest.importorskip("openpi_client")
from openpi_client.action_chunk_broker import ActionChunkBroker  # noqa: E402
from openpi_client.websocket_client_policy import WebsocketClientPolicy  # noqa: E402

SUITE, TASK = "libero_spatial", 0


def _tiny_libero_checkpoint(path, first: dict, chunk: int = 4):
    """A tiny LIBERO policy whose actions follow the image. A random backbone's last hidden state barely
    moves with the image (cosine ~0.997 between LIBERO frames), so every observation decodes the same
    bins. As if trained, the action rows are drawn orthogonal to the mean hidden state of ``first``
    (an observation dict) and a brightened copy of it: what the image changes then decides the bins."""
    from vla.actions import ActionStats
    from vla.config import compose
    from vla.policy import ModelConfig, PolicyConfig, build_policy

    cfg = compose("train", ["model=tiny_qwen2_5_vl", "policy=libero"])
    mcfg = ModelConfig.from_dict({**cfg["model"], "image_size": 56})
    pcfg = PolicyConfig.from_dict({**cfg["policy"], "chunk": chunk})
    rng = np.random.default_rng(5)
    stats = {SUITE: ActionStats.from_actions(rng.uniform(-0.9, 0.9, (400, 7)))}
    torch.manual_seed(0)
    policy = build_policy(mcfg, pcfg, stats)
    policy.eval()
    key = "cameras/agentview/rgb"
    brighter = {**first, key: np.clip(first[key].astype(np.int16) + 12, 0, 255).astype(np.uint8)}
    with torch.no_grad():
        batch = policy._to(policy.encoder.infer_batch(policy.inputs_of([first, brighter])))
        mean = policy._hidden(batch).last_hidden_state[:, -1].float().mean(0)
        mean /= mean.norm()
        rows = torch.randn_like(policy.action_in)
        policy.action_in.data.copy_(0.02 * (rows - (rows @ mean)[:, None] * mean[None]))
    return policy.save_pretrained(path)


def _element(obs) -> dict:
    """What openpi's LIBERO example sends, from our env's observation (already rotated 180 degrees)."""
    return {
        "observation/image": obs.cameras["agentview"].rgb,
        "observation/wrist_image": obs.cameras["wrist"].rgb,
        "observation/state": obs.state,
        "prompt": obs.instruction,
    }


def test_openpi_client_drives_libero_against_the_served_checkpoint_and_memory_agent(tmp_path):
    from envs.registry import make_env
    from vla.agents import make_agent
    from vla.serve.policy import load_batch_policy, make_batch_policy

    env = make_env({"name": "libero", "suite": SUITE, "resolution": 96, "depth": False, "segmentation": False}, TASK)
    low, high = np.array(env.env_spec.action.low), np.array(env.env_spec.action.high)
    try:
        obs, _ = env.reset(seed=7, options={"trial": 0})
        ck = _tiny_libero_checkpoint(tmp_path / "policy", obs.to_dict())
        local = make_agent({"name": "vla", "checkpoint": str(ck), "device": "cpu"})
        # (a connection may wait for its first observation at most idle_timeout_s: LIBERO's first
        # reset renders on the CPU, slowly on a loaded machine)
        cfg = ServeConfig(port=0, protocol="openpi", idle_timeout_s=3600)
        server = PolicyServer(load_batch_policy(str(ck)), cfg, env.env_spec)
        server.start()
        try:
            broker = ActionChunkBroker(WebsocketClientPolicy("127.0.0.1", server.port), action_horizon=4)
            local.reset(env.instruction, env.env_spec)
            chosen = []
            for _ in range(12):
                served_action = broker.infer(_element(obs))["actions"]
                mine = local.act(obs)
                np.testing.assert_allclose(np.clip(served_action, low, high), mine, atol=1e-6)
                chosen.append(mine)
                obs, *_ = env.step(mine)
            # the chunks follow the observation: the compared actions are not one constant answer
            assert len(np.unique(np.round(chosen[::4], 6), axis=0)) > 1, chosen
            assert server.health()["inferred"] == 3  # a chunk of 4 per call
        finally:
            server.stop()
        # the memory agent, served the same way, drives the same env
        memory = make_batch_policy({"name": "memory"})
        with served(memory, expected_spec=env.env_spec, protocol="openpi", idle_timeout_s=3600) as srv:
            client = WebsocketClientPolicy("127.0.0.1", srv.port)  # a new session, where the episode is
            for _ in range(6):
                a = client.infer(_element(obs))["actions"]
                assert a.shape[-1] == 7 and np.isfinite(a).all()
                obs, *_ = env.step(np.clip(a[0], low, high))
            with PolicyClient(srv.url + "/vla") as c:
                (s,) = c.sessions()
                assert s["steps"] == 5 and s["instruction"] == env.instruction and s["env"] == "libero"
    finally:
        env.close()


class ReplayAgent:
    """Replays recorded actions: each call answers the next ``chunk`` of them and moves on by
    ``advance`` (what the client plays of each chunk). It sees only its own calls."""

    name = "replay"

    def __init__(self, seed: int = 0, actions: str = "", chunk: int = 10, advance: int = 5) -> None:
        self.actions = np.asarray(json.loads(actions), dtype=np.float64)
        self.chunk, self.advance, self.i = int(chunk), int(advance), 0

    def reset(self, instruction, spec) -> None:
        self.i = 0

    def act(self, observation) -> np.ndarray:
        a = self.actions[self.i : self.i + self.chunk]
        if len(a) < self.chunk:  # past the recording: keep the gripper as it was, move nothing
            a = np.concatenate([a, np.tile(np.r_[np.zeros(6), self.actions[-1, 6]], (self.chunk - len(a), 1))])
        self.i += self.advance
        return a

    def answer(self, question) -> str:
        return ""


def _expert_actions() -> list[list[float]]:
    """The scripted expert's actions on the task's first official initial state."""
    from envs.registry import make_env
    from vla.agents import make_agent
    from vla.rollout.runtime import run_episode

    class Keep:
        def __init__(self) -> None:
            self.actions: list[list[float]] = []

        def on_episode_start(self, episode) -> None:
            pass

        def on_step(self, episode, action, observation, reward, info) -> None:
            self.actions.append([float(x) for x in action])

        def on_episode_end(self, episode, result) -> None:
            self.result = result

    env = make_env({"name": "libero", "suite": SUITE, "render": False}, TASK)
    keep = Keep()
    try:
        run_episode(env, make_agent({"name": "scripted"}), {"task_id": TASK, "trial": 0}, [keep], seed=7)
    finally:
        env.close()
    assert keep.result.success and len(keep.actions) == keep.result.steps, keep.result
    return keep.actions


def test_the_openpi_style_libero_eval_script_runs_through_vla_serve_reports_success_and_resumes(tmp_path):
    from envs.libero.config import ENV_SEED
    from scripts.openpi_libero_eval import evaluate, read_done
    from vla.serve.policy import make_batch_policy

    replan_steps, chunk = 5, 10
    actions = _expert_actions()
    agent = {"name": "tests.test_serve_openpi_libero:ReplayAgent", "actions": json.dumps(actions)}
    policy = make_batch_policy({**agent, "chunk": chunk, "advance": replan_steps})
    ours = __import__("envs.registry", fromlist=["make_env"]).make_env({"name": "libero", "suite": SUITE}, TASK)
    spec, instruction = ours.env_spec, ours.instruction
    ours.close()
    out, logged = tmp_path / "eval", []
    with served(policy, expected_spec=spec, protocol="openpi", idle_timeout_s=3600) as srv:
        # the expert was recorded on our env, whose LIBERO env is seeded with ENV_SEED
        run = dict(suite=SUITE, tasks=[TASK], trials=1, out=out, replan_steps=replan_steps, resolution=64)
        summary = evaluate("127.0.0.1", srv.port, seed=ENV_SEED, log=logged.append, **run)
        with PolicyClient(srv.url + "/vla") as c:
            (s,) = c.sessions()
        (episode,) = read_done(out / "episodes.jsonl")
        assert summary["episodes"] == summary["successes"] == 1, (summary, episode)
        assert summary["success_rate"] == 1.0 and len(logged) == 1
        assert episode["steps"] == len(actions) and s["instruction"] == instruction
        assert s["infers"] == episode["infers"] == math.ceil(len(actions) / replan_steps)
        # a rerun finds the episode done and steps nothing; other settings are refused
        again = evaluate("127.0.0.1", srv.port, seed=ENV_SEED, log=logged.append, **run)
        assert again == summary and len(logged) == 1 and len(read_done(out / "episodes.jsonl")) == 1
        with pytest.raises(ValueError, match="other settings.*replan_steps"):
            evaluate("127.0.0.1", srv.port, seed=ENV_SEED, **{**run, "replan_steps": 4})
    assert json.loads((out / "summary.json").read_text()) == summary
