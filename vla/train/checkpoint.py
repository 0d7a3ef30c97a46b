"""Training checkpoints: ``out/checkpoints/step_N/``, written atomically, the last ``keep_last`` kept.

A checkpoint holds everything a resumed run needs to continue exactly (bit for bit on one CPU
process): every weight of the policy (``policy_state.safetensors``), the optimizer and scheduler
state and the torch RNG state (``train_state.pt``, loaded with ``weights_only=True``: tensors and
numbers, no pickled objects), the resolved config (``train_config.json``), and what
:func:`vla.policy.load_policy` needs to use the checkpoint as a policy (``vla_policy.json``,
``dataset_statistics.json``). The data position is the step itself: batches are a pure function
of (seed, step).

A directory is written as ``.step_N.tmp`` and renamed when complete, so a run killed while saving
leaves the previous checkpoints intact; leftovers of such a run are removed on the next start.

Resume points (``train.resume_every``) are the same directories under ``checkpoints/resume/``, only the
newest kept and removed when a kept checkpoint is written after them: :func:`checkpoints` of the root
does not list them, so what chooses among a run's checkpoints (the proofs' val selection) never sees
them, while the loop resumes from the newest of both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a checkpoint is written or read, not to list them
    import torch

_STEP = re.compile(r"^step_(\d+)$")
RESUME_DIR = "resume"  # out/checkpoints/resume/step_N: the newest resume point (train.resume_every)


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    out = [
        (int(m.group(1)), p) for p in root.iterdir() if (m := _STEP.match(p.name)) and (p / "train_state.pt").is_file()
    ]
    return sorted(out)


def clean_partial(root: Path) -> None:
    if root.is_dir():
        for p in root.iterdir():
            if p.name.startswith(".") and p.name.endswith(".tmp"):
                shutil.rmtree(p, ignore_errors=True)


def save(
    root: Path,
    step: int,
    policy_state: dict[str, torch.Tensor],
    policy_meta: dict[str, Any],
    stats_writer,
    train_state: dict[str, Any],
    config: dict[str, Any],
    keep_last: int,
    keep_keys: list[str] | None = None,
) -> Path:
    import torch

    from vla.policy.config import POLICY_FILE, STATS_FILE
    from vla.policy.weights import WEIGHTS_FILE, save_weights

    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".step_{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_weights(policy_state, tmp / WEIGHTS_FILE, keep_keys)
    (tmp / POLICY_FILE).write_text(json.dumps(policy_meta, indent=2))
    stats_writer(tmp / STATS_FILE)
    (tmp / "train_config.json").write_text(json.dumps(config, indent=2, default=str))
    torch.save(train_state, tmp / "train_state.pt")
    for f in tmp.iterdir():  # on disk before the rename makes it count
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    final = root / f"step_{step}"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for _, old in checkpoints(root)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_train_state(path: Path) -> dict[str, Any]:
    import torch

    try:
        return torch.load(path / "train_state.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - corrupted or foreign file
        raise ValueError(f"{path / 'train_state.pt'}: cannot read the training state: {exc}") from exc
