"""The policy on tiny models of the real classes (Qwen2.5-VL, Qwen3-VL) with the real Qwen tokenizer:
the action head's loss, constrained decoding (the cached loop against generate()), export and load,
and errors at load time."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vla.actions import ActionStats  # noqa: E402
from vla.config import compose  # noqa: E402
from vla.policy import ModelConfig, PolicyConfig, build_policy, load_policy  # noqa: E402


def _configs(model="tiny_qwen2_5_vl", **policy):
    cfg = compose("train", [f"model={model}", "policy=house"])
    mcfg = ModelConfig.from_dict({**cfg["model"], "image_size": 56 if model == "tiny_qwen2_5_vl" else 64})
    return mcfg, PolicyConfig.from_dict({**cfg["policy"], **policy})


def _stats():
    rng = np.random.default_rng(0)
    return {"house_nav": ActionStats.from_actions(rng.uniform([-0.25, -0.25, -0.5], [0.25, 0.25, 0.5], (200, 3)))}


def _obs(n, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {
            "prompt": "go to the bed",
            "step": 0,
            "state": np.zeros(3),
            "cameras/ego/rgb": rng.integers(0, 255, (48, 48, 3), dtype=np.uint8),
        }
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def policy():
    mcfg, pcfg = _configs(chunk=2)
    p = build_policy(mcfg, pcfg, _stats())
    p.eval()
    return p


def test_untrained_action_loss_is_uniform_over_256_bins(policy):
    """At initialisation the 256-way action head is near uniform: loss per token ~ ln 256."""
    inputs = policy.inputs_of(_obs(3))
    rng = np.random.default_rng(1)
    for mi in inputs:
        mi.actions, mi.dataset = rng.uniform(-0.2, 0.2, (2, 3)), "house_nav"
    batch = policy.encoder.train_batch(inputs)
    assert len(batch["action_pos"]) == 3 * 2 * 3  # samples x chunk x dims
    # the target ids sit right after each prompt: position p predicts p + 1
    ids = batch["input_ids"].flatten()
    np.testing.assert_array_equal(
        ids[batch["action_pos"] + 1].numpy() - policy.actions.first_id, batch["action_bins"].numpy()
    )
    with torch.no_grad():
        out = policy.loss(batch)
    per_token = float(out["action_loss"]) / float(out["action_tokens"])
    assert abs(per_token - math.log(256)) < 0.3


def test_cached_decoding_loop_equals_generate_and_is_always_valid(policy):
    batch = policy.encoder.infer_batch(policy.inputs_of(_obs(3, seed=2)))
    loop = policy.decode_actions(batch)
    ref = policy.generate_actions(batch)
    np.testing.assert_array_equal(loop, ref)  # the hand-rolled KV-cache loop is exactly generate() masked to actions
    assert loop.shape == (3, 6) and loop.min() >= 0 and loop.max() < 256
    actions = policy.infer_batch(_obs(3, seed=2))
    s = policy.stats["house_nav"]
    assert actions.shape == (3, 2, 3) and np.isfinite(actions).all()
    assert np.all(actions >= s.q01 - 1e-9) and np.all(actions <= s.q99 + 1e-9)  # un-normalised into the data's range


def test_batch_inference_matches_one_at_a_time(policy):
    obs = _obs(4, seed=3)
    together = policy.infer_batch(obs)
    alone = np.concatenate([policy.infer_batch([o]) for o in obs])
    np.testing.assert_allclose(together, alone)  # left padding changes nothing


def test_export_and_load_by_path_give_the_same_actions(policy, tmp_path):
    obs = _obs(2, seed=4)
    with torch.no_grad():
        policy.action_in.data += 0.05 * torch.randn_like(policy.action_in)  # as if trained: rows differ from the init
    before = policy.infer_batch(obs)
    path = policy.save_pretrained(tmp_path / "policy")
    for f in ("config.json", "vla_policy.json", "dataset_statistics.json", "tokenizer.json"):
        assert (path / f).is_file(), f
    loaded = load_policy(path)
    loaded.eval()
    np.testing.assert_allclose(loaded.infer_batch(obs), before)
    stats = json.loads((path / "dataset_statistics.json").read_text())
    assert set(stats["house_nav"]["action"]) >= {"q01", "q99", "mean", "std", "min", "max", "mask"}


def test_load_errors_name_the_file_and_the_mismatch(policy, tmp_path):
    path = policy.save_pretrained(tmp_path / "p")
    bad = tmp_path / "missing_stats"
    shutil.copytree(path, bad)
    (bad / "dataset_statistics.json").unlink()
    with pytest.raises(ValueError, match="dataset_statistics.json is missing"):
        load_policy(bad)
    wrong_dim = tmp_path / "wrong_dim"
    shutil.copytree(path, wrong_dim)
    stats = json.loads((wrong_dim / "dataset_statistics.json").read_text())
    for k in ("q01", "q99", "mean", "std", "min", "max", "mask"):
        stats["house_nav"]["action"][k] = stats["house_nav"]["action"][k] + stats["house_nav"]["action"][k][:1]
    (wrong_dim / "dataset_statistics.json").write_text(json.dumps(stats))
    with pytest.raises(ValueError, match="4-dim but .*action_dim=3"):
        load_policy(wrong_dim)
    mismatch = tmp_path / "mismatch"
    shutil.copytree(path, mismatch)
    meta = json.loads((mismatch / "vla_policy.json").read_text())
    meta["action_tokenizer"]["vocab_size"] = 151669  # decoding with len(tokenizer): the VST repo's slip
    (mismatch / "vla_policy.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError):
        load_policy(mismatch)
    with pytest.raises(ValueError, match="not a policy directory"):
        load_policy(tmp_path)


def test_the_house_policies_take_the_action_dimension_from_the_data(policy):
    """policy=house leaves action_dim to the data: [forward, left, yaw] (3 dims), or with
    env.stop_action=true the stop flag too (4); datasets that disagree are refused."""
    assert _configs()[1].action_dim == 0 and policy.config.action_dim == 3
    from vla.policy import resolve_action_dim

    rng = np.random.default_rng(2)
    four = ActionStats.from_actions(rng.uniform(-0.25, 0.25, (50, 4)))
    assert resolve_action_dim(_configs()[1], {"house_nav": four}).action_dim == 4
    assert resolve_action_dim(_configs(action_dim=3)[1], {"house_nav": four}).action_dim == 3  # fixed: kept
    with pytest.raises(ValueError, match="datasets disagree"):
        resolve_action_dim(_configs()[1], {"a": four, **_stats()})


def test_qwen3_vl_and_added_token_placement():
    mcfg, pcfg = _configs("tiny_qwen3_vl", placement="added_tokens")
    p = build_policy(mcfg, pcfg, _stats())
    p.eval()
    tok = p.processor.tokenizer
    assert p.actions.first_id == tok.convert_tokens_to_ids("<|action_0|>") and p.actions.vocab_size == len(tok)
    batch = p.encoder.infer_batch(p.inputs_of(_obs(2, seed=5)))
    np.testing.assert_array_equal(p.decode_actions(batch), p.generate_actions(batch))
