"""Prompt tokens and image patches without the processor's per-call overhead (same numbers, ~10x faster).

The policy's images are already square at the model's size (``Resize`` made them so), so the Qwen
image processor's resize is a no-op there and what remains is arithmetic: rescale, normalise with
the processor's mean and std, cut into ``patch_size`` patches grouped by ``merge_size`` blocks and
repeated ``temporal_patch_size`` times (a still image is a two-frame video to the vision tower).
:class:`FastProcessor` does that in numpy with the processor's own settings, and tokenises the
chat text once per distinct text (the prompts of an episode repeat), expanding each
``<|image_pad|>`` to the image's merged patch count, as the processor does.

:meth:`FastProcessor.matches` compares both with the real processor on a probe image and prompt;
:func:`fast_processor` returns a :class:`FastProcessor` only when they agree exactly (otherwise the
encoder keeps calling the processor), so a processor this module does not know is never
approximated. ``tests/test_policy.py`` checks the equality for both Qwen families.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

IMAGE_PAD = "<|image_pad|>"


class FastProcessor:
    def __init__(self, processor: Any, image_size: int) -> None:
        ip = processor.image_processor
        self.tokenizer = processor.tokenizer
        self.size = int(image_size)
        self.patch, self.merge = int(ip.patch_size), int(ip.merge_size)
        self.temporal = int(getattr(ip, "temporal_patch_size", 1) or 1)
        # the processor's arithmetic, in its order: rescaling fused into the normalisation (float32)
        mean, std = np.asarray(ip.image_mean, np.float32), np.asarray(ip.image_std, np.float32)
        if ip.do_normalize and ip.do_rescale:
            factor = np.float32(1.0 / float(ip.rescale_factor))
            mean, std = mean * factor, std * factor
        elif not ip.do_normalize:
            scale = np.float32(ip.rescale_factor if ip.do_rescale else 1.0)
            mean, std = np.zeros(3, np.float32), np.full(3, np.float32(1.0) / scale, np.float32)
        self.mean, self.std = mean.astype(np.float32), std.astype(np.float32)
        self.pad_id = self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        if self.size % (self.patch * self.merge):
            raise ValueError(f"image size {self.size} is not a multiple of patch {self.patch} x merge {self.merge}")
        self.grid = self.size // self.patch
        self.tokens_per_image = self.grid * self.grid // (self.merge * self.merge)
        self._texts: OrderedDict[str, list[int]] = OrderedDict()

    def patches(self, images: list[np.ndarray]):
        """(n * grid_h * grid_w, C * temporal * patch * patch) float32 tensor, the processor's layout."""
        import torch

        x = (np.stack(images).astype(np.float32) - self.mean) / self.std  # N H W C
        g, m, p, n = self.grid, self.merge, self.patch, len(images)
        t = torch.from_numpy(x).permute(0, 3, 1, 2).reshape(n, 3, g // m, m, p, g // m, m, p)
        t = t.permute(0, 2, 5, 3, 6, 1, 4, 7)  # n, gh/m, gw/m, m, m, C, p, p
        t = t.unsqueeze(6).expand(-1, -1, -1, -1, -1, -1, self.temporal, -1, -1)
        return t.reshape(n * g * g, 3 * self.temporal * p * p)

    def ids(self, text: str) -> list[int]:
        ids = self._texts.get(text)
        if ids is None:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            self._texts[text] = ids
            if len(self._texts) > 256:
                self._texts.popitem(last=False)
        return ids

    def __call__(self, text: str, images: list[np.ndarray]) -> dict[str, Any]:
        import torch

        base = self.ids(text)
        if base.count(self.pad_id) != len(images):
            raise ValueError(f"the prompt has {base.count(self.pad_id)} image markers but {len(images)} images")
        ids: list[int] = []
        for t in base:
            ids.extend([t] * self.tokens_per_image if t == self.pad_id else [t])
        out: dict[str, Any] = {"input_ids": ids, "mm_token_type_ids": [int(t == self.pad_id) for t in ids]}
        if images:
            for img in images:
                if img.shape != (self.size, self.size, 3) or img.dtype != np.uint8:
                    raise ValueError(f"expected uint8 {self.size}x{self.size}x3 images, got {img.dtype} {img.shape}")
            out["pixel_values"] = self.patches(images)
            out["image_grid_thw"] = torch.tensor([[1, self.grid, self.grid]] * len(images), dtype=torch.long)
        return out

    def matches(self, processor: Any) -> bool:
        """True when this path gives the processor's exact ids, token types, patches and grids on a probe."""
        rng = np.random.default_rng(0)
        images = [rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8) for _ in range(2)]
        text = (
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>a <|vision_start|><|image_pad|>"
            "<|vision_end|>What action should the robot take to probe?<|im_end|>\n<|im_start|>assistant\n"
        )
        ref = processor(text=[text], images=images, return_tensors="pt")
        mine = self(text, images)
        ref_mm = ref["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in ref else mine["mm_token_type_ids"]
        return (
            ref["input_ids"][0].tolist() == mine["input_ids"]
            and ref_mm == mine["mm_token_type_ids"]
            and ref["pixel_values"].shape == mine["pixel_values"].shape
            and bool((ref["pixel_values"].float() == mine["pixel_values"]).all())
            and ref["image_grid_thw"].tolist() == mine["image_grid_thw"].tolist()
        )


def fast_processor(processor: Any, image_size: int) -> FastProcessor | None:
    """A :class:`FastProcessor` that reproduces ``processor`` exactly, or None (then use the processor)."""
    try:
        fast = FastProcessor(processor, image_size)
        return fast if fast.matches(processor) else None
    except (AttributeError, ValueError, TypeError, KeyError):
        return None
