"""From the ``data`` config to batches: sources, the train/val split, and per-step batches.

Batches are a pure function of (seed, step): the mixture draws the step's global batch with
``np.random.default_rng([seed, step])``, each rank takes every ``world``-th sample of it, and
augmentation draws from ``np.random.default_rng([seed, step, g])`` for the sample at place ``g`` of
the global batch. So a resumed run
sees exactly the batches an uninterrupted one would, data-loader workers need no shared state, and
a DDP run sees exactly the samples a single process with the same global batch sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import DataConfig


def build_source(
    cfg: DataConfig,
    chunk: int,
    memory: dict[str, Any] | None,
    cache_root: Path,
    cameras: tuple[str, ...] = (),
    frames: tuple[int, str] | None = None,
):
    """One :class:`vla.data.SampleSource` for a non-mixture data config (``cameras``: the policy's, read from
    demonstrations unless ``cfg.cameras`` names others; ``frames``: the policy's memory of frames, K and
    its camera, :mod:`vla.transforms.frame_memory`)."""
    from vla.data import DemoSource, GSTQASource, MemoryCache
    from vla.transforms.map_inputs import MemoryInputsConfig

    mem_cfg = MemoryInputsConfig.from_dict(cfg.memory or memory) if (cfg.memory or memory) is not None else None
    if cfg.kind == "demos":
        cache = (
            MemoryCache(Path(cfg.cache_dir) if cfg.cache_dir else cache_root, mem_cfg) if mem_cfg is not None else None
        )
        cams = tuple(cfg.cameras) if cfg.cameras is not None else tuple(cameras)
        return DemoSource(
            list(cfg.paths),
            key=cfg.key or None,
            chunk=chunk,
            cameras=cams,
            memory=cache,
            frames=frames,
            instructions=cfg.instructions,
        )
    if cfg.kind == "gst_qa":
        if len(cfg.paths) != 1:
            raise ValueError(f"data.kind=gst_qa reads one question directory, got paths={cfg.paths}")
        cache = (Path(cfg.cache_dir) if cfg.cache_dir else cache_root) if mem_cfg is not None else None
        frames = cfg.max_video_frames
        return GSTQASource(
            cfg.paths[0],
            cfg.key or "gst_qa",
            memory=mem_cfg,
            max_video_frames=frames,
            cache_dir=cache,
            subtasks=cfg.tasks,
        )
    if cfg.kind == "spatial":
        from vla.data.spatial_qa import SpatialQASource

        if len(cfg.paths) != 1:
            raise ValueError(f"data.kind=spatial reads one split directory (runs/spatial/train), got paths={cfg.paths}")
        return SpatialQASource(cfg.paths[0], cfg.key or "spatial", tasks=cfg.tasks)
    raise ValueError(f"cannot build a single source of kind {cfg.kind!r}")


def build_sources(
    cfg: DataConfig,
    chunk: int,
    memory: dict[str, Any] | None,
    cache_root: Path,
    seed: int,
    cameras: tuple[str, ...] = (),
    frames: tuple[int, str] | None = None,
):
    """``(train sources, val sources, weights, action normalisation per dataset key)``, split by episode; the
    last maps a key to ``{"mask": [...] or None, "normalization": ...}`` (:func:`action_statistics` reads it)."""
    from vla.data import split_by_episode

    parts = [DataConfig.from_dict(p) for p in cfg.parts] if cfg.kind == "mixture" else [cfg]
    train, val, weights, norms = [], [], [], {}
    for part in parts:
        src = build_source(part, chunk, memory, cache_root, cameras, frames)
        mask = list(part.action_mask) if part.action_mask is not None else None
        norms[src.key] = {"mask": mask, "normalization": part.action_normalization}
        tr, va = split_by_episode(src, part.val_fraction, seed)
        train.append(tr)
        val.append(va)
        weights.append(float(part.weight))
    return train, val, weights, norms


def action_statistics(sources: list[Any], norms: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per dataset key, OpenVLA statistics over the training episodes' actions (``norms``: per key, the
    ``mask`` and ``normalization`` of :func:`build_sources`)."""
    from vla.actions import ActionStats

    by_key: dict[str, list[np.ndarray]] = {}
    for s in sources:
        a = s.actions()
        if a is not None and len(a):
            by_key.setdefault(s.key, []).append(np.asarray(a, dtype=np.float64))
    norms = norms or {}
    out = {}
    for k, v in by_key.items():
        norm = dict(norms.get(k, {"mask": None}))
        spec = norm.get("normalization") == "spec"
        if spec:
            norm["normalization"] = "bounds"
        out[k] = ActionStats.from_actions(np.concatenate(v), **norm)
        if spec:
            low, high = _action_bounds([s for s in sources if s.key == k], k)
            out[k] = out[k].with_bounds(low, high)
    return out


