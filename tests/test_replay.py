"""The pipeline is exact (docs/POLICY.md, "Does the policy act as it was trained?"): one expert
demonstration on one LIBERO init state, the tiny policy over-fitted to it with the LIBERO recipe
(both cameras, the proprio token, chunks of 8 decoded in parallel), replayed in closed loop from the
same init state, succeeds. Any mismatch between training and acting (image orientation,
normalisation, chunk order, the gripper's sign, un-normalisation, clipping) fails it. Slow: ~2 min
to record, ~8 min to train (600 steps) on 2 idle cores, ~1 min to replay.

The same for the apartments: one memory-navigator episode recorded through the policy's own bins
(``agent.execute_bins=256``), the memory policy (map, object table, motion token, chunks of 4)
over-fitted to it with ``data.action_normalization=spec``, replayed in closed loop: it retraces the
demonstration to the millimetre and stops at the target."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VENV_BIN, cli_env

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def _record(tmp_path: Path, args: list[str]) -> Path:
    """One recorded demonstration file (``vla-rollout ARGS record=...``)."""
    r = subprocess.run(
        [
            str(VENV_BIN / "vla-rollout"),
            *args,
            f"record={tmp_path / 'demo'}",
            f"out={tmp_path / 'rec'}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (demo,) = sorted((tmp_path / "demo").glob("*_demo.hdf5"))
    return demo


def _fit(tmp_path: Path, demo: Path, args: list[str]) -> Path:
    """The tiny policy over-fitted to ``demo`` (no val episode, no checkpoints): its policy directory."""
    common = [f"data.paths=[{demo}]", "data.val_fraction=0", "train.lr=5e-4", "train.vision_lr_scale=1.0"]
    common += ["train.val_every=0", "train.save_every=0", "progress=false", f"out={tmp_path / 'fit'}"]
    r = subprocess.run(
        [sys.executable, "-m", "vla.train.cli", "model=tiny_qwen2_5_vl", *args, *common],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp_path / "fit" / "policy"


def test_an_over_fitted_policy_replays_its_demonstration_in_closed_loop(tmp_path):
    env = ["env=libero", "env.suite=libero_object", "env.cameras=[agentview,wrist]", "env.depth=false"]
    env += ["env.segmentation=false", "env.init_states=sampled", "eval.tasks=[0]"]
    demo = _record(tmp_path, [*env, "eval.trials_per_task=1", "agent=scripted"])
    train = ["policy=libero_oft", "data=libero", "train.steps=600", "train.batch_size=16", "train.loader_workers=1"]
    policy = _fit(tmp_path, demo, train)
    from vla.experiment.replay_check import check

    res = check(demo, policy)
    assert res["reset_image_max_diff"] == {"agentview": 0, "wrist": 0} and res["reset_state_max_diff"] == 0.0
    assert res["open_loop_demo_success"]
    assert res["closed_loop_success"], {k: v for k, v in res.items() if k not in ("ee_deviation_m",)}


def test_an_over_fitted_memory_policy_retraces_its_apartment_demonstration(tmp_path):
    from vla.experiment.common import HOUSE_MEMORY  # the apartments experiments' memory inputs and navigator
    from vla.experiment.house import NAVIGATOR

    nav = f"+agent.teacher.navigator={NAVIGATOR}"
    house = ["env=house", "env.stop_action=true", "env.split=train", "env.num_scenes=1", "eval.first_trial=1"]
    demo = _record(
        tmp_path, [*house, "eval.trials_per_task=1", "agent=dagger", "agent.beta=1.0", "agent.execute_bins=256", nav]
    )
    train = [
        "policy=house_memory",
        "policy.action_dim=4",
        "policy.chunk=4",
        "policy.decoding=parallel",
        "policy.inputs.proprio=token",
        "policy.inputs.proprio_keys=[sensors/motion]",
        "data=house_nav",
        "data.cameras=[ego]",
        "data.action_mask=[true,true,true,false]",
        "data.action_normalization=spec",
        f"data.memory={HOUSE_MEMORY}",
        "train.steps=1000",
        "train.batch_size=8",
        "train.loader_workers=0",
    ]
    policy = _fit(tmp_path, demo, train)
    from vla.experiment.replay_check import check

    res = check(demo, policy, memory_cache=tmp_path / "check_cache")
    assert res["reset_state_max_diff"] == 0.0 and res["memory_topdown_max_pixels_differing"] == 0
    assert res["open_loop_quantised_success"] and res["open_loop_quantised_max_path_deviation_m"] == 0.0
    brief = {k: v for k, v in res.items() if k not in ("path_deviation_m", "teacher_forced_l1")}
    assert res["closed_loop_success"] and res["first_step_off_path"] is None, brief
    assert max(res["path_deviation_m"]) < 1e-3, brief
