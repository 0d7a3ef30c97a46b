"""Token sequences and tensors from :class:`~vla.policy.inputs.ModelInput` s (Qwen chat format).

A sample becomes ``<|im_start|>user\\n{images and text}<|im_end|>\\n<|im_start|>assistant\\n``
(each ``<image>`` marker becomes ``<|vision_start|><|image_pad|><|vision_end|>``, which the
processor expands to the image's tokens) followed, in training, by the target: the action tokens
(K x D ids of the action tokenizer, row-major over the chunk) or the answer's text tokens and
``<|im_end|>``. Training batches are right-padded; inference batches left-padded (every prompt then
ends at the last column, where decoding continues).

The loss reads hidden states only where a target token is predicted: ``action_pos`` / ``text_pos``
index the flattened ``(B * L)`` hidden states whose next token is a target, with the action bin
(0..n_bins-1) or the text token id to predict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .inputs import IMAGE, ModelInput

VISION = "<|vision_start|><|image_pad|><|vision_end|>"
IM_END = "<|im_end|>"


def chat_text(user_text: str) -> str:
    return f"<|im_start|>user\n{user_text.replace(IMAGE, VISION)}{IM_END}\n<|im_start|>assistant\n"


@dataclass
class Encoded:
    ids: list[int]
    mm: list[int]  # mm_token_type_ids (1 on image tokens)
    pixel_values: Any  # torch tensor (patches, dim) or None
    grid: Any  # torch tensor (n_images, 3) or None
    target_from: int  # index in ids where the target starts (== prompt length)
    action_bins: list[int]  # bins of the target action tokens (empty for qa)
    text_targets: list[int]  # ids of the target text tokens (empty for action samples)


class Encoder:
    """Tokenises model inputs with the backbone's processor and the policy's action tokenizer."""

    def __init__(self, processor: Any, action_tokenizer: Any, stats: dict[str, Any], default_key: str) -> None:
        self.processor, self.actions, self.stats, self.default_key = processor, action_tokenizer, stats, default_key
        tok = processor.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.convert_tokens_to_ids("<|endoftext|>")
        self.im_end_id = tok.convert_tokens_to_ids(IM_END)

    def stats_for(self, key: str):
        key = key or self.default_key
        if key not in self.stats:
            raise ValueError(f"no action statistics for dataset {key!r}; the policy has {sorted(self.stats)}")
        return self.stats[key]

    def prompt(self, mi: ModelInput) -> Encoded:
        out = self.processor(text=[chat_text(mi.text)], images=list(mi.images) or None, return_tensors="pt")
        ids = out["input_ids"][0].tolist()
        mm = out["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in out else [0] * len(ids)
        return Encoded(ids, mm, out.get("pixel_values"), out.get("image_grid_thw"), len(ids), [], [])

    def with_target(self, mi: ModelInput) -> Encoded:
        e = self.prompt(mi)
        if mi.actions is not None:
            a = np.asarray(mi.actions, dtype=np.float64)
            ids = self.actions.encode(self.stats_for(mi.dataset).normalize(a)).reshape(-1)
            bins = self.actions.bin_index(ids).astype(np.int64).tolist()
            e.ids = e.ids + [int(i) for i in ids]
            e.action_bins = bins
        elif mi.answer is not None:
            t = self.processor.tokenizer(mi.answer, add_special_tokens=False)["input_ids"] + [self.im_end_id]
            e.ids = e.ids + t
            e.text_targets = t
        else:
            raise ValueError("a training sample needs actions or an answer")
        e.mm = e.mm + [0] * (len(e.ids) - len(e.mm))
        return e

    # ------------------------------------------------------------------ batches
    def train_batch(self, inputs: list[ModelInput]) -> dict[str, Any]:
        """Right-padded batch with the loss's target positions."""
        return self._collate([self.with_target(mi) for mi in inputs], left=False)

    def infer_batch(self, inputs: list[ModelInput]) -> dict[str, Any]:
        """Left-padded prompts (decoding continues at the last column)."""
        return self._collate([self.prompt(mi) for mi in inputs], left=True)

    def _collate(self, enc: list[Encoded], left: bool) -> dict[str, Any]:
        import torch

        L = max(len(e.ids) for e in enc)
        B = len(enc)
        ids = torch.full((B, L), self.pad_id, dtype=torch.long)
        mm = torch.zeros((B, L), dtype=torch.int)
        mask = torch.zeros((B, L), dtype=torch.long)
        action_pos, action_bins, text_pos, text_ids = [], [], [], []
        for b, e in enumerate(enc):
            n = len(e.ids)
            off = L - n if left else 0
            ids[b, off : off + n] = torch.tensor(e.ids)
            mm[b, off : off + n] = torch.tensor(e.mm, dtype=torch.int)
            mask[b, off : off + n] = 1
            # the hidden state at position p predicts the token at p + 1
            start = off + e.target_from - 1
            for j, v in enumerate(e.action_bins):
                action_pos.append(b * L + start + j)
                action_bins.append(v)
            for j, v in enumerate(e.text_targets):
                text_pos.append(b * L + start + j)
                text_ids.append(v)
        pv = [e.pixel_values for e in enc if e.pixel_values is not None]
        grid = [e.grid for e in enc if e.grid is not None]
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "mm_token_type_ids": mm,
            "pixel_values": torch.cat(pv) if pv else None,
            "image_grid_thw": torch.cat(grid) if grid else None,
            "action_pos": torch.tensor(action_pos, dtype=torch.long),
            "action_bins": torch.tensor(action_bins, dtype=torch.long),
            "text_pos": torch.tensor(text_pos, dtype=torch.long),
            "text_ids": torch.tensor(text_ids, dtype=torch.long),
        }
