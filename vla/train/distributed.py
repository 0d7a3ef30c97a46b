"""Process groups and model wrapping for ``train.strategy=single|ddp|fsdp``.

Launch with torchrun for ddp/fsdp (one node or many; see docs/POLICY.md "Training at scale"):
torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the rendezvous; the backend is NCCL on
CUDA and gloo on CPU (which is how the CI test runs 2-process DDP). ``single`` needs no launcher.

FSDP uses PyTorch's ``fully_shard`` (FSDP2): every transformer decoder layer and vision block is a
shard unit, then the root. Checkpoints gather a full state dict on rank 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass
class Dist:
    strategy: str
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1 and torch.distributed.is_initialized()

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.active:
            t = t.clone()
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def close(self) -> None:
        if self.active:
            torch.distributed.destroy_process_group()


def setup(strategy: str, device: str = "auto") -> Dist:
    """The process group for ``strategy`` (``single``: none) and this process's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if strategy == "single":
        if world > 1:
            raise ValueError(
                f"train.strategy=single under a launcher with WORLD_SIZE={world}: use train.strategy=ddp or fsdp"
            )
        return Dist("single", device=device)
    if world == 1 and "RANK" not in os.environ:
        raise ValueError(
            f"train.strategy={strategy} needs torchrun (e.g. torchrun --nproc_per_node=2 -m vla.train.cli ...)"
        )
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend)
    return Dist(strategy, rank, world, local, device)


def wrap(model: torch.nn.Module, dist: Dist) -> torch.nn.Module:
    """The model as the strategy trains it (the bare module for ``single``)."""
    if dist.strategy == "single" or dist.world == 1 and dist.strategy == "ddp":
        return model
    if dist.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [int(dist.device.split(":")[1])] if dist.device.startswith("cuda") else None
        return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=True)
    from torch.distributed.fsdp import fully_shard

    for module in model.modules():
        name = type(module).__name__
        if name.endswith("DecoderLayer") or name.endswith("VisionBlock"):
            fully_shard(module)
    fully_shard(model)
    return model


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") and not hasattr(model, "backbone") else model
