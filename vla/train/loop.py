"""The training loop (``vla-train``): a reader can hold it in their head; the pieces are named functions.

    dist = setup(strategy); sources -> split by episode -> statistics; policy = build_policy(...)
    resume from out/checkpoints/step_N if there is one
    for step in range(start, steps):
        micro-batches of this rank -> loss = (sum of target-token cross-entropies) / (global target tokens)
        backward (no gradient sync until the last micro-batch), clip, AdamW, warm-up + cosine
        log every log_every, validate every val_every, checkpoint every save_every
    export out/policy (save_pretrained + statistics), plot out/train_curves.png

The loss is normalised by the number of target tokens in the whole global batch (all ranks, all
micro-batches), so gradient accumulation and DDP give the gradient of a single process with the same
global batch. Running the same command again resumes from the newest checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from vla.policy.weights import WEIGHTS_FILE, canonical_keys, load_weights

from .checkpoint import RESUME_DIR, checkpoints, clean_partial, load_train_state, save
from .config import DataConfig, TrainConfig
from .data import StepBatches, action_statistics, build_sources, loader, proprio_statistics
from .distributed import Dist, setup, unwrap, wrap
from .log import TrainLog, plot_curves
from .optim import make_optimizer, make_scheduler


def _mixture(sources, weights):
    from vla.data import Mixture

    return Mixture(sources, weights)


def _autocast(dist: Dist, precision: str):
    use_bf16 = precision == "bf16" or (precision == "auto" and dist.device.startswith("cuda"))
    if use_bf16:
        return torch.autocast(device_type="cuda" if dist.device.startswith("cuda") else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _policy_meta(policy) -> dict[str, Any]:
    return {
        "format": "vla_policy/1",
        "policy": policy.config.to_dict(),
        "action_tokenizer": policy.actions.to_dict(),
        "model": policy.model_config.to_dict(),
    }


def _full_state(model: torch.nn.Module, dist: Dist) -> dict[str, torch.Tensor]:
    if dist.strategy == "fsdp" and dist.active:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return unwrap(model).state_dict()


def _optim_state(model, opt, dist: Dist) -> dict[str, Any]:
    if dist.strategy == "fsdp" and dist.active:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return opt.state_dict()


def _load_optim(model, opt, state: dict[str, Any], dist: Dist) -> None:
    if dist.strategy == "fsdp" and dist.active:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model, opt, optim_state_dict=state, options=StateDictOptions(full_state_dict=True))
    else:
        opt.load_state_dict(state)


def _step_loss(model, policy, step_item: dict[str, Any], dist: Dist, precision: str, train: bool) -> dict[str, float]:
    """Forward (and backward when ``train``) over this rank's micro-batches of one step."""
    batches = step_item["batches"]
    local = sum(len(b["action_pos"]) + len(b["text_pos"]) for b in batches)
    counts = torch.zeros(dist.world, 2, dtype=torch.float64)  # per rank: samples, target tokens
    counts[dist.rank] = torch.tensor([float(step_item["n"]), float(local)], dtype=torch.float64)
    counts = dist.all_reduce_sum(counts)
    total = float(counts[:, 1].sum().item())
    if total == 0:
        raise ValueError(f"step {step_item['step']}: the batch has no target tokens (empty actions and answers)")
    sums = torch.zeros(
        6, dtype=torch.float64
    )  # action loss, action correct, action tokens, text loss, text correct, text tokens
    l1_sum, l1_n = 0.0, 0
    for i, batch in enumerate(batches):
        sync = contextlib.nullcontext()
        if train and dist.strategy == "ddp" and dist.active and i < len(batches) - 1:
            sync = model.no_sync()
        with sync, _autocast(dist, precision):
            out = model(batch)
            loss = (out["action_loss"] + out["text_loss"]) * (dist.world / total)
        if train:
            loss.backward()
        sums += torch.tensor(
            [
                float(out[k].detach())
                for k in ("action_loss", "action_correct", "action_tokens", "text_loss", "text_correct", "text_tokens")
            ],
            dtype=torch.float64,
        )
        if not train and "action_pred" in out and step_item["actions"][i]:
            l1_sum, l1_n = (
                l1_sum + _l1(policy, out["action_pred"], step_item["actions"][i], step_item["datasets"][i]),
                l1_n + len(step_item["actions"][i]),
            )
    sums = dist.all_reduce_sum(sums)
    a_n, t_n = sums[2].item(), sums[5].item()
    row = {
        "loss": float((sums[0] + sums[3]) / max(a_n + t_n, 1)),
        "action_acc": float(sums[1] / a_n) if a_n else None,
        "text_acc": float(sums[4] / t_n) if t_n else None,
        "tokens": int(a_n + t_n),
        "rank_samples": [int(n) for n in counts[:, 0].tolist()],
        "rank_target_tokens": [int(n) for n in counts[:, 1].tolist()],
    }
    if not train:
        l1 = dist.all_reduce_sum(torch.tensor([l1_sum, float(l1_n)], dtype=torch.float64))
        row["l1"] = float(l1[0] / l1[1]) if l1[1] else None
    return row


