"""Action latency of the policy: generate() vs the constrained KV-cache loop, chunks, batch sizes.

    .venv/bin/python scripts/bench_policy.py --out runs/bench_policy.json              # tiny models, CPU
    .venv/bin/python scripts/bench_policy.py --model qwen2_5_vl_3b_arch --device cuda  # GPU (scripts/gpu_check.sh)

For each model and (decoder, chunk K, batch B): median seconds per call over ``--repeats`` calls
after ``--warmup`` calls, actions per second (B x K / latency) and the loop/generate ratio measured
in the same run. Observations are random 256x256 images with a 7-dim action space (LIBERO's shape);
weights are random (latency does not depend on them). JSON on stdout and in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(model: str, chunk: int, device: str, dim: int = 7):
    from vla.actions import ActionStats
    from vla.config import compose
    from vla.policy import ModelConfig, PolicyConfig, build_policy

    cfg = compose("train", [f"model={model}", "policy=libero"])
    mcfg = ModelConfig.from_dict(cfg["model"])
    pcfg = PolicyConfig.from_dict({**cfg["policy"], "chunk": chunk, "action_dim": dim})
    stats = {"bench": ActionStats.from_actions(np.random.default_rng(0).uniform(-1, 1, (100, dim)))}
    policy = build_policy(mcfg, pcfg, stats, device)
    policy.eval()
    return policy


def observations(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "prompt": "put the bowl on the plate",
            "step": 0,
            "state": np.zeros(8, np.float32),
            "cameras/agentview/rgb": rng.integers(0, 255, (256, 256, 3), dtype=np.uint8),
        }
        for _ in range(n)
    ]


def time_calls(fn, warmup: int, repeats: int, sync) -> list[float]:
    for _ in range(warmup):
        fn()
        sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", help="model config(s) (default: tiny_qwen2_5_vl, tiny_qwen3_vl)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--chunks", default="1,8")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--decoders", default="loop,generate")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    rows = []
    for model in args.model or ["tiny_qwen2_5_vl", "tiny_qwen3_vl"]:
        for chunk in (int(c) for c in args.chunks.split(",")):
            policy = build(model, chunk, args.device)
            for batch in (int(b) for b in args.batches.split(",")):
                obs = observations(batch)
                enc = policy.encoder.infer_batch(policy.inputs_of(obs))
                res = {}
                for dec in args.decoders.split(","):
                    fn = (
                        (lambda: policy.decode_actions(enc))
                        if dec == "loop"
                        else (lambda: policy.generate_actions(enc))
                    )
                    ts = time_calls(fn, args.warmup, args.repeats, sync)
                    med = statistics.median(ts)
                    res[dec] = med
                    rows.append(
                        {
                            "model": model,
                            "device": args.device,
                            "decoder": dec,
                            "chunk": chunk,
                            "batch": batch,
                            "tokens": chunk * 7,
                            "latency_s": med,
                            "actions_per_s": batch * chunk / med,
                            "calls_per_s": 1 / med,
                        }
                    )
                # end to end: transforms + processor + decoding + un-normalisation, as act() pays it
                ts = time_calls(lambda p=policy, o=obs: p.infer_batch(o), args.warmup, args.repeats, sync)
                rows.append(
                    {
                        "model": model,
                        "device": args.device,
                        "decoder": "infer_batch (loop, end to end)",
                        "chunk": chunk,
                        "batch": batch,
                        "tokens": chunk * 7,
                        "latency_s": statistics.median(ts),
                        "actions_per_s": batch * chunk / statistics.median(ts),
                        "calls_per_s": 1 / statistics.median(ts),
                    }
                )
                if "loop" in res and "generate" in res:
                    rows.append(
                        {
                            "model": model,
                            "chunk": chunk,
                            "batch": batch,
                            "generate_over_loop": res["generate"] / res["loop"],
                        }
                    )
    report = {"rows": rows, "threads": torch.get_num_threads(), "load_avg": os.getloadavg()}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
