"""The pipeline is exact (docs/POLICY.md, "Does the policy act as it was trained?"): one expert
demonstration on one LIBERO init state, the tiny policy over-fitted to it with the LIBERO recipe
(both cameras, the proprio token, chunks of 8 decoded in parallel), replayed in closed loop from the
same init state, succeeds. Any mismatch between training and acting (image orientation,
normalisation, chunk order, the gripper's sign, un-normalisation, clipping) fails it. Slow: ~2 min
to record, ~8 min to train (600 steps) on 2 idle cores, ~1 min to replay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VENV_BIN, cli_env

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_an_over_fitted_policy_replays_its_demonstration_in_closed_loop(tmp_path):
    env = ["env=libero", "env.suite=libero_object", "env.cameras=[agentview,wrist]", "env.depth=false"]
    env += ["env.segmentation=false", "env.init_states=sampled", "eval.tasks=[0]"]
    r = subprocess.run(
        [str(VENV_BIN / "vla-rollout"), *env, "eval.trials_per_task=1", "agent=scripted"]
        + [f"record={tmp_path / 'demo'}", f"out={tmp_path / 'rec'}", "progress=false"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (demo,) = sorted((tmp_path / "demo").glob("*_demo.hdf5"))
    train = [
        "model=tiny_qwen2_5_vl",
        "policy=libero_oft",
        "data=libero",
        f"data.paths=[{demo}]",
        "data.val_fraction=0",
        "train.steps=600",
        "train.batch_size=16",
        "train.lr=5e-4",
        "train.vision_lr_scale=1.0",
        "train.val_every=0",
        "train.save_every=0",
        "train.loader_workers=1",
        "progress=false",
        f"out={tmp_path / 'fit'}",
    ]
    r = subprocess.run([sys.executable, "-m", "vla.train.cli", *train], capture_output=True, text=True, env=cli_env())
    assert r.returncode == 0, r.stderr[-3000:]
    sys.path.insert(0, str(ROOT / "scripts"))
    from replay_check import check

    res = check(demo, tmp_path / "fit" / "policy")
    assert res["reset_image_max_diff"] == {"agentview": 0, "wrist": 0} and res["reset_state_max_diff"] == 0.0
    assert res["open_loop_demo_success"]
    assert res["closed_loop_success"], {k: v for k, v in res.items() if k not in ("ee_deviation_m",)}