def _l1(policy, pred_bins: torch.Tensor, actions: list[np.ndarray], datasets: list[str]) -> float:
    """Sum over samples of the mean absolute error of teacher-forced argmax actions, un-normalised."""
    n = policy.tokens_per_prediction
    bins = pred_bins.cpu().numpy().reshape(len(actions), n)
    total = 0.0
    for b, a, key in zip(bins, actions, datasets):
        x_n = policy.actions.decode(policy.actions.ids_from_bins(b)).reshape(np.asarray(a).shape)
        total += float(np.abs(policy.encoder.stats_for(key).unnormalize(x_n) - np.asarray(a)).mean())
    return total


def train(cfg: dict[str, Any], progress: bool = True) -> dict[str, Any]:
    """Run (or resume) a training run from a composed ``vla-train`` config; returns the final summary."""
    from vla.policy import ModelConfig, PolicyConfig, build_policy

    mcfg, pcfg = ModelConfig.from_dict(cfg["model"]), PolicyConfig.from_dict(cfg["policy"])
    dcfg, tcfg = DataConfig.from_dict(cfg["data"]), TrainConfig.from_dict(cfg["train"])
    out = Path(cfg["out"])
    dist = setup(tcfg.strategy, tcfg.device)
    if tcfg.threads:
        torch.set_num_threads(int(tcfg.threads))
    try:
        return _train(cfg, mcfg, pcfg, dcfg, tcfg, out, dist, progress, build_policy)
    finally:
        dist.close()


def _check_identity(out: Path, cfg: dict[str, Any], dist: Dist) -> None:
    """A run directory belongs to one configuration (everything but the step budget and logging)."""
    ident = {k: cfg[k] for k in ("model", "policy", "data")}
    ident["train"] = {
        k: v
        for k, v in cfg["train"].items()
        if k
        not in (
            "steps",
            "log_every",
            "val_every",
            "save_every",
            "resume_every",
            "keep_last",
            "export",
            "plot",
            "loader_workers",
            "threads",
        )
    }
    # options added since (data.instructions): at their default they leave a run made before them the same run
    if isinstance(ident["data"], dict) and ident["data"].get("instructions") == "own":
        ident["data"] = {k: v for k, v in ident["data"].items() if k != "instructions"}
    from vla.eval.identity import check_identity

    check_identity(out, ident, holds="a training run with another configuration", write=dist.main)
    dist.barrier()


