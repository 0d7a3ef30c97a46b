"""``train.init_from``: a run that starts from another policy's weights (DAgger rounds, a VLA from a
spatially tuned backbone): every tensor whose name and shape match is copied, the rest stays as built."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VENV_BIN, cli_env

torch = pytest.importorskip("torch")

BASE = [
    "model=tiny_qwen2_5_vl",
    "model.image_size=56",
    "policy=house",
    "data=house_nav",
    "data.val_fraction=0",
    "train.loader_workers=0",
    "train.val_every=0",
    "train.batch_size=2",
    "train.export=false",
    "train.plot=false",
    "progress=false",
]


def _run(args, check=True):
    r = subprocess.run(
        [sys.executable, "-m", "vla.train.cli", *BASE, *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=600,
        cwd=Path(__file__).parents[1],
    )
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    root = tmp_path_factory.mktemp("init")
    args = ["env=house", "env.seed=900001", "env.use_meshes=false", "env.width=64", "env.height=64"]
    args += ["env.max_steps=30", "env.num_trials=1", "agent=scripted", "eval.trials_per_task=1", "eval.workers=0"]
    args += [f"record={root / 'demos'}", f"out={root / 'roll'}", "progress=false"]
    r = subprocess.run([str(VENV_BIN / "vla-rollout"), *args], capture_output=True, text=True, env=cli_env())
    assert r.returncode == 0, r.stderr[-2000:]
    return root / "demos"


@pytest.mark.slow  # ~30 s
def test_a_run_starts_from_another_policys_matching_weights(episode, tmp_path):
    from safetensors.torch import load_file

    first = tmp_path / "first"
    _run([f"data.paths=[{episode}]", "train.steps=2", "train.lr=1e-2", f"out={first}"])
    src = first / "checkpoints" / "step_2"
    second = tmp_path / "second"  # another chunk and decoding: the query slots cannot come from the first
    _run(
        [f"data.paths=[{episode}]", "train.steps=1", "train.lr=1e-9", "policy.chunk=2", "policy.decoding=parallel"]
        + [f"train.init_from={src}", f"out={second}"]
    )
    report = json.loads((second / "init_from.json").read_text())
    assert report["loaded"] > 50 and report["kept_as_built"] == ["query_slots"]
    a = load_file(str(src / "policy_state.safetensors"))
    b = load_file(str(second / "checkpoints" / "step_1" / "policy_state.safetensors"))
    name = next(k for k in a if "layers.0.mlp.gate_proj" in k)
    torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6)  # copied (lr 1e-9 moved nothing)
    r = _run(
        [f"data.paths=[{episode}]", "train.steps=1", f"train.init_from={tmp_path}", f"out={tmp_path / 'x'}"], False
    )
    assert r.returncode != 0 and "init_from" in r.stderr


def test_a_memory_policy_trains_without_memory_options_as_the_docs_say(episode, tmp_path):
    """`vla-train ... policy=house_memory data=house_nav data.paths=[...]` (no data.memory): the memory
    inputs follow from the policy's (a map of the model's image size), saved with the checkpoint."""
    out = tmp_path / "mem"
    _run(["policy=house_memory", f"data.paths=[{episode}]", "train.steps=1", f"out={out}"])
    meta = json.loads((out / "checkpoints" / "step_1" / "vla_policy.json").read_text())
    assert meta["policy"]["memory"]["map_size"] == [56, 56] and "topdown" in meta["policy"]["memory"]["inputs"]
