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


def test_the_policy_owns_its_memory_inputs(tmp_path):
    """policy=house_memory as vla-train settles it: the map at the model's image size when inputs.image_size
    is 0 (the default; a (0, 0) map was refused before), saved typed with the policy and rebuilt from the
    directory alone, the same in every place that runs it; a policy without memory inputs has none."""
    from vla.policy import memory_inputs, read_policy_config
    from vla.policy.config import POLICY_FILE
    from vla.transforms.map_inputs import MemoryInputsConfig

    cfg = compose("train", ["model=tiny_qwen2_5_vl", "policy=house_memory"])
    pcfg = PolicyConfig.from_dict(cfg["policy"])
    assert pcfg.inputs.image_size == 0 and pcfg.memory is None
    settled = pcfg.with_memory(None, ModelConfig.from_dict(cfg["model"]).image_size)
    assert settled.memory == MemoryInputsConfig(inputs=("topdown", "objects", "text"), map_size=(112, 112))
    assert pcfg.with_memory({"map_size": [64, 64]}, 112).memory.map_size == (64, 64)  # data.memory wins
    (tmp_path / POLICY_FILE).write_text(json.dumps({"policy": settled.to_dict()}))
    assert read_policy_config(tmp_path) == settled
    inputs = memory_inputs(tmp_path, seed=3)
    assert inputs.config == settled.memory and inputs.seed_value == 3
    assert memory_inputs(_configs()[1]) is None
    assert memory_inputs(_configs()[1], always=True).config == MemoryInputsConfig()  # to answer from a memory
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="vla_policy.json is missing"):
        read_policy_config(tmp_path / "empty")


@pytest.mark.parametrize("train_embeddings", [False, True])
def test_freeze_embeddings_decides_whether_a_training_step_moves_the_input_embedding(train_embeddings):
    """``policy.freeze_embeddings`` (true by default; ``policy.freeze_embeddings=false`` is what the proofs'
    ``--train-embeddings`` passes): frozen, the backbone's input embedding has no gradient, is not in the
    optimizer and one optimisation step (a real forward and backward, the trainer's own optimizer) leaves
    it bit for bit, while the action rows do move (so the step did happen); trainable, the same step changes
    the rows of the tokens the batch reads, and only those (AdamW without weight decay: a row without a
    gradient stays)."""
    from vla.train.config import TrainConfig
    from vla.train.optim import make_optimizer

    over = ["policy.freeze_embeddings=false"] if train_embeddings else []
    cfg = compose("train", ["model=tiny_qwen2_5_vl", "policy=house", *over])
    assert cfg["policy"]["freeze_embeddings"] is not train_embeddings
    mcfg = ModelConfig.from_dict({**cfg["model"], "image_size": 56})
    torch.manual_seed(0)
    p = build_policy(mcfg, PolicyConfig.from_dict({**cfg["policy"], "chunk": 2}), _stats())
    p.train()
    emb = p.embedding.base  # the backbone's own nn.Embedding under the policy's row swap
    assert emb.weight.requires_grad is train_embeddings
    opt = make_optimizer(p, TrainConfig(lr=1e-2))
    in_optimizer = any(q is emb.weight for g in opt.param_groups for q in g["params"])
    assert in_optimizer is train_embeddings
    inputs = p.inputs_of(_obs(2, seed=6))
    rng = np.random.default_rng(6)
    for mi in inputs:
        mi.actions, mi.dataset = rng.uniform(-0.2, 0.2, (2, 3)), "house_nav"
    batch = p.encoder.train_batch(inputs)
    before, action_before = emb.weight.detach().clone(), p.action_in.detach().clone()
    opt.zero_grad(set_to_none=True)
    out = p.loss(batch)
    (out["action_loss"] + out["text_loss"]).backward()
    opt.step()
    assert not torch.equal(p.action_in.detach(), action_before)  # the step trained the action rows either way
    changed = set(torch.nonzero((emb.weight.detach() != before).any(dim=1)).flatten().tolist())
    if not train_embeddings:
        assert emb.weight.grad is None and changed == set()
        return
    assert emb.weight.grad is not None and float(emb.weight.grad.abs().sum()) > 0
    read = set(batch["input_ids"].flatten().tolist())
    words = set(p.processor.tokenizer(" to the bed", add_special_tokens=False)["input_ids"])  # as mid-prompt
    assert len(words) == 3 and words <= changed <= read  # the prompt's words moved; no row the batch does not read


