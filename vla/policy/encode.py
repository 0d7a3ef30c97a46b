"""Token sequences and tensors from :class:`~vla.policy.inputs.ModelInput` s (Qwen chat format).

A sample becomes ``<|im_start|>user\\n{images and text}<|im_end|>\\n<|im_start|>assistant\\n``
(each ``<image>`` marker becomes ``<|vision_start|><|image_pad|><|vision_end|>``, which the
processor expands to the image's tokens) followed, in training, by the target: the action tokens
(K x D ids of the action tokenizer, row-major over the chunk) or the answer's text tokens and
``<|im_end|>``. Training batches are right-padded; inference batches left-padded (every prompt then
ends at the last column, where decoding continues).

With the proprio token (``inputs.proprio=token``) an action sample's prompt ends with one
``proprio_id`` whose embedding the model computes from the normalised state (``proprio``: one row per
such sample, in batch order). With parallel decoding (``policy.decoding=parallel``) the prompt is
followed by K x D ``query_id`` tokens -- in training and at inference alike -- and each query's own
hidden state predicts its action token; autoregressively the action tokens themselves follow the
prompt and each is predicted from the position before it.

The loss reads hidden states only where a target token is predicted: ``action_pos`` / ``text_pos``
index the flattened ``(B * L)`` hidden states that predict a target, with the action bin
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
    proprio: Any = None  # (S,) normalised state when the prompt ends with the proprio token
    queries: bool = False  # the target actions are read at K x D query tokens (parallel decoding)


class Encoder:
    """Tokenises model inputs with the backbone's processor and the policy's action tokenizer."""

    def __init__(
        self,
        processor: Any,
        action_tokenizer: Any,
        stats: dict[str, Any],
        default_key: str,
        *,
        proprio_stats: dict[str, Any] | None = None,
        proprio_id: int | None = None,
        query_id: int | None = None,
        n_queries: int = 0,
        image_size: int = 0,
    ) -> None:
        self.processor, self.actions, self.stats, self.default_key = processor, action_tokenizer, stats, default_key
        self.proprio_stats, self.proprio_id = dict(proprio_stats or {}), proprio_id
        self.query_id, self.n_queries = query_id, int(n_queries)
        tok = processor.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.convert_tokens_to_ids("<|endoftext|>")
        self.im_end_id = tok.convert_tokens_to_ids(IM_END)
        from .pixels import fast_processor

        # the processor's exact output without its per-call overhead, when it can be reproduced (vla/policy/pixels.py)
        self.fast = fast_processor(processor, image_size) if image_size else None

    def stats_for(self, key: str):
        key = key or self.default_key
        if key not in self.stats:
            raise ValueError(f"no action statistics for dataset {key!r}; the policy has {sorted(self.stats)}")
        return self.stats[key]

    def proprio_for(self, state: Any, key: str) -> np.ndarray:
        """The state normalised with the dataset's proprio statistics (q01/q99 to [-1, 1], as actions)."""
        key = key or self.default_key
        if key not in self.proprio_stats:
            raise ValueError(
                f"the policy reads the state (inputs.proprio=token) but has no proprio statistics for {key!r}"
                f" (has {sorted(self.proprio_stats)})"
            )
        return self.proprio_stats[key].normalize(np.asarray(state, dtype=np.float64)).astype(np.float32)

    def prompt(self, mi: ModelInput) -> Encoded:
        images = list(mi.images)
        size = self.fast.size if self.fast is not None else -1
        if self.fast is not None and all(i.shape == (size, size, 3) and i.dtype == np.uint8 for i in images):
            out = self.fast(chat_text(mi.text), images)
            ids, mm = out["input_ids"], out["mm_token_type_ids"]
        else:
            out = self.processor(text=[chat_text(mi.text)], images=images or None, return_tensors="pt")
            ids = out["input_ids"][0].tolist()
            mm = out["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in out else [0] * len(ids)
        proprio = None
        if mi.state is not None and self.proprio_id is not None:
            proprio = self.proprio_for(mi.state, mi.dataset)
            ids, mm = ids + [self.proprio_id], mm + [0]
        return Encoded(ids, mm, out.get("pixel_values"), out.get("image_grid_thw"), len(ids), [], [], proprio)

    def action_prompt(self, mi: ModelInput) -> Encoded:
        """An inference prompt for actions: with parallel decoding, followed by the K x D query tokens."""
        e = self.prompt(mi)
        if self.n_queries:
            e.ids = e.ids + [self.query_id] * self.n_queries
            e.mm = e.mm + [0] * self.n_queries
            e.queries = True
        return e

    def with_target(self, mi: ModelInput) -> Encoded:
        e = self.prompt(mi)
        if mi.actions is not None:
            a = np.asarray(mi.actions, dtype=np.float64)
            ids = self.actions.encode(self.stats_for(mi.dataset).normalize(a)).reshape(-1)
            bins = self.actions.bin_index(ids).astype(np.int64).tolist()
            if self.n_queries:
                if len(bins) != self.n_queries:
                    raise ValueError(
                        f"parallel decoding reads {self.n_queries} action tokens, the sample has {len(bins)}"
                    )
                e.ids = e.ids + [self.query_id] * self.n_queries
                e.queries = True
            else:
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
        """Left-padded prompts for actions (decoding continues at the last column; with parallel decoding
        the last K x D columns are the queries)."""
        return self._collate([self.action_prompt(mi) for mi in inputs], left=True)

    def question_batch(self, inputs: list[ModelInput]) -> dict[str, Any]:
        """Left-padded prompts for free-text answers (never followed by action queries)."""
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
            # the hidden state at position p predicts the token at p + 1 (a query predicts its own)
            start = off + e.target_from - 1
            a0 = start + 1 if e.queries else start
            for j, v in enumerate(e.action_bins):
                action_pos.append(b * L + a0 + j)
                action_bins.append(v)
            for j, v in enumerate(e.text_targets):
                text_pos.append(b * L + start + j)
                text_ids.append(v)
        pv = [e.pixel_values for e in enc if e.pixel_values is not None]
        grid = [e.grid for e in enc if e.grid is not None]
        proprio = [e.proprio for e in enc if e.proprio is not None]
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
            "proprio": torch.from_numpy(np.stack(proprio)) if proprio else None,
        }
