"""``<root>/curves.png``: an experiment's arms side by side -- each trained arm's loss, and its validation
loss or, where training ran no validation (GST), the val score of each checkpoint (what selection read).
One run's own curves are ``vla.train.log.plot_curves``'s ``train_curves.png``."""

from __future__ import annotations

import json
from pathlib import Path

from .common import _mean


def _val_score(v) -> float | None:
    """A checkpoint's val number for the plot: GST's overall score, or a rollout's success (in %)."""
    if isinstance(v, dict) and "success" in v:
        return 100.0 * float(v["success"])
    try:
        return _mean(v)
    except (TypeError, KeyError, ValueError):
        return None


def train_logs(root: Path) -> dict[str, Path]:
    """Every training run's log under ``<root>/train``, by its path there (``memory/round0``; ``policy`` for
    a run at the top), an arm linked in from another root included (``**`` would not follow the link)."""
    logs = {}
    for pattern in ("train_log.jsonl", "*/train_log.jsonl", "*/*/train_log.jsonl"):
        for p in sorted((root / "train").glob(pattern)):
            name = p.parent.relative_to(root / "train").as_posix()
            logs["policy" if name == "." else name] = p
    return logs


def plot_arms(root: Path, val: dict | None = None) -> None:
    """``<root>/curves.png``: training loss (per 10 steps) of every trained arm, and its validation loss
    on held-out episodes -- or, where training ran no validation (GST), the val score of each
    checkpoint (what selection read)."""
    logs = train_logs(root)
    if not logs:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    right = "validation loss (held-out episodes)"
    for arm, path in sorted(logs.items()):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        tr = [(r["step"], r["loss"]) for r in rows if "loss" in r]
        va = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
        if not va and (val or {}).get(arm):
            scored = ((int(k.split("_")[1]), _val_score(v)) for k, v in val[arm].items() if k.startswith("step_"))
            va = sorted((step, x) for step, x in scored if x is not None)
            right = "val score per checkpoint (selection)"
        if tr:
            axes[0].plot(*zip(*tr), label=arm, lw=1)
        if va:
            axes[1].plot(*zip(*va), "o-", label=arm)
    for ax, title in zip(axes, ("training loss", right)):
        ax.set(title=title, xlabel="step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(root / "curves.png", dpi=110)
    plt.close(fig)
