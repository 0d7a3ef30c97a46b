"""``VLAPolicy``: a VLM backbone that emits 256-bin action tokens (OpenVLA's scheme) and answers questions.

The 256 action ids (``ActionTokenizer.first_id .. last_id``: the last rows of the embedding matrix,
or 256 added ``<|action_i|>`` tokens) get their own parameters: ``action_in`` (their input
embeddings, swapped in by :class:`~vla.policy.embedding.PolicyEmbedding`) and ``action_out`` (their rows of the output
projection; the same tensor when the backbone ties embeddings). The loss and decoding read the
hidden states only where an action is predicted and project them onto those 256 rows -- a softmax
over the action ids, which is what decoding constrained to them samples from, at a fraction of
the cost of the full-vocabulary projection (the tiny CPU model's 151,936-row embedding is 90 % of
its parameters). Answers to questions use the full vocabulary (the backbone's ``lm_head``).
With ``freeze_embeddings`` the rest of the embedding matrix stays fixed (~10x faster steps on the tiny CPU model).

The proprio token (``inputs.proprio=token``) is the normalised state through ``proprio_proj``
(OpenVLA-OFT's projector), one token at the end of the prompt.

Decoding (:meth:`VLAPolicy.decode_actions`), ``policy.decoding``: ``autoregressive`` is a
hand-rolled greedy loop with the KV cache (one prefill, then one token per step, each the argmax
over the 256 action rows); ``parallel`` (OpenVLA-OFT) feeds K x D query tokens after the prompt,
attending to each other bidirectionally, and takes the argmax at each in one forward pass. Either
way every generated action is valid by construction; :meth:`VLAPolicy.generate_actions` does the
autoregressive decoding through ``generate`` with a logit mask (the reference the loop is tested
and benchmarked against).

Export: :meth:`save_pretrained` writes the action rows back into the backbone's matrices and saves a
plain transformers directory (``config.json``, safetensors, processor, tokenizer) plus
``vla_policy.json`` (placement, chunk, decoding, inputs, model config), OpenVLA's
``dataset_statistics.json`` (with ``proprio`` statistics when the policy reads the state) and
``vla_extra.safetensors`` (the proprio projector and query slots, when the policy has them);
:func:`vla.policy.load_policy` reads it back, on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .backbone import ModelConfig, base_model, text_hidden_size
from .config import EXTRA_FILE, POLICY_FILE, STATS_FILE, PolicyConfig
from .embedding import PolicyEmbedding, ProprioProjector, block_attention_mask, extra_parameters, reserved_ids
from .encode import Encoder
from .inputs import InputTransform, ModelInput


class VLAPolicy(nn.Module):
    def __init__(
        self,
        backbone: nn.Module,
        processor: Any,
        action_tokenizer: Any,
        config: PolicyConfig,
        stats: dict[str, Any],
        model_config: ModelConfig,
        proprio_stats: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.backbone, self.processor, self.actions = backbone, processor, action_tokenizer
        self.config, self.stats, self.model_config = config, dict(stats), model_config
        self.proprio_stats = dict(proprio_stats or {})
        if not self.stats:
            raise ValueError("a policy needs action statistics for at least one dataset key")
        for key, s in self.stats.items():
            if s.dim != config.action_dim:
                raise ValueError(
                    f"statistics {key!r} are for {s.dim}-dim actions but the policy has action_dim={config.action_dim}"
                )
        self.dataset_key = config.dataset_key or next(iter(self.stats))
        core = base_model(backbone)
        emb = core.get_input_embeddings()
        if isinstance(emb, PolicyEmbedding):
            emb = emb.base
        rows = slice(action_tokenizer.first_id, action_tokenizer.first_id + action_tokenizer.n_bins)
        if emb.weight.shape[0] < rows.stop:
            raise ValueError(f"the embedding has {emb.weight.shape[0]} rows but the action ids reach {rows.stop - 1}")
        self.action_in = nn.Parameter(emb.weight[rows].detach().clone().float())
        head = core.get_output_embeddings()
        self.tied = head is None or head.weight is emb.weight
        self.action_out = self.action_in if self.tied else nn.Parameter(head.weight[rows].detach().clone().float())
        self.proprio_id, self.query_id = reserved_ids(
            len(processor.tokenizer), emb.weight.shape[0], action_tokenizer.first_id, action_tokenizer.n_bins
        )
        hidden = text_hidden_size(backbone)
        self.proprio_proj = None
        if config.inputs.proprio == "token":
            dims = {s.dim for s in self.proprio_stats.values()}
            if len(dims) != 1:
                raise ValueError(
                    "inputs.proprio=token needs proprio statistics of one state dimension for every dataset key, "
                    f"got {({k: s.dim for k, s in self.proprio_stats.items()}) or 'none'}"
                )
            self.proprio_proj = ProprioProjector(dims.pop(), hidden)
        self.query_slots = None
        if config.decoding == "parallel":
            self.query_slots = nn.Parameter(torch.randn(self.tokens_per_prediction, hidden) * 0.02)
        core.set_input_embeddings(
            PolicyEmbedding(
                emb,
                self.action_in,
                action_tokenizer.first_id,
                self.proprio_id if self.proprio_proj is not None else None,
                self.query_id,
                self.query_slots,
            )
        )
        if config.freeze_embeddings:
            emb.weight.requires_grad_(False)
            if head is not None:
                head.weight.requires_grad_(False)
        self.transform = InputTransform(config.inputs)
        self.return_predictions = False  # loss() also returns the argmax action bins (validation)
        self.encoder = Encoder(
            processor,
            action_tokenizer,
            self.stats,
            self.dataset_key,
            proprio_stats=self.proprio_stats,
            proprio_id=self.proprio_id if self.proprio_proj is not None else None,
            query_id=self.query_id,
            n_queries=self.tokens_per_prediction if config.decoding == "parallel" else 0,
            image_size=int(config.inputs.image_size),
        )

    # ------------------------------------------------------------------ pieces
    @property
    def core(self) -> nn.Module:
        """The backbone's multimodal model (hidden states, no vocabulary projection)."""
        return base_model(self.backbone).model

    @property
    def device(self) -> torch.device:
        return self.action_in.device

    @property
    def tokens_per_prediction(self) -> int:
        return int(self.config.chunk) * int(self.config.action_dim)

    def _to(self, batch: dict[str, Any]) -> dict[str, Any]:
        dev = self.device
        return {k: (v.to(dev) if torch.is_tensor(v) else v) for k, v in batch.items()}

    @property
    def embedding(self) -> PolicyEmbedding:
        return self.core.get_input_embeddings()

    def _proprio_embeds(self, batch: dict[str, Any]) -> torch.Tensor | None:
        state = batch.get("proprio")
        if self.proprio_proj is None or state is None:
            return None
        return self.proprio_proj(state.to(self.device).float())

    def _hidden(self, batch: dict[str, Any], **kw) -> Any:
        """The backbone's last hidden states (and cache) for a batch: images, the proprio token's projected
        state, and -- when the batch holds parallel-decoding queries -- the block attention mask with
        explicit mRoPE positions (a 4-D mask cannot give the model the 2-D padding it derives them from)."""
        pv = batch.get("pixel_values")
        if pv is not None:
            pv = pv.to(next(self.backbone.parameters()).dtype)
        mask = batch["attention_mask"]
        if self.query_slots is not None and bool((batch["input_ids"] == self.query_id).any()):
            if "position_ids" not in kw:
                kw["position_ids"] = self._prefill_positions(batch)[0]
            mask = block_attention_mask(batch["input_ids"], mask, self.query_id)
        with self.embedding.proprio(self._proprio_embeds(batch)):
            return self.core(
                input_ids=batch["input_ids"],
                attention_mask=mask,
                pixel_values=pv,
                image_grid_thw=batch.get("image_grid_thw"),
                mm_token_type_ids=batch.get("mm_token_type_ids"),
                **kw,
            )

    def action_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden.float() @ self.action_out.t()

    # ------------------------------------------------------------------ training
    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The training forward (what DDP and FSDP wrap): :meth:`loss`."""
        return self.loss(batch)

    def loss(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Summed cross-entropies and counts (the caller normalises over the global batch):
        ``action_loss`` over the 256 action rows, ``text_loss`` over the vocabulary, correct counts."""
        batch = self._to(batch)
        h = self._hidden(batch, use_cache=False).last_hidden_state.flatten(0, 1)
        out: dict[str, torch.Tensor] = {}
        zero = h.new_zeros((), dtype=torch.float32)
        if len(batch["action_pos"]):
            logits = self.action_logits(h[batch["action_pos"]])
            out["action_loss"] = nn.functional.cross_entropy(logits, batch["action_bins"], reduction="sum")
            out["action_correct"] = (logits.argmax(-1) == batch["action_bins"]).sum()
            out["action_tokens"] = torch.tensor(len(batch["action_pos"]), device=h.device)
            if self.return_predictions:
                out["action_pred"] = logits.argmax(-1)
        else:
            out["action_loss"] = zero + 0.0 * self.action_out.sum()
            out["action_correct"] = out["action_tokens"] = torch.zeros((), dtype=torch.long, device=h.device)
        if len(batch["text_pos"]):
            head = base_model(self.backbone).get_output_embeddings()
            logits = h[batch["text_pos"]].float() @ head.weight.float().t()
            out["text_loss"] = nn.functional.cross_entropy(logits, batch["text_ids"], reduction="sum")
            out["text_correct"] = (logits.argmax(-1) == batch["text_ids"]).sum()
            out["text_tokens"] = torch.tensor(len(batch["text_pos"]), device=h.device)
        else:
            out["text_loss"] = zero
            out["text_correct"] = out["text_tokens"] = torch.zeros((), dtype=torch.long, device=h.device)
        return out

    # ------------------------------------------------------------------ decoding
    def _prefill_positions(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """mRoPE position ids of the prompt (3, B, L) and, per sample, the next text position."""
        core = self.core
        pos, _ = core.get_rope_index(
            batch["input_ids"],
            image_grid_thw=batch.get("image_grid_thw"),
            attention_mask=batch["attention_mask"],
            mm_token_type_ids=batch.get("mm_token_type_ids"),
        )
        masked = pos.masked_fill(batch["attention_mask"][None] == 0, -1)
        return pos, masked.amax(dim=(0, 2)) + 1

    @torch.no_grad()
    def decode_actions(self, batch: dict[str, Any]) -> np.ndarray:
        """Greedy constrained decoding: bins (B, K * D), every one a valid action bin. Autoregressive: one
        token per step with the KV cache; parallel: one forward pass, the argmax at every query token."""
        batch = self._to(batch)
        if self.config.decoding == "parallel":
            h = self._hidden(batch, use_cache=False).last_hidden_state[:, -self.tokens_per_prediction :]
            return self.action_logits(h).argmax(-1).cpu().numpy()
        pos, nxt = self._prefill_positions(batch)
        out = self._hidden(batch, position_ids=pos, use_cache=True)
        cache = out.cache
        mask = batch["attention_mask"]
        h = out.last_hidden_state[:, -1]
        bins = []
        B = mask.shape[0]
        for t in range(self.tokens_per_prediction):
            b = self.action_logits(h).argmax(-1)
            bins.append(b)
            if t == self.tokens_per_prediction - 1:
                break
            ids = (b + self.actions.first_id)[:, None]
            mask = torch.cat([mask, mask.new_ones((B, 1))], dim=1)
            p = (nxt + t).view(1, B, 1).expand(3, B, 1)
            o = self.core.language_model(
                input_ids=None,
                inputs_embeds=self.core.get_input_embeddings()(ids),
                attention_mask=mask,
                position_ids=p,
                cache=cache,
                use_cache=True,
            )
            cache, h = o.cache, o.last_hidden_state[:, -1]
        return torch.stack(bins, dim=1).cpu().numpy()

    @torch.no_grad()
    def generate_actions(self, batch: dict[str, Any]) -> np.ndarray:
        """The same decoding through ``generate`` with every non-action id masked (the reference)."""
        from transformers import LogitsProcessor

        if self.config.decoding == "parallel":
            raise ValueError("generate() decodes autoregressively; a parallel-decoding policy decodes with the loop")
        first, n = self.actions.first_id, self.actions.n_bins

        class OnlyActions(LogitsProcessor):
            def __call__(self, input_ids, scores):
                out = torch.full_like(scores, float("-inf"))
                out[:, first : first + n] = scores[:, first : first + n]
                return out

        batch = self._to(batch)
        restore = self._export_rows()  # generate() projects with the backbone's own matrices
        try:
            pv = batch.get("pixel_values")
            with self.embedding.proprio(self._proprio_embeds(batch)):
                gen = self._generate_masked(batch, pv, OnlyActions())
        finally:
            restore()
        ids = gen[:, batch["input_ids"].shape[1] :].cpu().numpy()
        return self.actions.bin_index(ids)

    def _generate_masked(self, batch, pv, only):
        from transformers import LogitsProcessorList

        return self.backbone.generate(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            pixel_values=None if pv is None else pv.to(next(self.backbone.parameters()).dtype),
            image_grid_thw=batch.get("image_grid_thw"),
            mm_token_type_ids=batch.get("mm_token_type_ids"),
            max_new_tokens=self.tokens_per_prediction,
            min_new_tokens=self.tokens_per_prediction,
            do_sample=False,
            logits_processor=LogitsProcessorList([only]),
            pad_token_id=self.encoder.pad_id,
        )

    def _export_rows(self):
        """Write the action rows into the backbone's embedding/lm_head; returns a function that undoes it."""
        core = base_model(self.backbone)
        emb = core.get_input_embeddings()
        emb = emb.base if isinstance(emb, PolicyEmbedding) else emb
        head = core.get_output_embeddings()
        rows = slice(self.actions.first_id, self.actions.first_id + self.actions.n_bins)
        saved = [emb.weight.data[rows].clone(), None if head is None or self.tied else head.weight.data[rows].clone()]
        emb.weight.data[rows] = self.action_in.data.to(emb.weight.dtype)
        if head is not None and not self.tied:
            head.weight.data[rows] = self.action_out.data.to(head.weight.dtype)

        def restore() -> None:
            emb.weight.data[rows] = saved[0]
            if saved[1] is not None:
                head.weight.data[rows] = saved[1]

        return restore

    # ------------------------------------------------------------------ inference
    def inputs_of(self, observations: list[dict[str, Any]]) -> list[ModelInput]:
        return [self.transform.observation(o) for o in observations]

    @torch.no_grad()
    def infer_batch(self, observations: list[dict[str, Any]], use_generate: bool = False) -> np.ndarray:
        """Actions (B, K, D), un-normalised with the policy's statistics, for observation dicts."""
        if not observations:
            return np.zeros((0, self.config.chunk, self.config.action_dim))
        batch = self.encoder.infer_batch(self.inputs_of(observations))
        bins = self.generate_actions(batch) if use_generate else self.decode_actions(batch)
        x_n = self.actions.decode(self.actions.ids_from_bins(bins))
        actions = self.stats[self.dataset_key].unnormalize(
            x_n.reshape(len(observations), self.config.chunk, self.config.action_dim)
        )
        return np.asarray(actions, dtype=np.float64)

    @torch.no_grad()
    def answer_batch(self, inputs: list[ModelInput], max_new_tokens: int = 24) -> list[str]:
        """Free-text answers (greedy, full vocabulary) to visual questions."""
        tok = self.processor.tokenizer
        out = []
        restore = self._export_rows()
        try:
            for mi in inputs:  # one at a time: answers have different lengths and no padding to care about
                batch = self._to(self.encoder.question_batch([mi]))
                pv = batch.get("pixel_values")
                gen = self.backbone.generate(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    pixel_values=None if pv is None else pv.to(next(self.backbone.parameters()).dtype),
                    image_grid_thw=batch.get("image_grid_thw"),
                    mm_token_type_ids=batch.get("mm_token_type_ids"),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    eos_token_id=self.encoder.im_end_id,
                    pad_token_id=self.encoder.pad_id,
                )
                out.append(tok.decode(gen[0, batch["input_ids"].shape[1] :], skip_special_tokens=True).strip())
        finally:
            restore()
        return out

    def metadata(self) -> dict[str, Any]:
        """What a server sends on connect: model, action statistics, chunking, inputs."""
        return {
            "model": self.model_config.name_or_path or f"{self.model_config.arch} (built from config)",
            "policy": self.config.to_dict(),
            "action_tokenizer": self.actions.to_dict(),
            "statistics": {k: v.to_dict() for k, v in self.stats.items()},
            "dataset_key": self.dataset_key,
        }

    # ------------------------------------------------------------------ export
    def save_pretrained(self, path: str | Path) -> Path:
        """A plain transformers directory plus ``vla_policy.json`` and ``dataset_statistics.json``."""
        from vla.actions import write_statistics

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        restore = self._export_rows()
        try:
            model = self.backbone
            if hasattr(model, "merge_and_unload"):  # LoRA: export merged weights, a plain model
                import copy

                model = copy.deepcopy(model).merge_and_unload()
            core = base_model(model)
            emb = core.get_input_embeddings()
            if isinstance(emb, PolicyEmbedding):  # save the plain embedding module, not our wrapper
                core.set_input_embeddings(emb.base)
            try:
                model.save_pretrained(path)
            finally:
                if isinstance(emb, PolicyEmbedding):
                    core.set_input_embeddings(emb)
        finally:
            restore()
        self.processor.save_pretrained(path)
        mc = {**self.model_config.to_dict(), "name_or_path": None, "lora": None}
        meta = {
            "format": "vla_policy/1",
            "policy": self.config.to_dict(),
            "action_tokenizer": self.actions.to_dict(),
            "model": mc,
        }
        (path / POLICY_FILE).write_text(json.dumps(meta, indent=2))
        write_statistics(path / STATS_FILE, self.stats, proprio=self.proprio_for_stats_file())
        extra = extra_parameters(self)
        if extra:
            from safetensors.torch import save_file

            save_file({k: v.detach().cpu().contiguous() for k, v in extra.items()}, str(path / EXTRA_FILE))
        return path

    def proprio_for_stats_file(self) -> dict[str, Any]:
        return {k: v for k, v in self.proprio_stats.items() if k in self.stats}
