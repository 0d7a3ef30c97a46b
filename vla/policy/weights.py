"""The policy's weights as one safetensors file (training checkpoints; exports use save_pretrained).

Tied parameters (a tied embedding and output projection; the action rows shared by the input
embedding and the action head) appear under several names in a state dict. A file keeps each tensor
once, under its canonical name (the first :meth:`torch.nn.Module.state_dict` gives it); loading
fills the aliases through the module itself.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .config import WEIGHTS_FILE

__all__ = ["WEIGHTS_FILE", "canonical_keys", "load_weights", "save_weights"]


def canonical_keys(module: torch.nn.Module) -> list[str]:
    """The first state-dict name of every distinct tensor of ``module`` (call it before FSDP wrapping)."""
    seen: set[tuple] = set()
    keep = []
    for k, v in module.state_dict(keep_vars=True).items():
        key = (v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape), v.dtype)
        if key not in seen:
            seen.add(key)
            keep.append(k)
    return keep


def save_weights(state: dict[str, torch.Tensor], path: Path, keep: list[str] | None = None) -> None:
    """Write ``state`` (only the ``keep`` names when given, else one name per shared tensor)."""
    from safetensors.torch import save_file

    if keep is None:
        seen: set[tuple] = set()
        keep = []
        for k, v in state.items():
            key = (v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape), v.dtype)
            if key not in seen:
                seen.add(key)
                keep.append(k)
    missing = [k for k in keep if k not in state]
    if missing:
        raise ValueError(f"cannot save the policy: the state dict lacks {missing[:5]}")
    save_file({k: state[k].detach().cpu().contiguous() for k in keep}, str(path))


def load_weights(module: torch.nn.Module, path: Path) -> None:
    """Load a file written by :func:`save_weights` into ``module`` (aliases filled through sharing);
    a file that does not match the module raises ``ValueError`` naming the file and the keys."""
    from safetensors.torch import load_file

    try:
        state = load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types on a corrupted file
        raise ValueError(f"{path}: cannot read the policy weights: {exc}") from exc
    expected = set(canonical_keys(module))
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(
            f"{path}: the weights do not match the policy: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    own = module.state_dict()
    bad = [k for k in state if tuple(state[k].shape) != tuple(own[k].shape)]
    if bad:
        raise ValueError(
            f"{path}: shape mismatch for {bad[:5]} (e.g. {tuple(state[bad[0]].shape)} vs {tuple(own[bad[0]].shape)})"
        )
    module.load_state_dict(state, strict=False)
