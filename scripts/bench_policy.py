"""Action latency of the policy: generate() vs the constrained KV-cache loop vs parallel decoding, chunks, batches.

    .venv/bin/python scripts/bench_policy.py --out runs/bench_policy.json              # tiny models, CPU
    .venv/bin/python scripts/bench_policy.py --model qwen2_5_vl_3b_arch --device cuda  # GPU (scripts/gpu_check.sh)

For each model and (decoder, chunk K, batch B): median seconds per call over ``--repeats`` calls
after ``--warmup`` calls, actions per second (B x K / latency) and the loop/generate and
parallel/loop ratios measured in the same run. ``loop`` and ``generate`` decode autoregressively
(one token per forward); ``parallel`` is a policy built with ``policy.decoding=parallel``
(OpenVLA-OFT: all K x D action tokens from one forward pass). Observations are random 256x256
images with a 7-dim action space (LIBERO's shape); weights are random (latency does not depend on
them). JSON on stdout and in --out.
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


def build(model: str, chunk: int, device: str, dim: int = 7, decoding: str = "autoregressive"):
    from vla.actions import ActionStats
    from vla.config import compose
    from vla.policy import ModelConfig, PolicyConfig, build_policy

    cfg = compose("train", [f"model={model}", "policy=libero"])
    mcfg = ModelConfig.from_dict(cfg["model"])
    pcfg = PolicyConfig.from_dict({**cfg["policy"], "chunk": chunk, "action_dim": dim, "decoding": decoding})
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
    ap.add_argument("--decoders", default="loop,generate,parallel")
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
            parallel = build(model, chunk, args.device, decoding="parallel") if "parallel" in args.decoders else None
            for batch in (int(b) for b in args.batches.split(",")):
                obs = observations(batch)
                enc = policy.encoder.infer_batch(policy.inputs_of(obs))
                penc = parallel.encoder.infer_batch(parallel.inputs_of(obs)) if parallel is not None else None
                res = {}
                for dec in args.decoders.split(","):
                    fn = {
                        "loop": lambda: policy.decode_actions(enc),
                        "generate": lambda: policy.generate_actions(enc),
                        "parallel": lambda: parallel.decode_actions(penc),
                    }[dec]
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
                for name, p in (("loop", policy), ("parallel", parallel)):
                    if p is None:
                        continue
                    ts = time_calls(lambda p=p, o=obs: p.infer_batch(o), args.warmup, args.repeats, sync)
                    med = statistics.median(ts)
                    rows.append(
                        {
                            "model": model,
                            "device": args.device,
                            "decoder": f"infer_batch ({name}, end to end)",
                            "chunk": chunk,
                            "batch": batch,
                            "tokens": chunk * 7,
                            "latency_s": med,
                            "actions_per_s": batch * chunk / med,
                            "calls_per_s": 1 / med,
                        }
                    )
                ratios = {}
                if "loop" in res and "generate" in res:
                    ratios["generate_over_loop"] = res["generate"] / res["loop"]
                if "loop" in res and "parallel" in res:
                    ratios["parallel_speedup_over_loop"] = res["loop"] / res["parallel"]
                if ratios:
                    rows.append({"model": model, "chunk": chunk, "batch": batch, **ratios})
    report = {"rows": rows, "threads": torch.get_num_threads(), "load_avg": os.getloadavg()}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
