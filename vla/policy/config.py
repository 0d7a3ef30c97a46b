"""``PolicyConfig``: how actions are tokenised and what the policy sees (the ``policy`` config group)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vla_common.strict import from_dict
from vla.transforms.map_inputs import MEMORY_FEATURES, MemoryInputsConfig

from .inputs import InputConfig

POLICY_FILE = "vla_policy.json"
STATS_FILE = "dataset_statistics.json"
WEIGHTS_FILE = "policy_state.safetensors"  # a training checkpoint's weights (vla/policy/weights.py)
EXTRA_FILE = "vla_extra.safetensors"  # an export's parameters outside the backbone (proprio projector, queries)
DECODINGS = ("autoregressive", "parallel")


@dataclass(frozen=True)
class PolicyConfig:
    """How actions are tokenised and what the policy sees (saved as ``vla_policy.json``)."""

    placement: str = "last_ids"  # last_ids (OpenVLA) | added_tokens (<|action_i|>, as the VST repo)
    n_bins: int = 256
    chunk: int = 1  # K actions per prediction (K x D tokens)
    decoding: str = "autoregressive"  # autoregressive (one token per forward, KV cache) | parallel (OpenVLA-OFT:
    #                                   K x D query tokens, bidirectional among themselves, one forward pass)
    action_dim: int = 7  # 0: the dimension of the training data's actions (set when the policy is built)
    dataset_key: str = ""  # statistics used to un-normalise at inference ("" = the only / first key)
    freeze_embeddings: bool = True  # train only the action rows of the embedding matrix
    inputs: InputConfig = field(default_factory=InputConfig)
    memory: MemoryInputsConfig | None = None  # the memory inputs the policy was trained with (set by vla-train)

    def __post_init__(self) -> None:
        if isinstance(self.inputs, dict):
            object.__setattr__(self, "inputs", InputConfig.from_dict(self.inputs))
        if isinstance(self.memory, dict):
            object.__setattr__(self, "memory", MemoryInputsConfig.from_dict(self.memory))
        if self.placement not in ("last_ids", "added_tokens"):
            raise ValueError(f"policy.placement must be last_ids or added_tokens, got {self.placement!r}")
        if self.decoding not in DECODINGS:
            raise ValueError(f"policy.decoding must be one of {DECODINGS}, got {self.decoding!r}")
        if int(self.chunk) < 1 or int(self.action_dim) < 0 or int(self.n_bins) < 2:
            raise ValueError("policy.chunk must be >= 1, policy.action_dim >= 0 (0: from the data), n_bins >= 2")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "PolicyConfig":
        return from_dict(cls, d, "policy")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["inputs"] = self.inputs.to_dict()
        d["memory"] = None if self.memory is None else self.memory.to_dict()
        return d

    def memory_inputs_config(self) -> MemoryInputsConfig | None:
        """The memory inputs this policy reads (None when it reads none): the ones it was trained with,
        or the defaults for a policy built without them."""
        if not self.inputs.uses_memory:
            return None
        return self.memory if self.memory is not None else MemoryInputsConfig()

    def with_memory(self, memory: MemoryInputsConfig | dict | None, model_image_size: int) -> "PolicyConfig":
        """The policy with its memory inputs settled before training: ``memory`` when given, else what its
        inputs imply -- the map image at the size the model sees (``inputs.image_size``, or the model's
        ``model_image_size`` when that is 0), the object table in words, the routes (and the table) for
        ``proprio_keys`` with ``memory/routes``. A policy that reads no memory
        is returned as it is."""
        if not self.inputs.uses_memory:
            return self
        if not memory:
            groups = ["topdown"] if self.inputs.memory_map else []
            groups += ["objects", "text"] if self.inputs.memory_text else []
            for key in self.inputs.memory_features:  # e.g. the routes as numbers: the routes and the table
                groups += list(MEMORY_FEATURES[key].groups)
            groups = list(dict.fromkeys(groups))
            size = int(self.inputs.image_size) or int(model_image_size)
            memory = {"inputs": groups, "map_size": [size, size]}
        if isinstance(memory, dict):
            memory = MemoryInputsConfig.from_dict(memory)
        if any(self.inputs.memory_text_jitter) and "objects" not in memory.inputs:
            raise ValueError(
                "inputs.memory_text_jitter rewrites the object table from its rows (memory/objects/*), but the "
                f"memory inputs are {list(memory.inputs)}: add 'objects' to data.memory.inputs"
            )
        return replace(self, memory=memory)
