"""The learned policy: a spatially tuned VLM with 256-bin action tokens (docs/POLICY.md).

    policy = build_policy(ModelConfig(...), PolicyConfig(...), stats)   # new (training starts here)
    policy = load_policy("runs/t/policy")                               # exported or a checkpoint dir
    actions = policy.infer_batch([obs.to_dict(), ...])                  # (B, K, D), un-normalised

Modules: ``backbone`` (Qwen2.5-VL / Qwen3-VL by name, path or config), ``inputs`` (the transforms
from samples to images + text, shared by training and inference), ``encode`` (token sequences and
tensors), ``model`` (``VLAPolicy``: action head, loss, constrained decoding, export), ``question_inputs``
(a GST question's images and prompt) and ``stream_memory`` (the memory inputs of a question's sensor
stream, fused once and kept), which training's GST samples and the learned agent's answers share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .backbone import ModelConfig
from .inputs import InputConfig
from .config import EXTRA_FILE, POLICY_FILE, STATS_FILE, PolicyConfig
from .config import WEIGHTS_FILE as CHECKPOINT_FILE  # a training checkpoint's weights (vla/train/checkpoint.py)


def __getattr__(name: str):
    if name == "VLAPolicy":  # torch is imported only when the model is needed
        from .model import VLAPolicy

        return VLAPolicy
    raise AttributeError(name)


def build_policy(
    model: ModelConfig,
    policy: PolicyConfig,
    stats: dict[str, Any],
    device: str = "cpu",
    proprio: dict[str, Any] | None = None,
):
    """A new policy: the backbone loaded or built, the action tokenizer placed, statistics (action, and
    proprio for ``inputs.proprio=token``) attached. ``policy.action_dim=0`` takes the dimension from the
    statistics (the data's actions)."""
    from vla.actions import ActionTokenizer

    from .backbone import load_backbone
    from .model import VLAPolicy

    policy = resolve_action_dim(_with_image_size(policy, model), stats)
    backbone, processor = load_backbone(model, device)
    rows = _embedding_rows(backbone)
    tokenizer = ActionTokenizer.for_tokenizer(processor.tokenizer, rows, policy.placement, policy.n_bins)
    return VLAPolicy(backbone, processor, tokenizer, policy, stats, model, proprio).to(device)


def resolve_action_dim(policy: PolicyConfig, stats: dict[str, Any]) -> PolicyConfig:
    """The policy with ``action_dim`` taken from the statistics when it is 0 (all keys must agree)."""
    if int(policy.action_dim) != 0:
        return policy
    from dataclasses import replace

    dims = {key: s.dim for key, s in stats.items()}
    if len(set(dims.values())) != 1:
        raise ValueError(
            f"policy.action_dim=0 takes the action dimension from the data, but the datasets disagree: {dims}; "
            "set policy.action_dim"
        )
    return replace(policy, action_dim=next(iter(dims.values())))


def _with_image_size(policy: PolicyConfig, model: ModelConfig) -> PolicyConfig:
    """The policy's images are the model's size (``inputs.image_size: 0``); a different explicit size is an error."""
    from dataclasses import replace

    size = int(policy.inputs.image_size)
    if size == 0:
        return replace(policy, inputs=replace(policy.inputs, image_size=int(model.image_size)))
    if size != int(model.image_size):
        raise ValueError(
            f"policy.inputs.image_size={size} but model.image_size={model.image_size}: the processor expects the latter"
        )
    return policy


def _embedding_rows(backbone) -> int:
    from .backbone import base_model

    emb = base_model(backbone).get_input_embeddings()
    return int(getattr(emb, "base", emb).weight.shape[0])


def load_policy(path: str | Path, device: str = "cpu"):
    """A policy from an exported directory (``VLAPolicy.save_pretrained``) or a training checkpoint
    directory (``out/checkpoints/step_N``). Missing files, statistics for another action dimension
    or a tokenizer that does not match the saved action-id mapping raise ``ValueError`` naming the
    file and the mismatch -- here, at load time, never mid-episode."""
    from vla.actions import ActionTokenizer, read_statistics

    path = Path(path)
    meta_file = path / POLICY_FILE
    meta = _read_meta(path)
    try:
        pcfg = PolicyConfig.from_dict(meta["policy"])
        saved_tok = ActionTokenizer.from_dict(meta["action_tokenizer"])
        mcfg = ModelConfig.from_dict(meta["model"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{meta_file}: malformed policy metadata: {exc}") from exc
    stats_file = path / STATS_FILE
    if not stats_file.is_file():
        raise ValueError(f"{path}: {STATS_FILE} is missing (the action statistics the policy un-normalises with)")
    stats = read_statistics(stats_file)
    proprio = read_statistics(stats_file, field="proprio")
    for key, s in stats.items():
        if s.dim != pcfg.action_dim:
            raise ValueError(
                f"{stats_file}: statistics {key!r} are {s.dim}-dim but {meta_file} says action_dim={pcfg.action_dim}"
            )
    checkpoint = path / CHECKPOINT_FILE
    if checkpoint.is_file():  # a training checkpoint: rebuild the architecture, then load every weight
        from .weights import load_weights

        policy = build_policy(mcfg, pcfg, stats, device, proprio)
        saved_tok.verify_tokenizer(policy.processor.tokenizer, _embedding_rows(policy.backbone))
        load_weights(policy, checkpoint)
        return policy
    if not (path / "config.json").is_file():
        raise ValueError(f"{path}: neither an exported policy (config.json) nor a checkpoint ({CHECKPOINT_FILE})")
    from .backbone import load_backbone
    from .model import VLAPolicy

    pcfg = _with_image_size(pcfg, mcfg)
    backbone, processor = load_backbone(
        ModelConfig.from_dict({**mcfg.to_dict(), "name_or_path": str(path), "tokenizer": None}), device
    )
    rows = _embedding_rows(backbone)
    saved_tok.verify_tokenizer(processor.tokenizer, rows)
    policy = VLAPolicy(backbone, processor, saved_tok, pcfg, stats, mcfg, proprio).to(device)
    _load_extra(policy, path / EXTRA_FILE)
    return policy


def _read_meta(path: Path) -> dict[str, Any]:
    """The policy directory's ``vla_policy.json`` (``ValueError`` naming what is missing or malformed)."""
    if not path.is_dir():
        raise ValueError(f"policy directory {path} does not exist")
    meta_file = path / POLICY_FILE
    if not meta_file.is_file():
        raise ValueError(
            f"{path} is not a policy directory: {POLICY_FILE} is missing (export with vla-train or save_pretrained)"
        )
    try:
        meta = json.loads(meta_file.read_text())
    except ValueError as exc:
        raise ValueError(f"{meta_file}: malformed policy metadata: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_file}: malformed policy metadata: not a JSON object")
    return meta


def read_policy_config(path: str | Path) -> PolicyConfig:
    """The :class:`PolicyConfig` saved in a policy directory, without loading the model."""
    meta_file = Path(path) / POLICY_FILE
    meta = _read_meta(Path(path))
    try:
        return PolicyConfig.from_dict(meta["policy"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{meta_file}: malformed policy metadata: {exc}") from exc


def memory_inputs(policy: Any, seed: int | tuple = 0, always: bool = False, perception: str | None = None):
    """The one factory of per-session memory inputs: a fresh :class:`~vla.transforms.map_inputs.MemoryInputs`.

    ``policy`` is a loaded policy, its :class:`PolicyConfig` or a policy directory (the inputs are built
    from the memory config the policy was trained with -- what every place that runs the policy, the
    in-process agent, the server, offline GST answers, feeds it), or a memory-inputs config itself
    (a :class:`~vla.transforms.map_inputs.MemoryInputsConfig` or its dict: the memory agent's own, the caches
    of recorded data). None when a policy reads no memory, unless ``always`` (a memory the agent answers
    from): then the defaults. ``perception``: the profile of the sensors the memory fuses in this run
    (``gt``, ``realistic``, ``harsh``, ``learned``; None: the config's own), which sets the memory's settings
    (:func:`spatial_memory.profiles.memory_config_for`) -- a policy trained under ``gt`` and run under
    ``harsh`` fuses harsh frames with harsh settings, as the memory agent does."""
    from dataclasses import replace

    from vla.transforms.map_inputs import MemoryInputs, MemoryInputsConfig

    if isinstance(policy, (MemoryInputsConfig, dict)):
        return MemoryInputs(MemoryInputsConfig.from_any(policy), seed=seed)
    if isinstance(policy, (str, Path)):
        pcfg = read_policy_config(policy)
    else:
        pcfg = policy if isinstance(policy, PolicyConfig) else policy.config
    cfg = pcfg.memory_inputs_config()
    if cfg is None:
        if not always:
            return None
        cfg = pcfg.memory if pcfg.memory is not None else MemoryInputsConfig()
    if perception is not None and perception != cfg.perception:
        cfg = replace(cfg, perception=str(perception))  # validated by the config itself
    return MemoryInputs(cfg, seed=seed)


def _load_extra(policy, file: Path) -> None:
    """The exported parameters outside the backbone (proprio projector, query slots), exactly those the policy has."""
    from .embedding import extra_parameters

    want = extra_parameters(policy)
    if not want:
        return
    if not file.is_file():
        raise ValueError(f"{file.parent}: {file.name} is missing (the policy's {sorted(want)[:3]} ... parameters)")
    from safetensors.torch import load_file

    try:
        state = load_file(str(file))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types on a corrupted file
        raise ValueError(f"{file}: cannot read: {exc}") from exc
    missing, unexpected = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    bad = [k for k in want if k in state and tuple(state[k].shape) != tuple(want[k].shape)]
    if missing or unexpected or bad:
        raise ValueError(f"{file}: does not match the policy: missing {missing}, unexpected {unexpected}, shape {bad}")
    policy.load_state_dict(state, strict=False)


__all__ = [
    "InputConfig",
    "ModelConfig",
    "PolicyConfig",
    "VLAPolicy",
    "build_policy",
    "load_policy",
    "memory_inputs",
    "read_policy_config",
    "resolve_action_dim",
]