def test_qwen3_vl_and_added_token_placement():
    mcfg, pcfg = _configs("tiny_qwen3_vl", placement="added_tokens")
    p = build_policy(mcfg, pcfg, _stats())
    p.eval()
    tok = p.processor.tokenizer
    assert p.actions.first_id == tok.convert_tokens_to_ids("<|action_0|>") and p.actions.vocab_size == len(tok)
    batch = p.encoder.infer_batch(p.inputs_of(_obs(2, seed=5)))
    np.testing.assert_array_equal(p.decode_actions(batch), p.generate_actions(batch))


# ------------------------------------------------------------------ proprio token and parallel decoding
def _proprio_stats():
    rng = np.random.default_rng(1)
    return {"house_nav": ActionStats.from_actions(rng.normal(size=(200, 5)))}


def _obs_with_state(n, seed=0, prompts=("go to the bed",)):
    out = _obs(n, seed)
    rng = np.random.default_rng(seed + 100)
    for i, o in enumerate(out):
        o["state"] = rng.normal(size=5)
        o["prompt"] = prompts[i % len(prompts)]
    return out


@pytest.fixture(scope="module")
def oft_policy():
    """OpenVLA-OFT's recipe at tiny size: chunks of 2 decoded in parallel, the state as one projected token."""
    mcfg, pcfg = _configs(chunk=2, decoding="parallel", inputs={"cameras": ["ego"], "proprio": "token"})
    p = build_policy(mcfg, pcfg, _stats(), proprio=_proprio_stats())
    p.eval()
    return p


def test_parallel_decoding_equals_the_training_forward_and_reads_the_block_both_ways(oft_policy):
    """Acting and training see the same thing: the bins decoded in one pass (left-padded prompts of
    different lengths) are the argmax the training loss reads (right-padded). And the action block is
    bidirectional: the first query's prediction depends on the last query's embedding."""
    p = oft_policy
    obs = _obs_with_state(3, seed=6, prompts=("go to the bed", "go to the big wooden wardrobe in the corner"))
    decoded = p.decode_actions(p.encoder.infer_batch(p.inputs_of(obs)))
    assert decoded.shape == (3, 2 * 3) and decoded.min() >= 0 and decoded.max() < 256
    inputs = p.inputs_of(obs)
    for mi in inputs:
        mi.actions, mi.dataset = np.zeros((2, 3)), "house_nav"
    train = p.encoder.train_batch(inputs)
    assert len(set(train["attention_mask"].sum(1).tolist())) == 2  # padding is exercised
    p.return_predictions = True
    try:
        with torch.no_grad():
            pred = p.loss(train)["action_pred"].numpy().reshape(3, 6)
    finally:
        p.return_predictions = False
    np.testing.assert_array_equal(pred, decoded)
    batch = p._to(p.encoder.infer_batch(p.inputs_of(obs[:1])))
    with torch.no_grad():
        first = p._hidden(batch).last_hidden_state[0, -6].clone()
        saved = p.query_slots.data[-1].clone()
        p.query_slots.data[-1] += 1.0
        try:
            moved = p._hidden(batch).last_hidden_state[0, -6]
        finally:
            p.query_slots.data[-1] = saved
    assert not torch.allclose(first, moved)  # a causal mask would leave the first query untouched


def test_the_proprio_token_carries_the_state_and_survives_export(oft_policy, tmp_path):
    p = oft_policy
    obs = _obs_with_state(2, seed=7)
    batch = p.encoder.infer_batch(p.inputs_of(obs))
    assert int((batch["input_ids"] == p.proprio_id).sum()) == 2 and batch["proprio"].shape == (2, 5)
    assert batch["proprio"].abs().max() <= 1.0  # normalised with the proprio statistics, clipped like actions
    with torch.no_grad():
        p.proprio_proj.net[-1].bias += 0.3  # as if trained
        h0 = p._hidden(p._to(batch)).last_hidden_state[:, -1].clone()
        other = p.encoder.infer_batch(p.inputs_of([{**o, "state": -o["state"]} for o in obs]))
        assert not torch.allclose(h0, p._hidden(p._to(other)).last_hidden_state[:, -1])
    before = p.infer_batch(obs)
    path = p.save_pretrained(tmp_path / "oft")
    assert json.loads((path / "dataset_statistics.json").read_text())["house_nav"]["proprio"]["q01"]
    loaded = load_policy(path)
    loaded.eval()
    np.testing.assert_array_equal(loaded.infer_batch(obs), before)
    (path / "vla_extra.safetensors").unlink()
    with pytest.raises(ValueError, match="vla_extra.safetensors is missing"):
        load_policy(path)
    with pytest.raises(ValueError, match="inputs.proprio=token.*no state|has none"):
        p.infer_batch([{k: v for k, v in obs[0].items() if k != "state"}])


