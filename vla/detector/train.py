"""Training the learned detector (:class:`spatial_memory.detector.SegNet`) on rendered apartments.

Per-pixel cross-entropy (background + the catalogue's categories, class weights from the train split's
pixel frequencies so that small objects count) at the network's input size, AdamW with a cosine schedule,
horizontal flips. After each epoch the model is evaluated on the val apartments (instance recall and
precision at mask IoU >= 0.5, :mod:`.evaluate`); ``best.pt`` keeps the epoch of the best val F1, with the
score threshold chosen on val too. ``last.pt`` (weights, optimizer, epoch, history) is written after every
epoch; a run started again with the same ``out`` resumes from it. The test apartments are never read.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from spatial_memory.detector import DetectorSpec, SegNet, frame_tensor, read_checkpoint, save_checkpoint

from .data import load_split

THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


@dataclass(frozen=True)
class TrainConfig:
    frames: str
    out: str
    epochs: int = 30
    batch: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-4
    input_size: tuple[int, int] = (96, 96)
    widths: tuple[int, ...] = (16, 24, 40, 64)
    use_depth: bool = True
    max_steps: int | None = None
    seed: int = 0
    progress: bool = True


@dataclass
class Arrays:
    """A split in memory at the network's input size: x (N x C x h x w float32), y (N x h x w int64)."""

    x: torch.Tensor
    y: torch.Tensor


def to_arrays(apartments: Iterable[dict], spec: DetectorSpec) -> Arrays:
    """The frames at the network's input size, one apartment at a time (an iterator of apartments never
    holds more than one apartment's full-size frames in memory)."""
    xs, ys = [], []
    for d in apartments:
        for i in range(0, len(d["rgb"]), 64):
            xs.append(frame_tensor(d["rgb"][i : i + 64], d["depth"][i : i + 64].astype(np.float32), spec))
            sem = torch.from_numpy(d["sem"][i : i + 64].astype(np.int64))
            ys.append(F.interpolate(sem[:, None].float(), size=spec.input_size, mode="nearest")[:, 0].long())
    return Arrays(torch.cat(xs), torch.cat(ys))


def class_weights(y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Inverse square root of each class's pixel frequency, normalised to a mean of 1 over present classes
    and clipped to [0.1, 10]."""
    counts = torch.bincount(y.reshape(-1), minlength=num_classes).double()
    w = torch.where(counts > 0, (counts.sum() / counts.clamp(min=1)).sqrt(), torch.zeros_like(counts))
    w = w / w[counts > 0].mean()
    return w.clamp(0.1, 10.0).float()


def loss_fn(net: SegNet, x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    logits = F.interpolate(net(x), size=y.shape[-2:], mode="bilinear", align_corners=False)
    return F.cross_entropy(logits, y, weight=weights)


def train_steps(
    net: SegNet,
    opt: torch.optim.Optimizer,
    data: Arrays,
    weights: torch.Tensor | None,
    batch: int,
    gen: torch.Generator,
    sched: Any = None,
    limit: int | None = None,
    bar: Any = None,
) -> list[float]:
    """One pass over ``data`` in random batches (at most ``limit`` steps); the losses."""
    net.train()
    order = torch.randperm(len(data.x), generator=gen)
    losses = []
    for s in range(0, len(order), batch):
        if limit is not None and len(losses) >= limit:
            break
        idx = order[s : s + batch]
        x, y = data.x[idx], data.y[idx]
        flip = torch.rand(len(idx), generator=gen) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        y = torch.where(flip[:, None, None], y.flip(-1), y)
        loss = loss_fn(net, x, y, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses


def train(cfg: TrainConfig) -> dict:
    """Train (or resume) a run; returns the summary also written to ``out/summary.json``."""
    from .evaluate import evaluate_frames, pick_threshold

    torch.manual_seed(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    first = next(load_split(cfg.frames, "train"))
    cats = tuple(str(c) for c in first["categories"])
    val_ap = list(load_split(cfg.frames, "val", cats))
    H, W = first["rgb"].shape[1:3]
    spec = DetectorSpec(
        categories=cats,
        frame_size=(int(H), int(W)),
        input_size=tuple(cfg.input_size),
        widths=tuple(cfg.widths),
        use_depth=cfg.use_depth,
    )
    del first
    data = to_arrays(load_split(cfg.frames, "train", cats), spec)  # streamed: one full-size apartment at a time
    weights = class_weights(data.y, spec.num_classes)
    net = SegNet(spec)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil(len(data.x) / cfg.batch)
    total = cfg.epochs * steps_per_epoch if cfg.max_steps is None else min(cfg.max_steps, cfg.epochs * steps_per_epoch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s / total, 1.0))))
    gen = torch.Generator().manual_seed(cfg.seed)
    state = {"epoch": 0, "step": 0, "history": [], "best_f1": -1.0}
    last = out / "last.pt"
    if last.exists():
        ck = read_checkpoint(last)
        if DetectorSpec.from_dict(ck["spec"]) != spec:
            raise ValueError(f"{last}: a run with another spec is in {out}; choose another --out")
        net.load_state_dict(ck["state_dict"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        gen.set_state(ck["generator"])
        state = json.loads(ck["state"])
        print(f"resumed {last} at epoch {state['epoch']} (step {state['step']})", file=sys.stderr)
    (out / "config.json").write_text(json.dumps({**asdict(cfg), "spec": spec.to_dict()}, indent=1))
    bar = tqdm(total=total, initial=state["step"], desc="train", disable=not cfg.progress, file=sys.stderr)
    while state["epoch"] < cfg.epochs and state["step"] < total:
        t0 = time.time()
        losses = train_steps(net, opt, data, weights, cfg.batch, gen, sched, limit=total - state["step"], bar=bar)
        state["step"] += len(losses)
        state["epoch"] += 1
        net.eval()
        val = evaluate_frames(net, spec, val_ap, thresholds=THRESHOLDS)
        thr, summ = pick_threshold(val)
        row = {
            "epoch": state["epoch"],
            "step": state["step"],
            "loss": float(np.mean(losses)),
            "val_threshold": thr,
            **{f"val_{k}": v for k, v in summ.items()},
            "seconds": round(time.time() - t0, 1),
        }
        state["history"].append(row)
        print(json.dumps(row), file=sys.stderr)
        if summ["f1"] > state["best_f1"]:
            state["best_f1"] = summ["f1"]
            save_checkpoint(
                out / "best.pt",
                DetectorSpec.from_dict({**spec.to_dict(), "score_threshold": thr}),
                net,
                {"state": json.dumps(row)},
            )
        save_checkpoint(
            last,
            spec,
            net,
            {
                "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(),
                "generator": gen.get_state(),
                "state": json.dumps(state),
            },
        )
    bar.close()
    summary = {"out": str(out), "epochs": state["epoch"], "steps": state["step"], "history": state["history"]}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary
