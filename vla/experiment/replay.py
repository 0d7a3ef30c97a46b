"""The replay proof (``make proof``): one scripted demonstration, a policy over-fitted to it, replayed in
closed loop from the demonstration's own start -- a pipeline check on a training state, not a held-out
test (docs/POLICY.md, "Does the policy act as it was trained?")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .common import BIN, run


def replay(a) -> dict:
    R = Path(a.root)
    if a.stage in ("all", "record"):
        run(
            [
                str(BIN / "vla-rollout"),
                "env=libero",
                f"env.suite={a.suite}",
                "env.init_states=sampled",
                "env.cameras=[agentview,wrist]",
                "env.depth=false",
                "env.segmentation=false",
                f"eval.tasks=[{a.task}]",
                f"eval.first_trial={a.record_first}",
                f"eval.trials_per_task={a.demos}",
                "agent=scripted",
                f"record={R / 'demo'}",
                f"out={R / 'rec'}",
                "progress=false",
            ],
            R / "logs/record.log",
        )
    if a.stage in ("all", "train"):
        run(
            [
                str(BIN / "vla-train"),
                "model=tiny_qwen2_5_vl",
                "policy=libero_oft",
                "data=libero",
                f"data.paths=[{R / 'demo'}]",
                "data.val_fraction=0",
                f"train.steps={a.steps}",
                f"train.batch_size={a.batch_size}",
                f"train.lr={a.lr}",
                "train.vision_lr_scale=1.0",
                # one torch thread: the sums run in one order on any machine, so the over-fit (which a
                # difference in the seventh digit can tip off its path) is the same policy everywhere
                "train.threads=1",
                f"out={R / 'fit'}",
                "progress=false",
            ],
            R / "logs/train.log",
        )
    if a.stage in ("all", "test"):
        demos = sorted(str(p) for p in (R / "demo").glob("*_demo.hdf5"))
        if not demos:
            raise SystemExit(f"{R / 'demo'}: no recorded demonstration to replay (stage=record first)")
        cmd = [sys.executable, "-m", "vla.experiment.replay_check", demos[0], str(R / "fit" / "policy")]
        run([*cmd, "--out", str(R / "check")], R / "logs/check.log")
    out = R / "check" / "replay_check.json"
    return {"test": json.loads(out.read_text())} if out.exists() else {"test": {}}