def test_the_proprio_vector_is_the_named_observation_keys():
    """``inputs.proprio_keys``: the proprio token reads the named keys, concatenated in order (a base's
    wheel odometry ``sensors/motion`` instead of its odometry pose)."""
    from vla.policy.inputs import InputConfig, InputTransform

    cfg = InputConfig(
        cameras=("ego",), image_size=32, proprio="token", proprio_keys=("sensors/motion", "state"), augment=False
    )
    (o,) = _obs_with_state(1, seed=3)
    o["sensors/motion"] = np.array([0.25, -0.1, 0.5])
    mi = InputTransform(cfg).observation(o)
    np.testing.assert_array_equal(mi.state, np.concatenate([[0.25, -0.1, 0.5], o["state"]]))
    assert InputConfig.from_dict(cfg.to_dict()) == cfg  # saved with the checkpoint as a list
    with pytest.raises(ValueError, match=r"has none of \['sensors/motion'\]"):
        InputTransform(cfg).observation({k: v for k, v in o.items() if k != "sensors/motion"})
    with pytest.raises(
        ValueError, match="proprio_keys must name 'state', 'sensors/<name>' or 'memory/origins' / 'memory/routes'"
    ):
        InputConfig(proprio="token", proprio_keys=("memory/text",))


def test_autoregressive_decoding_with_the_proprio_token_equals_generate():
    mcfg, pcfg = _configs(chunk=2, inputs={"cameras": ["ego"], "proprio": "token"})
    p = build_policy(mcfg, pcfg, _stats(), proprio=_proprio_stats())
    p.eval()
    obs = _obs_with_state(2, seed=8, prompts=("go to the bed", "go to the sofa now"))
    batch = p.encoder.infer_batch(p.inputs_of(obs))
    np.testing.assert_array_equal(p.decode_actions(batch), p.generate_actions(batch))


@pytest.mark.parametrize("model", ["tiny_qwen2_5_vl", "tiny_qwen3_vl"])
def test_the_encoders_fast_path_reproduces_the_processor_exactly(model):
    """Token ids, token types, image patches and grids without the processor (vla/policy/pixels.py) are
    the processor's own, bit for bit, on a real policy prompt with two camera images."""
    from vla.policy.encode import chat_text
    from vla.policy.inputs import IMAGE
    from vla.policy.pixels import FastProcessor

    mcfg, _ = _configs(model)
    from vla.policy.backbone import load_backbone

    _, processor = load_backbone(mcfg, "cpu")
    fast = FastProcessor(processor, mcfg.image_size)
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (mcfg.image_size, mcfg.image_size, 3), dtype=np.uint8) for _ in range(2)]
    text = chat_text(IMAGE * 2 + "What action should the robot take to put the bowl on the plate?")
    ref = processor(text=[text], images=images, return_tensors="pt")
    mine = fast(text, images)
    assert mine["input_ids"] == ref["input_ids"][0].tolist()
    assert mine["mm_token_type_ids"] == ref["mm_token_type_ids"][0].tolist()
    assert torch.equal(mine["pixel_values"], ref["pixel_values"].float())
    assert torch.equal(mine["image_grid_thw"], ref["image_grid_thw"])


@pytest.mark.parametrize("model", ["tiny_qwen2_5_vl", "tiny_qwen3_vl"])
def test_the_patch_embedding_runs_as_a_matrix_product_with_the_convolutions_numbers(model):
    from vla.policy.backbone import load_backbone

    backbone, _ = load_backbone(_configs(model)[0], "cpu")
    embed = backbone.model.visual.patch_embed
    x = torch.randn(32, embed.proj.weight[0].numel())
    assert "forward" in vars(embed)  # replaced on this instance
    torch.testing.assert_close(embed(x), type(embed).forward(embed, x), rtol=0, atol=1e-4)