def _train(cfg, mcfg, pcfg, dcfg, tcfg, out: Path, dist: Dist, progress: bool, build_policy) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    # memory inputs: the data config's, or what the policy's inputs imply; inference rebuilds the very
    # memory inputs the policy learned from (saved with it)
    pcfg = pcfg.with_memory(dcfg.memory, mcfg.image_size)
    memory = pcfg.memory.to_dict() if pcfg.inputs.uses_memory else None
    frames = (pcfg.inputs.history, pcfg.inputs.frames_camera) if pcfg.inputs.history else None
    train_src, val_src, weights, norms = build_sources(
        dcfg, pcfg.chunk, memory, out / "memory_cache", tcfg.seed, tuple(pcfg.inputs.cameras), frames
    )
    stats = action_statistics(train_src, norms)
    if not stats:
        from vla.actions import ActionStats

        stats = {
            "none": ActionStats.from_actions(np.zeros((2, pcfg.action_dim or 1)))
        }  # QA-only training: no actions to learn
    if not pcfg.action_dim:  # policy.action_dim=0: the data's (the run's identity holds the number)
        from vla.policy import resolve_action_dim

        pcfg = resolve_action_dim(pcfg, stats)
        cfg = {**cfg, "policy": {**cfg["policy"], "action_dim": pcfg.action_dim}}
    _check_identity(out, cfg, dist)
    ckpt_root = out / "checkpoints"
    if dist.main:
        clean_partial(ckpt_root)
        clean_partial(ckpt_root / RESUME_DIR)
    dist.barrier()
    proprio = None
    if pcfg.inputs.proprio == "token":
        proprio = {k: v for k, v in proprio_statistics(train_src, pcfg.inputs.proprio_keys).items() if k in stats}
        if not proprio:
            raise ValueError("policy.inputs.proprio=token but no training source has state vectors")
    torch.manual_seed(tcfg.seed)
    policy = build_policy(mcfg, pcfg, stats, dist.device, proprio)
    start, state = 0, None
    done = sorted(checkpoints(ckpt_root) + checkpoints(ckpt_root / RESUME_DIR))
    if done:  # resume from the newest: every weight before wrapping, then optimizer, scheduler and RNG
        step0, path = done[-1]
        load_weights(policy, path / WEIGHTS_FILE)
        state = load_train_state(path)
        start = int(state["step"])
        if dist.main:
            print(f"vla-train: resuming from {path} (step {start} of {tcfg.steps})", file=sys.stderr, flush=True)
    elif tcfg.init_from:
        report = init_weights(policy, Path(tcfg.init_from))
        if dist.main:
            (out / "init_from.json").write_text(json.dumps(report, indent=2))
    keep_keys = canonical_keys(policy)  # one name per shared tensor, taken before FSDP re-creates the parameters
    model = wrap(policy, dist)
    opt = make_optimizer(policy, tcfg)
    sched = make_scheduler(opt, tcfg)
    if state is not None:
        _load_optim(model, opt, state["optimizer"], dist)
        sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng_torch"])
    mix = _mixture(train_src, weights)
    micro = tcfg.micro_batch or max(1, tcfg.batch_size // dist.world)
    batches = StepBatches(
        mix,
        policy.transform,
        policy.encoder,
        tcfg.batch_size,
        micro,
        dist.rank,
        dist.world,
        tcfg.seed,
        start,
        tcfg.steps,
    )
    val_mix = _mixture(val_src, weights) if sum(len(s) for s in val_src) else None
    log = TrainLog(out / "train_log.jsonl", start) if dist.main else None
    bar = tqdm(
        total=tcfg.steps,
        initial=start,
        desc="train",
        unit="step",
        disable=not (progress and dist.main),
        dynamic_ncols=True,
        file=sys.stderr,
    )
    last = {}
    t_log, n_log, tok_log = time.perf_counter(), 0, 0
    model.train()
    for item in loader(batches, tcfg.loader_workers):
        step = item["step"]
        opt.zero_grad(set_to_none=True)
        row = _step_loss(model, policy, item, dist, tcfg.precision, train=True)
        gnorm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], tcfg.grad_clip)
        if not math.isfinite(float(gnorm)):
            raise FloatingPointError(f"step {step}: gradient norm is {float(gnorm)}; lower train.lr")
        opt.step()
        sched.step()
        n_log, tok_log = n_log + sum(row["rank_samples"]), tok_log + row["tokens"]
        if dist.main and ((step + 1) % tcfg.log_every == 0 or step + 1 == tcfg.steps):
            dt = max(time.perf_counter() - t_log, 1e-9)
            last = {
                "step": step + 1,
                **{k: v for k, v in row.items() if k != "tokens"},
                "grad_norm": float(gnorm),
                "lr": opt.param_groups[0]["lr"],
                "samples_per_s": n_log / dt,
                "target_tokens_per_s": tok_log / dt,
            }
            log.write(last)
            t_log, n_log, tok_log = time.perf_counter(), 0, 0
        bar.update(1)
        bar.set_postfix_str(
            f"loss {row['loss']:.3f}" + (f" acc {row['action_acc']:.2f}" if row["action_acc"] is not None else "")
        )
        if val_mix is not None and tcfg.val_every and (step + 1) % tcfg.val_every == 0:
            v = validate(model, policy, val_mix, tcfg, dist, micro)
            if dist.main:
                log.write({"step": step + 1, **v})
                if tcfg.plot:
                    plot_curves(log.rows, out / "train_curves.png")
        if (tcfg.save_every and (step + 1) % tcfg.save_every == 0) or step + 1 == tcfg.steps:
            _save(ckpt_root, step + 1, model, policy, opt, sched, cfg, tcfg.keep_last, dist, keep_keys)
            if dist.main:  # a kept checkpoint is newer than any resume point
                shutil.rmtree(ckpt_root / RESUME_DIR, ignore_errors=True)
        elif tcfg.resume_every and (step + 1) % tcfg.resume_every == 0:
            _save(ckpt_root / RESUME_DIR, step + 1, model, policy, opt, sched, cfg, 1, dist, keep_keys)
    bar.close()
    summary = {
        "steps": tcfg.steps,
        "last": last,
        "checkpoint": str(ckpt_root / f"step_{tcfg.steps}"),
        "rank": dist.rank,
    }
    if dist.main:
        if val_mix is not None:
            summary["val"] = validate(model, policy, val_mix, tcfg, dist, micro)
        if tcfg.export:
            policy.save_pretrained(out / "policy")
            summary["policy"] = str(out / "policy")
        if log is not None:
            if tcfg.plot:
                plot_curves(log.rows, out / "train_curves.png")
            log.close()
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    elif val_mix is not None:
        validate(model, policy, val_mix, tcfg, dist, micro)
    dist.barrier()
    return summary


