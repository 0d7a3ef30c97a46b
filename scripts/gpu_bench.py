"""GPU readiness: real-size Qwen2.5-VL architectures (random weights, bf16) -- training throughput and
action latency. Run through scripts/gpu_check.sh on a machine with a CUDA GPU (an H200 here).

For each of qwen2_5_vl_3b_arch and qwen2_5_vl_7b_arch: a training step (micro-batch 8 samples of one
224x224 image + prompt + 7 action tokens; full fine-tuning, AdamW, gradient checkpointing) ->
samples/s, tokens/s and MFU (6 x parameters x tokens / step time / peak bf16 FLOP/s); single-step
action latency (7 tokens, KV cache) at batch 1 and 16; chunked (K=8, 56 tokens) actions/s; peak memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12}  # dense bf16 FLOP/s


def peak_flops(name: str) -> float:
    for k, v in PEAK_BF16.items():
        if k in name:
            return v
    return float("nan")


def main() -> int:
    import torch

    from vla.actions import ActionStats
    from vla.config import compose
    from vla.policy import ModelConfig, PolicyConfig, build_policy
    from vla.train.optim import make_optimizer
    from vla.train.config import TrainConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="qwen2_5_vl_3b_arch,qwen2_5_vl_7b_arch")
    ap.add_argument("--train-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    args = ap.parse_args()
    dev = "cuda"
    gpu = torch.cuda.get_device_name(0)
    rows = []
    rng = np.random.default_rng(0)
    for model in args.models.split(","):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        cfg = compose("train", [f"model={model}", "policy=libero", "model.gradient_checkpointing=true"])
        stats = {"bench": ActionStats.from_actions(rng.uniform(-1, 1, (100, 7)))}
        t0 = time.perf_counter()
        policy = build_policy(
            ModelConfig.from_dict(cfg["model"]),
            PolicyConfig.from_dict({**cfg["policy"], "freeze_embeddings": False}),
            stats,
            dev,
        )
        build_s = time.perf_counter() - t0
        n_params = sum(p.numel() for p in policy.parameters())
        obs = [
            {
                "prompt": "put the bowl on the plate",
                "step": 0,
                "state": np.zeros(8, np.float32),
                "cameras/agentview/rgb": rng.integers(0, 255, (256, 256, 3), dtype=np.uint8),
            }
            for _ in range(16)
        ]
        # ---- training step
        mis = policy.inputs_of(obs[: args.train_batch])
        for mi in mis:
            mi.actions, mi.dataset = rng.uniform(-1, 1, (1, 7)), "bench"
        batch = policy.encoder.train_batch(mis)
        opt = make_optimizer(policy, TrainConfig(lr=1e-5))
        policy.train()
        times = []
        for i in range(args.steps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = policy.loss(batch)
                loss = out["action_loss"] / out["action_tokens"]
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            if i >= 2:
                times.append(time.perf_counter() - t)
        step_s = statistics.median(times)
        tokens = int(batch["attention_mask"].sum())
        train_peak = torch.cuda.max_memory_allocated() / 2**30
        del opt
        torch.cuda.empty_cache()
        policy.eval()
        row = {
            "model": model,
            "gpu": gpu,
            "params_b": n_params / 1e9,
            "build_s": build_s,
            "train_batch": args.train_batch,
            "train_step_s": step_s,
            "train_samples_per_s": args.train_batch / step_s,
            "train_tokens_per_s": tokens / step_s,
            "mfu": 6 * n_params * tokens / step_s / peak_flops(gpu),
            "train_peak_gib": train_peak,
        }
        # ---- action latency (7 tokens, KV cache), batch 1 and 16; chunk 8
        for B in (1, 16):
            enc = policy.encoder.infer_batch(policy.inputs_of(obs[:B]))
            for _ in range(3):
                policy.decode_actions(enc)
            torch.cuda.synchronize()
            ts = []
            for _ in range(10):
                t = time.perf_counter()
                policy.decode_actions(enc)
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - t)
            row[f"latency_b{B}_s"] = statistics.median(ts)
            row[f"actions_per_s_b{B}"] = B / statistics.median(ts)
            t = time.perf_counter()
            for _ in range(5):
                policy.infer_batch(obs[:B])
            row[f"end_to_end_b{B}_s"] = (time.perf_counter() - t) / 5
        from dataclasses import replace

        policy.config = replace(policy.config, chunk=8)
        enc = policy.encoder.infer_batch(policy.inputs_of(obs[:1]))
        policy.decode_actions(enc)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            policy.decode_actions(enc)
        torch.cuda.synchronize()
        row["chunk8_actions_per_s_b1"] = 8 * 5 / (time.perf_counter() - t)
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        rows.append(row)
        print(json.dumps(row), flush=True)
        del policy
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