def test_the_object_table_jitter_rewrites_its_numbers_in_training_only():
    """``inputs.memory_text_jitter``: in training the object table is rewritten from its rows with noisy
    directions and distances (categories and order kept); without noise the rewrite is the memory's own
    text, and inference (no rng) reads the table as given."""
    from envs.registry import make_env
    from vla.policy.inputs import InputConfig, InputTransform, JitterTable
    from vla.transforms.map_inputs import MemoryInputs

    env = make_env({"name": "house", "seed": 900001, "max_steps": 4, "use_meshes": False, "width": 96, "height": 96}, 0)
    try:
        obs, _ = env.reset(options={"trial": 0})
        inputs = MemoryInputs({"inputs": ["objects", "text"], "map_size": [32, 32]})
        inputs.reset(env.env_spec)
        d = inputs(obs).to_dict()
        with_routes = MemoryInputs({"inputs": ["objects", "text", "routes"], "map_size": [32, 32]})
        with_routes.reset(env.env_spec)
        r = with_routes(obs).to_dict()
    finally:
        env.close()
    # with routes (the memory's ways, after the table) the rewrite keeps them, jittered alike
    rng = np.random.default_rng(0)
    assert r["memory/text"].startswith(d["memory/text"] + "; routes: ") and len(r["memory/routes/kind"]) >= 1
    assert JitterTable(0.0, 0.0)(r, rng)["memory/text"] == r["memory/text"]
    noisy = JitterTable(5.0, 0.2)(r, rng)["memory/text"]
    assert noisy.count("; routes: ") == 1 and noisy.split("; routes: ")[1] != r["memory/text"].split("; routes: ")[1]
    text = d["memory/text"]
    assert text != "nothing seen yet" and text.count(";") >= 1  # a table of several rows to jitter
    rng = np.random.default_rng(0)
    assert JitterTable(0.0, 0.0)(d, rng)["memory/text"] == text  # the rows rewrite to the very same words
    cfg = InputConfig(cameras=("ego",), image_size=32, memory_text=True, memory_text_jitter=(5.0, 0.2), augment=False)
    t = InputTransform(cfg)
    assert f"Objects: {text}." in t.observation(d).text  # inference: as given
    noisy = [t.observation(d, np.random.default_rng(s)).text for s in range(4)]
    assert all(f"Objects: {text}." not in n for n in noisy) and len(set(noisy)) == 4
    rows = [r.split(":")[0] for r in text.split("; ")]
    for n in noisy:
        assert [r.split(":")[0] for r in n.split("Objects: ")[1].rstrip(".").split("; ")] == rows
    assert InputConfig.from_dict(cfg.to_dict()) == cfg  # saved with the checkpoint
    with pytest.raises(ValueError, match="no memory/objects"):
        t.observation({k: v for k, v in d.items() if not k.startswith("memory/objects/")}, rng)
    with pytest.raises(ValueError, match="memory_text_jitter must be"):
        InputConfig(memory_text_jitter=(-1.0, 0.0))
    # a training run whose memory inputs hold no rows to jitter is refused before its first sample
    policy = PolicyConfig(inputs=cfg)
    assert policy.with_memory({"inputs": ["objects", "text"]}, 32).memory.inputs
    with pytest.raises(ValueError, match="add 'objects' to data.memory.inputs"):
        policy.with_memory({"inputs": ["topdown", "text"]}, 32)


def test_a_memory_of_frames_shows_the_earlier_frames_after_the_cameras_and_before_the_map():
    """``inputs.history=K``: the K earlier frames (``memory/frames/<i>``) follow the current cameras in the
    images and in the prompt's markers, the map stays last; an observation without them is refused."""
    from vla.policy.inputs import IMAGE, InputConfig, InputTransform

    cfg = InputConfig(cameras=("ego",), image_size=32, history=2, memory_map=True, augment=False)
    assert cfg.frames_camera == "ego" and InputConfig.from_dict(cfg.to_dict()) == cfg
    (o,) = _obs_with_state(1, seed=4)
    rgb = o["cameras/ego/rgb"]
    frames = [np.full_like(rgb, 10), np.full_like(rgb, 20)]
    o.update({"memory/frames/0": frames[0], "memory/frames/1": frames[1], "memory/topdown": np.full_like(rgb, 99)})
    mi = InputTransform(cfg).observation(o)
    assert [int(im[0, 0, 0]) for im in mi.images[1:]] == [10, 20, 99]
    assert mi.text.count(IMAGE) == 4 and mi.text.index("Earlier views") < mi.text.index("Map of what")
    with pytest.raises(ValueError, match="trained with 2 earlier frames"):
        InputTransform(cfg).observation({k: v for k, v in o.items() if not k.startswith("memory/frames")})
    with pytest.raises(ValueError, match="inputs.history must be"):
        InputConfig(history=-1)