def _action_bounds(sources: list[Any], key: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The one action bound of dataset ``key``'s demonstrations (their EnvSpec), for ``normalization=spec``."""
    bounds = set()
    for s in sources:
        if not hasattr(s, "spec"):
            raise ValueError(
                f"data.action_normalization=spec needs demonstrations (an env's action bounds); {key!r} has none"
            )
        bounds |= {(a.low, a.high) for a in (s.spec(e).action for e in s.episodes())}
    if len(bounds) != 1:
        raise ValueError(
            f"data.action_normalization=spec: {key!r}'s episodes have different action bounds: {sorted(bounds)}"
        )
    return bounds.pop()


def proprio_statistics(sources: list[Any], keys: tuple[str, ...] = ("state",)) -> dict[str, Any]:
    """Per dataset key, statistics of the training episodes' proprio vectors (``inputs.proprio=token``; ``keys``:
    ``inputs.proprio_keys``); sources without states (question sets) are left out."""
    from vla.transforms.map_inputs import MEMORY_FEATURES

    by_key: dict[str, list[list[np.ndarray]]] = {}
    for s in sources:
        states = getattr(s, "states", None)
        if states is None or not len(s):
            continue
        cols = [None if k in MEMORY_FEATURES else np.asarray(states((k,)), dtype=np.float64) for k in keys]
        by_key.setdefault(s.key, []).append(cols)
    return {k: _stats_by_column(v, keys) for k, v in by_key.items()}


def _stats_by_column(parts: list[list[Any]], keys: tuple[str, ...]) -> Any:
    """One dataset key's proprio statistics, key by key in ``keys``' order: a data key's from its
    columns over every source, a memory feature's fixed (its entries are already in [-1, 1]: passed
    through, ``mask`` False)."""
    from vla.actions import STAT_FIELDS, ActionStats
    from vla.transforms.map_inputs import MEMORY_FEATURES

    fixed = {"q01": -1.0, "q99": 1.0, "mean": 0.0, "std": 1.0, "min": -1.0, "max": 1.0}

    def passed_through(dim: int) -> ActionStats:
        return ActionStats(**{f: [fixed[f]] * dim for f in STAT_FIELDS}, mask=[False] * dim)

    per_key = [
        passed_through(MEMORY_FEATURES[k].dim)
        if k in MEMORY_FEATURES
        else ActionStats.from_actions(np.concatenate([p[i] for p in parts]))
        for i, k in enumerate(keys)
    ]
    return ActionStats(**{f: np.concatenate([getattr(s, f) for s in per_key]) for f in (*STAT_FIELDS, "mask")})


class StepBatches(torch.utils.data.Dataset):
    """Item ``k`` = this rank's micro-batches of step ``start + k``, encoded (see the module doc)."""

    def __init__(
        self,
        mixture: Any,
        transform: Any,
        encoder: Any,
        global_batch: int,
        micro: int,
        rank: int,
        world: int,
        seed: int,
        start: int,
        steps: int,
        augment: bool = True,
    ) -> None:
        self.mixture, self.transform, self.encoder = mixture, transform, encoder
        self.global_batch, self.micro, self.rank, self.world = (
            int(global_batch),
            max(1, int(micro)),
            int(rank),
            int(world),
        )
        self.seed, self.start, self.steps, self.augment = int(seed), int(start), int(steps), augment

    def __len__(self) -> int:
        return max(0, self.steps - self.start)

    def samples(self, step: int) -> list[Any]:
        picks = self.mixture.sample_indices(step, self.global_batch, self.seed)[self.rank :: self.world]
        return [self.mixture.sources[s].sample(i) for s, i in picks]

    def __getitem__(self, k: int) -> dict[str, Any]:
        step = self.start + k
        inputs = []
        for j, sample in enumerate(self.samples(step)):
            g = self.rank + j * self.world  # the sample's place in the step's global batch
            rng = np.random.default_rng([self.seed, step, g]) if self.augment else None
            inputs.append(self.transform.sample(sample, rng))
        micro = [inputs[i : i + self.micro] for i in range(0, len(inputs), self.micro)]
        batches = [self.encoder.train_batch(m) for m in micro]
        actions = [[mi.actions for mi in m if mi.actions is not None] for m in micro]
        datasets = [[mi.dataset for mi in m if mi.actions is not None] for m in micro]
        return {"step": step, "batches": batches, "actions": actions, "datasets": datasets, "n": len(inputs)}


def loader(dataset: StepBatches, workers: int) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=None,
        shuffle=False,
        num_workers=int(workers),
        persistent_workers=False,
        prefetch_factor=2 if workers else None,
    )
