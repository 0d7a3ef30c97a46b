"""AdamW (or plain SGD) with a separate learning rate for the vision tower, and warm-up + cosine decay."""

from __future__ import annotations

import math

import torch

from vla.policy.backbone import vision_parameter_names

from .config import TrainConfig


def param_groups(policy: torch.nn.Module, cfg: TrainConfig) -> list[dict]:
    """Trainable parameters in groups: vision tower (``lr * vision_lr_scale``), the action rows and
    norms/biases (no weight decay), everything else."""
    vision = {f"backbone.{n}" for n in vision_parameter_names(policy.backbone)}
    groups = {"vision": [], "no_decay": [], "decay": []}
    for name, p in policy.named_parameters():
        if not p.requires_grad:
            continue
        if name in vision:
            groups["vision"].append(p)
        elif p.ndim < 2 or name.startswith("action_"):
            groups["no_decay"].append(p)
        else:
            groups["decay"].append(p)
    out = [
        {"params": groups["decay"], "lr": cfg.lr, "weight_decay": cfg.weight_decay, "name": "decay"},
        {"params": groups["no_decay"], "lr": cfg.lr, "weight_decay": 0.0, "name": "no_decay"},
        {
            "params": groups["vision"],
            "lr": cfg.lr * cfg.vision_lr_scale,
            "weight_decay": cfg.weight_decay,
            "name": "vision",
        },
    ]
    return [g for g in out if g["params"]]


def make_optimizer(policy: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    groups = param_groups(policy, cfg)
    if not groups:
        raise ValueError("no trainable parameters: check model.lora / policy.freeze_embeddings")
    if cfg.optimizer == "sgd":  # plain SGD: the weights after a step are w - lr * clipped gradient
        return torch.optim.SGD(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine from 1 to ``min_lr_ratio`` over the remaining steps."""
    warm = int(cfg.warmup if cfg.warmup >= 1 else round(cfg.warmup * cfg.steps))
    if warm > 0 and step < warm:
        return (step + 1) / warm
    span = max(1, cfg.steps - warm)
    t = min(1.0, (step - warm) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t))


def make_scheduler(opt: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
