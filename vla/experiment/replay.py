"""The replay proof (``make proof``): one scripted demonstration, a policy over-fitted to it, replayed in
closed loop from the demonstration's own start -- a pipeline check on a training state, not a held-out
test (docs/POLICY.md, "Does the policy act as it was trained?").

``family: house`` is the same check in the apartments (docs/RESULTS.md 2.1): train apartment house_0's
``demos`` episodes recorded through the policy's own bins by the map-deciding navigator (the house
``bins`` recipe), a memory policy over-fitted to them (the object table's digits jittered in training),
its first episode replayed with the map it builds on the way."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .common import BIN, HOUSE_MEMORY, doing, run
from .house import RECIPES, train_args


def replay(a) -> dict:
    if a.family == "house":
        return _house(a)
    R = Path(a.root)
    if doing(a, "record"):
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
    if doing(a, "train"):
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
    return _check(a, R)


def _check(a, R: Path, extra: tuple[str, ...] = ()) -> dict:
    if a.stage in ("all", "test"):
        demos = sorted(str(p) for p in (R / "demo").glob("*_demo.hdf5"))
        if not demos:
            raise SystemExit(f"{R / 'demo'}: no recorded demonstration to replay (stage=record first)")
        cmd = [sys.executable, "-m", "vla.experiment.replay_check", demos[0], str(R / "fit" / "policy"), *extra]
        run([*cmd, "--out", str(R / "check")], R / "logs/check.log")
    out = R / "check" / "replay_check.json"
    return {"test": json.loads(out.read_text())} if out.exists() else {"test": {}}


def _house(a) -> dict:
    R = Path(a.root)
    if doing(a, "record"):
        run(
            [
                str(BIN / "vla-rollout"),
                "env=house",
                "env.stop_action=true",
                "env.split=train",
                "env.num_scenes=1",  # house_0
                f"eval.first_trial={a.record_first}",
                f"eval.trials_per_task={a.demos}",
                *RECIPES["bins"]["record"],
                f"record={R / 'demo'}",
                f"out={R / 'rec'}",
                "progress=false",
            ],
            R / "logs/record.log",
        )
    if doing(a, "train"):
        run(
            [
                str(BIN / "vla-train"),
                *train_args("bins", chunk=4),
                "policy=house_memory",
                f"data.memory={HOUSE_MEMORY}",
                "policy.inputs.memory_text_jitter=[3.0,0.1]",
                f"data.paths=[{R / 'demo'}]",
                f"data.cache_dir={R / 'memory_cache'}",
                f"train.steps={a.steps}",
                f"train.batch_size={a.batch_size}",
                f"train.lr={a.lr}",
                "train.vision_lr_scale=1.0",
                "train.threads=1",  # as the LIBERO replay: one order of float sums on any machine
                "train.val_every=0",
                "train.loader_workers=0",
                f"out={R / 'fit'}",
                "progress=false",
            ],
            R / "logs/train.log",
        )
    return _check(a, R, ("--memory-cache", str(R / "check_cache")))
