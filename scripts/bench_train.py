"""Training throughput of ``vla-train`` on the CPU: samples/s of real runs, and where a step's time goes.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_train.py --demos runs/demos/libero_object0 \\
        --steps 40 --out runs/bench_train.json

For each setting (torch threads x data-loader workers) the script runs ``vla-train`` itself for
``--steps`` steps on the given demonstrations and reads ``samples_per_s`` from its
``train_log.jsonl`` (the median of the log windows after the first, which holds start-up); then,
in this process, it times the parts of one step: reading the samples from HDF5, the input
transforms (augmentation, resizing), encoding (tokens and image patches) and the model's forward,
backward and optimizer step. The load average before and after is recorded: on a shared machine
absolute numbers are pessimistic, ratios measured in one run are the result.

Settings: the LIBERO recipe of docs/POLICY.md (agentview and wrist images at 112 px, the proprio
token, chunks of 8 decoded in parallel, batch 16) unless ``--overrides`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RECIPE = [
    "model=tiny_qwen2_5_vl",
    "policy=libero_oft",
    "data=libero",
    "data.val_fraction=0",
    "train.batch_size=16",
    "train.lr=5e-4",
    "train.val_every=0",
    "train.save_every=0",
    "train.export=false",
    "train.plot=false",
    "train.log_every=5",
    "progress=false",
]


def run_setting(demos: str, steps: int, threads: int, workers: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            str(BIN / "vla-train"),
            *RECIPE,
            f"data.paths=[{demos}]",
            f"train.steps={steps}",
            f"train.threads={threads}",
            f"train.loader_workers={workers}",
            *extra,
            f"out={tmp}/run",
        ]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"vla-train failed:\n{r.stderr[-2000:]}")
        rows = [json.loads(x) for x in (Path(tmp) / "run" / "train_log.jsonl").read_text().splitlines()]
    rates = [r["samples_per_s"] for r in rows if "samples_per_s" in r][1:]
    return {"threads": threads, "workers": workers, "samples_per_s": statistics.median(rates), "wall_s": wall}


def breakdown(demos: str, extra: list[str], threads: int, reps: int = 4) -> dict:
    """Seconds per step of each part, measured in this process (one thread of torch unless ``threads``)."""
    import numpy as np
    import torch

    from vla.config import compose
    from vla.data import Mixture
    from vla.policy import ModelConfig, PolicyConfig, build_policy
    from vla.train.config import DataConfig, TrainConfig
    from vla.train.data import StepBatches, action_statistics, build_sources, proprio_statistics

    torch.set_num_threads(threads)
    cfg = compose("train", [*RECIPE, f"data.paths=[{demos}]", *extra])
    mcfg, pcfg = ModelConfig.from_dict(cfg["model"]), PolicyConfig.from_dict(cfg["policy"])
    dcfg, tcfg = DataConfig.from_dict(cfg["data"]), TrainConfig.from_dict(cfg["train"])
    with tempfile.TemporaryDirectory() as tmp:
        train, _, weights, norms = build_sources(
            dcfg, pcfg.chunk, None, Path(tmp), tcfg.seed, tuple(pcfg.inputs.cameras)
        )
        proprio = proprio_statistics(train, pcfg.inputs.proprio_keys) if pcfg.inputs.proprio == "token" else None
        policy = build_policy(mcfg, pcfg, action_statistics(train, norms), "cpu", proprio)
        mix = Mixture(train, weights)
        B = tcfg.batch_size
        sb = StepBatches(mix, policy.transform, policy.encoder, B, B, 0, 1, tcfg.seed, 0, reps + 1)
        t = {"read": 0.0, "transform": 0.0, "encode": 0.0, "model": 0.0}
        opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-4)
        policy.train()
        for k in range(reps + 1):
            t0 = time.perf_counter()
            samples = sb.samples(k)
            t1 = time.perf_counter()
            inputs = [policy.transform.sample(s, np.random.default_rng([7, k, g])) for g, s in enumerate(samples)]
            t2 = time.perf_counter()
            batch = policy.encoder.train_batch(inputs)
            t3 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            out = policy(batch)
            n = max(int(out["action_tokens"] + out["text_tokens"]), 1)
            ((out["action_loss"] + out["text_loss"]) / n).backward()
            opt.step()
            t4 = time.perf_counter()
            if k:  # the first step warms up
                for name, dt in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    t[name] += dt / reps
    return {"batch": B, "threads": threads, **{f"{k}_s": round(v, 4) for k, v in t.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demos", required=True, help="a directory of recorded LIBERO demonstrations (record=DIR)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--overrides", nargs="*", default=[], help="extra vla-train overrides (e.g. another recipe)")
    ap.add_argument("--out", default="runs/bench_train.json")
    a = ap.parse_args()
    res = {"load_before": os.getloadavg(), "recipe": RECIPE + a.overrides, "runs": [], "breakdown": []}
    for th in (int(x) for x in a.threads.split(",")):
        res["breakdown"].append(breakdown(a.demos, a.overrides, th))
        print(json.dumps(res["breakdown"][-1]), flush=True)
        for w in (int(x) for x in a.workers.split(",")):
            res["runs"].append(run_setting(a.demos, a.steps, th, w, a.overrides))
            print(json.dumps(res["runs"][-1]), flush=True)
    res["load_after"] = os.getloadavg()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(f"load average before {res['load_before']}, after {res['load_after']} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
