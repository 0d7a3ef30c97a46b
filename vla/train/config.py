"""The ``vla-train`` config groups as typed dataclasses (one source of defaults; YAML only overrides).

``model`` (:class:`~vla.policy.backbone.ModelConfig`), ``policy`` (:class:`~vla.policy.model.PolicyConfig`:
action tokens, chunking, inputs), ``data`` (:class:`DataConfig`) and ``train`` (:class:`TrainConfig`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vla_common.strict import from_dict
from vla.actions import NORMALIZATIONS

STRATEGIES = ("single", "ddp", "fsdp")
OPTIMIZERS = ("adamw", "sgd")
# spec: the env's action bounds (the demonstrations' EnvSpec), stored as OpenVLA's bounds
DATA_NORMALIZATIONS = (*NORMALIZATIONS, "spec")
DATA_KINDS = ("demos", "gst_qa", "spatial", "mixture")


@dataclass(frozen=True)
class DataConfig:
    """Where samples come from. ``kind=demos``: recorded demonstrations (``record=`` files or the official
    LIBERO HDF5) under ``paths``; ``gst_qa``: GST question sets (``vla-gst generate`` directories) as
    visual QA (``tasks`` keeps some subtasks); ``spatial``: spatial-perception question sets
    (``vla-data spatial`` split directories, ``tasks`` keeps some task types); ``mixture``: ``parts``,
    each a dict of these fields plus ``weight``. Memory inputs for demonstrations (``memory``:
    MemoryInputsConfig fields; None = off unless the policy reads the memory) are computed by replaying
    each episode through the memory transform, cached in ``cache_dir``."""

    kind: str = "demos"
    paths: list[str] = field(default_factory=list)
    key: str = ""  # dataset key (statistics key); "" = the kind's default (demos: the env family)
    cameras: list[str] | None = None  # cameras read from the files (None: the ones the policy reads)
    val_fraction: float = 0.1  # episodes held out for validation (by episode, never by step)
    action_mask: list[bool] | None = None  # per action dim: normalise it (True) or pass it through (LIBERO's gripper)
    # the range mapped to [-1, 1]: bounds_q99 ([q01, q99], OpenVLA's) | bounds ([min, max]: rare actions kept)
    # | spec (the env's action bounds: bins fixed before any data, e.g. demos recorded with agent.execute_bins)
    action_normalization: str = "bounds_q99"
    memory: dict[str, Any] | None = None
    cache_dir: str | None = None  # memory-input cache (default: <out>/memory_cache)
    # demos: own | shuffled (each sample's prompt drawn from all the episodes' instructions: the control
    # that shows whether a policy needs the instruction, vla/data/demos.py)
    instructions: str = "own"
    max_video_frames: int = 8  # gst_qa: video frames shown without memory inputs
    tasks: list[str] | None = None  # spatial: the task types kept; gst_qa: the subtasks kept (None: all)
    parts: list[dict[str, Any]] = field(default_factory=list)
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in DATA_KINDS:
            raise ValueError(f"data.kind must be one of {DATA_KINDS}, got {self.kind!r}")
        if self.kind == "mixture" and not self.parts:
            raise ValueError("data.kind=mixture needs data.parts (a list of data configs with weights)")
        if self.kind != "mixture" and not self.paths:
            raise ValueError(f"data.paths is empty: point data.paths=[...] at the {self.kind} files or directories")
        if self.action_normalization not in DATA_NORMALIZATIONS:
            raise ValueError(
                f"data.action_normalization must be one of {DATA_NORMALIZATIONS}, got {self.action_normalization!r}"
            )
        if self.instructions not in ("own", "shuffled"):
            raise ValueError(f"data.instructions must be 'own' or 'shuffled', got {self.instructions!r}")
        if not 0 <= float(self.val_fraction) < 1:
            raise ValueError(f"data.val_fraction must be in [0, 1), got {self.val_fraction}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "DataConfig":
        return from_dict(cls, d, "data", ignore=("name",))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 200
    batch_size: int = 8  # global batch (samples per optimizer step, all ranks together)
    micro_batch: int = 0  # samples per forward on one rank (0 = batch_size / world size): gradient accumulation
    lr: float = 5e-5  # VST's SFT learning rate
    vision_lr_scale: float = (
        0.1  # the vision tower learns at lr x this (VST: a tenth; 1.0 for a tower trained from scratch)
    )
    optimizer: str = "adamw"  # adamw | sgd (plain, no momentum: a step is w - lr * clipped gradient)
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup: float = 0.03  # fraction of steps (or steps if >= 1)
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    grad_clip: float = 1.0
    seed: int = 7
    strategy: str = "single"  # single | ddp | fsdp (ddp/fsdp under torchrun)
    device: str = "auto"  # auto: cuda when available, else cpu
    precision: str = "auto"  # auto: bf16 autocast on cuda, fp32 on cpu | fp32 | bf16
    loader_workers: int = 2  # data-loader processes per rank (0 = in the training process)
    log_every: int = 10
    val_every: int = 100  # steps (0 = never)
    val_batches: int = 4
    save_every: int = 100  # steps (0 = only at the end)
    keep_last: int = 2  # checkpoints kept
    # steps between resume points (out/checkpoints/resume/step_N, only the newest kept): a killed run loses
    # at most this many steps, while save_every spaces the checkpoints kept for choosing among (0 = none)
    resume_every: int = 0
    export: bool = True  # write out/policy (save_pretrained) at the end
    plot: bool = True  # out/train_curves.png
    threads: int = 0  # torch CPU threads (0 = torch's default)
    init_from: str | None = None  # start from these weights (a checkpoint or exported policy directory):
    #                               every tensor whose name and shape match; a fresh optimizer (DAgger rounds,
    #                               a VLA from a spatially tuned backbone). Ignored when the run resumes.

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        if self.strategy not in STRATEGIES:
            raise ValueError(f"train.strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if int(self.steps) < 1 or int(self.batch_size) < 1 or int(self.micro_batch) < 0:
            raise ValueError("train.steps and train.batch_size must be >= 1, train.micro_batch >= 0")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"train.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"train.precision must be auto, fp32 or bf16, got {self.precision!r}")
        if int(self.save_every) < 0 or int(self.resume_every) < 0:
            raise ValueError("train.save_every and train.resume_every must be >= 0 (0 = off)")
        if not self.lr > 0 or self.vision_lr_scale < 0 or self.keep_last < 1:
            raise ValueError("train.lr must be > 0, train.vision_lr_scale >= 0, train.keep_last >= 1")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "TrainConfig":
        return from_dict(cls, d, "train", ignore=("name",))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d
