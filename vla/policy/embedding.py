"""The policy's own token embeddings: action rows, the proprioception token, the action queries.

Three kinds of ids get embeddings that are not plain rows of the backbone's matrix:

* the ``n_bins`` **action ids** -- their rows are ``action_rows`` (trainable, the same tensor as the
  action head when the backbone ties its embeddings);
* ``proprio_id`` -- one token per action sample (``inputs.proprio=token``) whose embedding is the
  learned projection of the normalised state vector (OpenVLA-OFT's proprio projector: a two-layer
  MLP into the token stream, not digits in the prompt), handed in per forward pass;
* ``query_id`` -- the K x D placeholder tokens of parallel decoding (``policy.decoding=parallel``,
  OpenVLA-OFT): the i-th query token of a sequence gets the learned slot embedding ``query_slots[i]``,
  so the block of queries says "action token i of the chunk" and nothing else.

Both reserved ids are rows of the embedding matrix that neither the tokenizer nor the action ids
use (:func:`reserved_ids`): nothing is resized, no real token changes meaning, and their rows in
the backbone's matrix are never read.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch import nn


def reserved_ids(tokenizer_len: int, embedding_rows: int, first_action_id: int, n_bins: int) -> tuple[int, int]:
    """``(proprio_id, query_id)``: the two highest embedding rows past the tokenizer that are not action ids.

    Qwen's matrices have ~270 rows past the tokenizer's last id; with ``last_ids`` the action ids take
    the top 256 and these are the two rows below them, with ``added_tokens`` the top two rows."""
    actions = range(int(first_action_id), int(first_action_id) + int(n_bins))
    free = [r for r in range(int(embedding_rows) - 1, int(tokenizer_len) - 1, -1) if r not in actions]
    if len(free) < 2:
        raise ValueError(
            f"the embedding has {embedding_rows} rows, the tokenizer {tokenizer_len} ids and the action ids take "
            f"{first_action_id}..{first_action_id + n_bins - 1}: no two spare rows for the proprio and query tokens"
        )
    return free[0], free[1]


class ProprioProjector(nn.Module):
    """The normalised state vector (B, S) -> one token embedding (B, H): Linear, GELU, Linear (OpenVLA-OFT)."""

    def __init__(self, state_dim: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(int(state_dim), int(hidden)), nn.GELU(), nn.Linear(int(hidden), int(hidden)))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state)


class PolicyEmbedding(nn.Module):
    """The backbone's input embedding with the policy's rows swapped in (see the module doc)."""

    def __init__(
        self,
        base: nn.Embedding,
        action_rows: nn.Parameter,
        first_id: int,
        proprio_id: int | None = None,
        query_id: int | None = None,
        query_slots: nn.Parameter | None = None,
    ) -> None:
        super().__init__()
        self.base, self.action_rows, self.first_id = base, action_rows, int(first_id)
        self.proprio_id, self.query_id, self.query_slots = proprio_id, query_id, query_slots
        self.weight = base.weight  # what transformers' utilities look for on an input embedding
        self._proprio: torch.Tensor | None = None  # (N, H): the proprio tokens of the current forward, in order

    @contextlib.contextmanager
    def proprio(self, embeds: torch.Tensor | None) -> Iterator[None]:
        """Within the block, the proprio tokens (in row-major order of the ids) take ``embeds``' rows."""
        self._proprio = embeds
        try:
            yield
        finally:
            self._proprio = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        e = self.base(ids)
        n = self.action_rows.shape[0]
        is_action = (ids >= self.first_id) & (ids < self.first_id + n)
        if bool(is_action.any()):
            rows = self.action_rows[(ids - self.first_id).clamp(0, n - 1)].to(e.dtype)
            e = torch.where(is_action[..., None], rows, e)
        if self.query_slots is not None:
            is_query = ids == self.query_id
            if bool(is_query.any()):
                slot = (is_query.long().cumsum(-1) - 1).clamp(0, self.query_slots.shape[0] - 1)
                e = torch.where(is_query[..., None], self.query_slots[slot].to(e.dtype), e)
        if self.proprio_id is not None:
            is_proprio = ids == self.proprio_id
            count = int(is_proprio.sum())
            if count:
                if self._proprio is None or self._proprio.shape[0] != count:
                    have = None if self._proprio is None else self._proprio.shape[0]
                    raise ValueError(f"{count} proprio token(s) in the ids but {have} projected state(s) given")
                e = e.masked_scatter(is_proprio[..., None], self._proprio.to(e.dtype))
        return e


def block_attention_mask(ids: torch.Tensor, attention_mask: torch.Tensor, query_id: int) -> torch.Tensor:
    """(B, 1, L, L) boolean mask (True = attend): causal over the sequence, padding keys masked, and
    bidirectional among the query tokens (parallel decoding's action block). Every row may attend to
    itself, so no row is empty (a fully masked row would turn into NaN and spread through padding)."""
    B, L = ids.shape
    causal = torch.ones((L, L), dtype=torch.bool, device=ids.device).tril()
    q = ids == query_id
    mask = (causal[None] | (q[:, :, None] & q[:, None, :])) & attention_mask.bool()[:, None, :]
    mask |= torch.eye(L, dtype=torch.bool, device=ids.device)[None]
    return mask[:, None]


def extra_parameters(policy: Any) -> dict[str, torch.Tensor]:
    """The policy's parameters that an exported backbone directory does not hold (saved beside it)."""
    return {k: v for k, v in policy.state_dict().items() if k.startswith(("proprio_proj.", "query_slots"))}
