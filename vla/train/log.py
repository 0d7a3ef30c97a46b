"""``out/train_log.jsonl`` (one JSON line per logged step or validation) and the curves PNG."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class TrainLog:
    """Append-only JSONL; on resume, lines past the checkpoint's step are dropped (they are redone)."""

    def __init__(self, path: Path, resume_step: int) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if path.exists():
            keep = []
            for line in path.read_text().splitlines(keepends=True):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if line.endswith("\n") and int(row.get("step", 0)) <= resume_step:
                    keep.append(line)
                    self.rows.append(row)
            tmp = path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(keep))
            os.replace(tmp, path)
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        self.rows.append(row)

    def close(self) -> None:
        self._fh.close()


def plot_curves(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Training loss and action-token accuracy (and validation points) against step."""
    train = [r for r in rows if "loss" in r]
    val = [r for r in rows if "val_loss" in r]
    if not train:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot([r["step"] for r in train], [r["loss"] for r in train], label="train")
    if val:
        a.plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", label="val")
    a.set_xlabel("step")
    a.set_ylabel("loss (per target token)")
    a.set_yscale("log")
    a.legend()
    b.plot([r["step"] for r in train], [r.get("action_acc", float("nan")) for r in train], label="train action tokens")
    if val:
        b.plot(
            [r["step"] for r in val],
            [r.get("val_action_acc", float("nan")) for r in val],
            "o-",
            label="val action tokens",
        )
    b.set_xlabel("step")
    b.set_ylabel("token accuracy")
    b.set_ylim(0, 1)
    b.legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path