def init_weights(policy, path: Path) -> dict[str, Any]:
    """Copy into ``policy`` every tensor of the policy at ``path`` (a training checkpoint or an exported
    policy directory) whose name and shape match; returns what was loaded and what was left as built."""
    from vla.policy import load_policy

    if (path / WEIGHTS_FILE).is_file():
        from safetensors.torch import load_file

        theirs = load_file(str(path / WEIGHTS_FILE))
    else:
        try:
            theirs = load_policy(path).state_dict()  # an exported directory
        except ValueError as exc:
            raise ValueError(f"train.init_from={path}: {exc}") from None
    own = policy.state_dict()
    same = {k: v for k, v in theirs.items() if k in own and tuple(v.shape) == tuple(own[k].shape)}
    if not same:
        raise ValueError(f"train.init_from={path}: no tensor of that policy fits this one (another architecture?)")
    policy.load_state_dict(same, strict=False)
    shared = set(canonical_keys(policy))
    return {
        "from": str(path),
        "loaded": len([k for k in same if k in shared]),
        "kept_as_built": sorted(k for k in shared if k not in same),
        "not_used": sorted(k for k in theirs if k not in same),
    }


@torch.no_grad()
def validate(model, policy, val_mix, tcfg: TrainConfig, dist: Dist, micro: int) -> dict[str, Any]:
    """Token accuracy, loss and teacher-forced L1 of the un-normalised actions on validation episodes."""
    model.eval()
    sums: dict[str, list[float]] = {}
    ds = StepBatches(
        val_mix,
        policy.transform,
        policy.encoder,
        tcfg.batch_size,
        micro,
        dist.rank,
        dist.world,
        tcfg.seed + 1,
        0,
        tcfg.val_batches,
        augment=False,
    )
    policy.return_predictions = True
    try:
        for k in range(len(ds)):
            row = _step_loss(model, policy, ds[k], dist, tcfg.precision, train=False)
            for key in ("loss", "action_acc", "text_acc", "l1"):
                if row.get(key) is not None:
                    sums.setdefault(key, []).append(row[key])
    finally:
        policy.return_predictions = False
        model.train()
    return {f"val_{k}": float(np.mean(v)) for k, v in sums.items()}


def _save(
    root: Path, step: int, model, policy, opt, sched, cfg, keep_last: int, dist: Dist, keep_keys: list[str]
) -> None:
    state = _full_state(model, dist)
    optim = _optim_state(model, opt, dist)
    if dist.main:
        from vla.actions import write_statistics

        train_state = {
            "step": step,
            "optimizer": optim,
            "scheduler": sched.state_dict(),
            "rng_torch": torch.get_rng_state(),
        }
        save(
            root,
            step,
            state,
            _policy_meta(policy),
            lambda p: write_statistics(p, policy.stats, proprio=policy.proprio_for_stats_file()),
            train_state,
            cfg,
            keep_last,
            keep_keys,
        )
    dist.barrier()
