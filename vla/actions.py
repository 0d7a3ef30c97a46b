"""Action statistics and 256-bin action tokens, compatible with OpenVLA (docs/ARCHITECTURE.md §7).

Normalisation (per dimension, with one dataset key's statistics), OpenVLA's formulas as published::

    x_n = clip(2 (x - q01) / (q99 - q01 + 1e-8) - 1, -1, 1)   training (``normalize_action_and_proprio``,
                                                              BOUNDS_Q99); then 0 wherever min == max
    x   = 0.5 (x_n + 1) (q99 - q01) + q01                     inference (``OpenVLA.predict_action``)

Dimensions whose ``mask`` entry is False (LIBERO's gripper) pass through both, except that training
zeroes every dimension with min == max, masked off or not. ``normalization="bounds"`` (OpenVLA's BOUNDS)
puts min / max where the formulas say q01 / q99: every recorded action is then representable, where
BOUNDS_Q99 clips the rarest 1 % at each end (docs/POLICY.md "Action normalisation"); a file written with it
says so (``"normalization": "bounds"``), a file without the key is BOUNDS_Q99 as OpenVLA's are.

Tokens: ``bins = np.linspace(-1, 1, n_bins)`` (edges), ``token = vocab_size - digitize(clip(x_n, -1, 1), bins)``
with numpy's ``digitize`` (``bins[i-1] <= x < bins[i]`` gives ``i``; ``x = 1`` gives ``n_bins``), so the ids are
``vocab_size - n_bins .. vocab_size - 1``. Decoding uses the ``n_bins - 1`` bin centres,
``centres[clip(vocab_size - token - 1, 0, n_bins - 2)]``. Both are bit-identical to OpenVLA's ``ActionTokenizer``
on every input it accepts (NaN is refused here). The bin index ``token - first_id`` runs the other way from x_n:
bin 0 is x_n = 1, bin ``n_bins - 1`` is x_n = -1.

Two placements of the ids (``ActionTokenizer.placement``):

- ``"last_ids"``: ``vocab_size`` = the embedding's row count, the ids are its last ``n_bins`` rows (OpenVLA). Qwen's
  embeddings have ~270 rows past the tokenizer's last id, so no real token is overwritten.
- ``"added_tokens"``: ``<|action_0|> .. <|action_{n_bins-1}|>`` are appended to the tokenizer and ``vocab_size`` =
  the id after ``<|action_{n_bins-1}|>`` (= ``len(tokenizer)`` right after adding them); ``<|action_b|>`` is bin b.

The mapping is saved with a checkpoint (``to_dict``) and decoding uses the saved one; ``verify_tokenizer`` refuses
a tokenizer/embedding it does not fit (e.g. a decoder built from ``len(tokenizer)`` for a ``last_ids`` model).

Where OpenVLA's training and inference differ (and so do these two functions, on purpose, so that a
checkpoint behaves as OpenVLA's would; docs/POLICY.md "Action normalisation"): inference has no ``1e-8``,
so a round trip shrinks a value by the factor ``(q99 - q01) / (q99 - q01 + 1e-8)``; a dimension with
``min == max`` trains on 0 and comes back as the constant when it is normalised (the span is 0) but as
the decoded bin centre (~0) when it is masked off; a dimension with ``q01 == q99 < max`` trains on -1 at
``q01`` and +-1 elsewhere (the ``1e-8`` span) and always comes back as ``q01``. One difference remains:
OpenVLA evaluates the training formula in float32 (TensorFlow), here it is float64, so a value within
a float32 rounding of a bin edge may land in the neighbouring bin. Statistics and
``dataset_statistics.json`` are OpenVLA's layout exactly.

numpy only: importing this module does not import torch or transformers (tokenizers are duck-typed).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from vla_common.atomic import write_json_atomic

STAT_FIELDS = ("mean", "std", "max", "min", "q01", "q99")  # OpenVLA's order in dataset_statistics.json
NORMALIZATIONS = ("bounds_q99", "bounds")  # OpenVLA's NormalizationType names: [q01, q99] or [min, max] -> [-1, 1]
PLACEMENTS = ("last_ids", "added_tokens")
QUANTILE_METHOD = "linear"  # numpy's default, which OpenVLA's get_dataset_statistics uses


def action_token_names(n_bins: int = 256) -> list[str]:
    """The added tokens of the ``"added_tokens"`` placement: ``<|action_0|>`` .. ``<|action_{n_bins-1}|>``."""
    return [f"<|action_{i}|>" for i in range(n_bins)]


def _vector(name: str, value: Any, *, dtype: type = np.float64) -> np.ndarray:
    """A read-only 1-D copy of ``value``; ValueError naming ``name`` unless it is a non-empty list of numbers."""
    if isinstance(value, (str, bytes, Mapping)) or np.ndim(value) != 1:
        raise ValueError(f"{name} must be a 1-D list of numbers, got {type(value).__name__} {value!r:.80}")
    items = list(value)
    if not items:
        raise ValueError(f"{name} is empty")
    if dtype is bool:
        if not all(isinstance(v, (bool, np.bool_)) for v in items):
            raise ValueError(f"{name} must be a list of booleans, got {items!r:.80}")
    elif not all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in items
    ):
        raise ValueError(f"{name} must be a list of numbers, got {items!r:.80}")
    arr = np.array(items, dtype=dtype)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class ActionStats:
    """One dataset key's action (or proprio) statistics in OpenVLA's layout; every array has shape (D,).

    ``mask`` (bool): True = normalised, False = passed through unchanged (e.g. LIBERO's gripper).
    ``normalization``: the range mapped to [-1, 1], ``"bounds_q99"`` ([q01, q99], OpenVLA's default) or
    ``"bounds"`` ([min, max])."""

    q01: np.ndarray
    q99: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    mask: np.ndarray
    normalization: str = "bounds_q99"

    def __post_init__(self) -> None:
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")
        for name in (*STAT_FIELDS, "mask"):
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                value = value.tolist()
            object.__setattr__(self, name, _vector(name, value, dtype=bool if name == "mask" else np.float64))
        dims = {name: len(getattr(self, name)) for name in (*STAT_FIELDS, "mask")}
        if len(set(dims.values())) != 1:
            raise ValueError(f"action statistics disagree on the dimension: {dims}")
        for name in STAT_FIELDS:
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"{name} has non-finite entries: {getattr(self, name).tolist()}")
        if np.any(self.q01 > self.q99):
            raise ValueError(f"q01 > q99 in dimensions {np.flatnonzero(self.q01 > self.q99).tolist()}")
        if np.any(self.min > self.max):
            raise ValueError(f"min > max in dimensions {np.flatnonzero(self.min > self.max).tolist()}")

    @classmethod
    def from_actions(
        cls, actions: np.ndarray, mask: Sequence[bool] | None = None, normalization: str = "bounds_q99"
    ) -> ActionStats:
        """Statistics of ``actions`` (N, D), as OpenVLA's ``get_dataset_statistics``: per-dimension mean, std
        (population, ddof 0), min, max and the 0.01 / 0.99 quantiles with numpy's ``"linear"`` method; computed in
        the array's own dtype (OpenVLA's actions are float32) and stored as float64. ``mask`` defaults to all True.
        """
        a = np.asarray(actions)
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
            raise ValueError(f"actions must have shape (N, D) with N, D >= 1, got {a.shape}")
        if a.dtype.kind not in "fiu":
            raise ValueError(f"actions must be numeric, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            rows = np.flatnonzero(~np.all(np.isfinite(a), axis=1))
            raise ValueError(f"actions have non-finite values in {len(rows)} rows (first: row {rows[0]})")
        d = a.shape[1]
        if mask is None:
            mask = [True] * d
        mask = list(np.asarray(mask).tolist()) if isinstance(mask, np.ndarray) else list(mask)
        if len(mask) != d:
            raise ValueError(f"mask has {len(mask)} entries but the actions have {d} dimensions")
        return cls(
            q01=np.quantile(a, 0.01, axis=0, method=QUANTILE_METHOD),
            q99=np.quantile(a, 0.99, axis=0, method=QUANTILE_METHOD),
            mean=a.mean(axis=0),
            std=a.std(axis=0),
            min=a.min(axis=0),
            max=a.max(axis=0),
            mask=mask,
            normalization=normalization,
        )

    @property
    def dim(self) -> int:
        return int(self.q01.shape[0])

    @property
    def low(self) -> np.ndarray:
        """What maps to -1: q01 (``bounds_q99``) or min (``bounds``)."""
        return self.min if self.normalization == "bounds" else self.q01

    @property
    def high(self) -> np.ndarray:
        """What maps to +1: q99 (``bounds_q99``) or max (``bounds``)."""
        return self.max if self.normalization == "bounds" else self.q99

    def _check(self, x: Any, what: str, finite: bool = False) -> np.ndarray:
        arr = np.asarray(x)
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if arr.ndim < 1 or arr.shape[-1] != self.dim:
            raise ValueError(f"{what} must have shape (..., {self.dim}), got {arr.shape}")
        if np.isnan(arr).any() or (finite and not np.isfinite(arr).all()):
            raise ValueError(f"{what} contain NaN" if np.isnan(arr).any() else f"{what} contain infinities")
        return arr

    def normalize(self, x: np.ndarray) -> np.ndarray:
        """OpenVLA's training normalisation: ``clip(2 (x - q01) / (q99 - q01 + 1e-8) - 1, -1, 1)`` on masked
        dimensions (min / max for ``bounds``), the others unchanged, then 0 on every dimension with min == max.
        ``x``: (..., D); float64."""
        x = self._check(x, "actions")
        lo, hi = self.low, self.high
        with np.errstate(over="ignore"):  # a huge x clips to +-1 either way
            y = np.clip(2.0 * (x - lo) / (hi - lo + 1e-8) - 1.0, -1.0, 1.0)
        return np.where(self.min == self.max, 0.0, np.where(self.mask, y, x))

    def unnormalize(self, x_n: np.ndarray) -> np.ndarray:
        """``0.5 (x_n + 1)(q99 - q01) + q01`` on masked dimensions (min / max for ``bounds``), the others
        unchanged (OpenVLA's ``predict_action``). ``x_n``: (..., D); returns float64."""
        x_n = self._check(x_n, "normalised actions", finite=True)
        lo, hi = self.low, self.high
        return np.where(self.mask, 0.5 * (x_n + 1.0) * (hi - lo) + lo, x_n)

    def with_bounds(self, low: Sequence[float], high: Sequence[float]) -> ActionStats:
        """These statistics under ``bounds`` with min / max replaced by fixed bounds on the normalised dimensions
        (``data.action_normalization=spec``: the env's action bounds, so the bins are known before any data,
        as RT-2's uniform bins over a fixed range are). The data must lie within them."""
        low, high = _vector("low", list(low)), _vector("high", list(high))
        if low.shape != (self.dim,) or high.shape != (self.dim,):
            raise ValueError(f"bounds must have {self.dim} entries, got {low.tolist()} / {high.tolist()}")
        outside = self.mask & ((self.min < low) | (self.max > high))
        if outside.any():
            raise ValueError(f"actions outside the bounds in dimensions {np.flatnonzero(outside).tolist()}")
        fields = {n: getattr(self, n) for n in STAT_FIELDS}
        fields["min"], fields["max"] = np.where(self.mask, low, self.min), np.where(self.mask, high, self.max)
        return ActionStats(**fields, mask=self.mask, normalization="bounds")

    def to_dict(self) -> dict[str, list]:
        """``{"mean": [...], "std", "max", "min", "q01", "q99", "mask": [bools]}`` as in dataset_statistics.json."""
        out: dict[str, list] = {name: [float(v) for v in getattr(self, name)] for name in STAT_FIELDS}
        out["mask"] = [bool(v) for v in self.mask]
        if self.normalization != "bounds_q99":  # OpenVLA's files have no such key: they are all BOUNDS_Q99
            out["normalization"] = self.normalization
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ActionStats:
        """Inverse of :meth:`to_dict`; ``mask`` may be absent (all True, as OpenVLA reads it), ``normalization`` too
        (BOUNDS_Q99); other keys ignored."""
        if not isinstance(d, Mapping):
            raise ValueError(f"action statistics must be a JSON object, got {type(d).__name__}")
        missing = [name for name in STAT_FIELDS if name not in d]
        if missing:
            raise ValueError(f"action statistics lack {missing} (have {sorted(d)})")
        values = {name: d[name] for name in STAT_FIELDS}
        if "mask" in d:
            values["mask"] = d["mask"]
        else:
            if isinstance(d["q01"], (str, bytes, Mapping)) or np.ndim(d["q01"]) != 1:
                raise ValueError(f"q01 must be a 1-D list of numbers, got {d['q01']!r:.80}")
            values["mask"] = [True] * len(d["q01"])
        if "normalization" in d:
            values["normalization"] = d["normalization"]
        return cls(**values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActionStats):
            return NotImplemented
        same = all(np.array_equal(getattr(self, n), getattr(other, n)) for n in (*STAT_FIELDS, "mask"))
        return same and self.normalization == other.normalization

    __hash__ = None  # type: ignore[assignment]


def decoded(actions: np.ndarray, stats: ActionStats, n_bins: int = 256) -> np.ndarray:
    """What a token policy with these statistics decodes for ``actions`` (..., D) as its labels: normalise,
    the bin, its centre, un-normalise, the very path of training's targets and acting's output."""
    tokens = ActionTokenizer(vocab_size=n_bins, n_bins=n_bins)
    return stats.unnormalize(tokens.decode(tokens.encode(stats.normalize(actions))))


def _count(name: str, key: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name}[{key!r}] must be a non-negative integer, got {value!r}")
    return int(value)


def write_statistics(
    path: str | os.PathLike,
    stats: Mapping[str, ActionStats],
    num_transitions: Mapping[str, int] | None = None,
    num_trajectories: Mapping[str, int] | None = None,
    proprio: Mapping[str, ActionStats] | None = None,
) -> None:
    """Write OpenVLA's ``dataset_statistics.json``: ``{key: {"action": {...}, "proprio": {...} (if given),
    "num_transitions": n, "num_trajectories": m (if given)}}``, atomically (temporary file + rename)."""
    if not stats:
        raise ValueError("write_statistics needs at least one dataset key")
    extras = {
        "num_transitions": num_transitions or {},
        "num_trajectories": num_trajectories or {},
        "proprio": proprio or {},
    }
    for name, table in extras.items():
        unknown = sorted(set(table) - set(stats))
        if unknown:
            raise ValueError(f"{name} has keys {unknown} without action statistics (keys: {sorted(stats)})")
    payload: dict[str, dict] = {}
    for key, s in stats.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"dataset keys must be non-empty strings, got {key!r}")
        if not isinstance(s, ActionStats):
            raise ValueError(f"stats[{key!r}] must be an ActionStats, got {type(s).__name__}")
        entry: dict[str, Any] = {"action": s.to_dict()}
        if key in extras["proprio"]:
            p = extras["proprio"][key]
            if not isinstance(p, ActionStats):
                raise ValueError(f"proprio[{key!r}] must be an ActionStats, got {type(p).__name__}")
            entry["proprio"] = p.to_dict()
        for name in ("num_transitions", "num_trajectories"):
            if key in extras[name]:
                entry[name] = _count(name, key, extras[name][key])
        payload[key] = entry
    write_json_atomic(path, payload, allow_nan=False)


def statistics_from_dict(d: Any, source: str = "statistics", field: str = "action") -> dict[str, ActionStats]:
    """``{key: ActionStats}`` from the parsed content of a dataset_statistics.json (or of an OpenVLA
    checkpoint's ``norm_stats``); ValueError naming ``source``, the key and the field on bad content. Every key
    must have "action" statistics; for another ``field`` ("proprio") keys without it are left out."""
    if not isinstance(d, Mapping) or not d:
        raise ValueError(f"{source}: expected a non-empty JSON object {{dataset key: {{'{field}': ...}}}}")
    out: dict[str, ActionStats] = {}
    for key, entry in d.items():
        if field != "action" and isinstance(entry, Mapping) and field not in entry:
            continue  # proprio statistics are optional per key
        if not isinstance(entry, Mapping) or field not in entry:
            have = sorted(entry) if isinstance(entry, Mapping) else type(entry).__name__
            raise ValueError(f"{source}: key {key!r} has no {field!r} statistics (has {have})")
        try:
            out[key] = ActionStats.from_dict(entry[field])
        except ValueError as e:
            raise ValueError(f"{source}: key {key!r}: {field}: {e}") from None
    return out


def read_statistics(path: str | os.PathLike, field: str = "action") -> dict[str, ActionStats]:
    """Read a dataset_statistics.json (ours or OpenVLA's): ``{key: ActionStats}`` of ``field`` ("action" or
    "proprio"). ValueError naming the file and the key on bad content; FileNotFoundError if it is missing."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such statistics file") from None
    try:
        content = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    return statistics_from_dict(content, source=str(path), field=field)


class TokenizerLike(Protocol):
    """What ``ActionTokenizer`` needs of a HuggingFace tokenizer."""

    def __len__(self) -> int: ...

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int | None]: ...

    def add_tokens(self, new_tokens: list[str], special_tokens: bool = False) -> int: ...


def _token_ids(tokenizer: TokenizerLike, names: list[str]) -> list[int | None]:
    """The tokenizer's id of each name, None where it does not know the token (no id, or the unknown token's)."""
    ids = tokenizer.convert_tokens_to_ids(names)
    unk = getattr(tokenizer, "unk_token_id", None)
    return [None if i is None or (unk is not None and i == unk) else int(i) for i in ids]


def _int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _integer_ids(ids: Any) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


@dataclass(frozen=True)
class ActionTokenizer:
    """The id mapping ``token = vocab_size - digitize(x_n, bins)`` (module docstring; docs/ARCHITECTURE.md §7)."""

    vocab_size: int
    n_bins: int = 256
    placement: str = "last_ids"

    def __post_init__(self) -> None:
        object.__setattr__(self, "vocab_size", _int("vocab_size", self.vocab_size))
        object.__setattr__(self, "n_bins", _int("n_bins", self.n_bins))
        if self.n_bins < 2:
            raise ValueError(f"n_bins must be >= 2, got {self.n_bins}")
        if self.vocab_size < self.n_bins:
            raise ValueError(f"vocab_size {self.vocab_size} is smaller than n_bins {self.n_bins}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {self.placement!r}")

    @property
    def first_id(self) -> int:
        return self.vocab_size - self.n_bins

    @property
    def last_id(self) -> int:
        return self.vocab_size - 1

    @cached_property
    def bins(self) -> np.ndarray:
        """The ``n_bins`` uniform edges on [-1, 1]."""
        edges = np.linspace(-1.0, 1.0, self.n_bins)
        edges.setflags(write=False)
        return edges

    @cached_property
    def bin_centers(self) -> np.ndarray:
        """The ``n_bins - 1`` centres between consecutive edges (what decoding returns)."""
        centres = (self.bins[:-1] + self.bins[1:]) / 2.0
        centres.setflags(write=False)
        return centres

    def encode(self, x_n: np.ndarray) -> np.ndarray:
        """Normalised actions (..., D) -> int64 token ids (..., D); values beyond [-1, 1] are clipped."""
        a = np.asarray(x_n)
        if a.dtype.kind not in "fiu":
            raise ValueError(f"normalised actions must be numeric, got dtype {a.dtype}")
        if a.ndim < 1:
            raise ValueError("normalised actions must have shape (..., D), got a scalar")
        a = a.astype(np.float64)
        if np.isnan(a).any():
            raise ValueError("normalised actions contain NaN")
        return (self.vocab_size - np.digitize(np.clip(a, -1.0, 1.0), self.bins)).astype(np.int64)

    def decode(self, ids: np.ndarray, strict: bool = True) -> np.ndarray:
        """Token ids (..., D) -> normalised actions (..., D) at the bin centres, float64. ``strict``: ValueError on
        an id outside [first_id, last_id]; ``strict=False`` clips the index as OpenVLA does."""
        arr = _integer_ids(ids)
        if strict:
            self.check_ids(arr)
        return self.bin_centers[np.clip(self.vocab_size - arr - 1, 0, self.n_bins - 2)]

    def encode_chunk(self, x_n: np.ndarray) -> np.ndarray:
        """A chunk of normalised actions (K, D) -> ids (K * D,), row-major (a_t's dimensions, then a_{t+1}'s)."""
        a = np.asarray(x_n)
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
            raise ValueError(f"an action chunk must have shape (K, D) with K, D >= 1, got {a.shape}")
        return self.encode(a).reshape(-1)

    def decode_chunk(self, ids: np.ndarray, dim: int, strict: bool = True) -> np.ndarray:
        """Ids (K * D,) -> normalised actions (K, D); inverse layout of :meth:`encode_chunk`."""
        dim = _int("dim", dim)
        arr = _integer_ids(ids)
        if dim < 1 or arr.ndim != 1 or arr.size == 0 or arr.size % dim:
            raise ValueError(f"chunk ids must have shape (K * {dim},) with K >= 1, got {arr.shape}")
        return self.decode(arr, strict=strict).reshape(-1, dim)

    def check_ids(self, ids: np.ndarray) -> None:
        """ValueError unless every id lies in [first_id, last_id]."""
        arr = _integer_ids(ids)
        bad = (arr < self.first_id) | (arr > self.last_id)
        if bad.any():
            raise ValueError(
                f"{int(bad.sum())} of {arr.size} ids are not action ids (first: {int(arr[bad].flat[0])}); action "
                f"ids are {self.first_id}..{self.last_id} (placement {self.placement!r}, vocab_size {self.vocab_size})"
            )

    def bin_index(self, ids: np.ndarray) -> np.ndarray:
        """Ids -> bin indices ``id - first_id`` in 0..n_bins-1 (the model's action head); bin 0 is x_n = 1."""
        arr = _integer_ids(ids)
        self.check_ids(arr)
        return arr - self.first_id

    def ids_from_bins(self, b: np.ndarray) -> np.ndarray:
        """Bin indices 0..n_bins-1 -> ids ``first_id + b``."""
        arr = _integer_ids(b)
        if ((arr < 0) | (arr >= self.n_bins)).any():
            raise ValueError(f"bin indices must lie in 0..{self.n_bins - 1}, got {arr.min()}..{arr.max()}")
        return arr + self.first_id

    @classmethod
    def for_tokenizer(
        cls, tokenizer: TokenizerLike, embedding_rows: int, placement: str, n_bins: int = 256
    ) -> ActionTokenizer:
        """The mapping for a tokenizer and a model with ``embedding_rows`` input-embedding rows.

        ``"last_ids"``: the last ``n_bins`` rows, which must lie past every tokenizer id.
        ``"added_tokens"``: adds ``<|action_i|>`` (special tokens) unless all are present, and requires them at
        consecutive ids with room in the embedding (else resize the embeddings and call again)."""
        embedding_rows = _int("embedding_rows", embedding_rows)
        n_bins = _int("n_bins", n_bins)
        if placement == "last_ids":
            n = len(tokenizer)
            if embedding_rows - n_bins < n:
                raise ValueError(
                    f"placement 'last_ids': the last {n_bins} embedding rows ({embedding_rows - n_bins}.."
                    f"{embedding_rows - 1}) collide with tokenizer ids (len(tokenizer) = {n}); the embedding needs "
                    f"at least {n + n_bins} rows (resize it) or use placement 'added_tokens'"
                )
            return cls(vocab_size=embedding_rows, n_bins=n_bins, placement="last_ids")
        if placement != "added_tokens":
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        names = action_token_names(n_bins)
        ids = _token_ids(tokenizer, names)
        absent = [name for name, i in zip(names, ids) if i is None]
        if len(absent) == n_bins:
            tokenizer.add_tokens(names, special_tokens=True)
            ids = _token_ids(tokenizer, names)
            absent = [name for name, i in zip(names, ids) if i is None]
        if absent:
            raise ValueError(f"the tokenizer has only some action tokens: {len(absent)} missing, e.g. {absent[0]}")
        if ids != list(range(ids[0], ids[0] + n_bins)):
            raise ValueError(
                f"the action tokens are not at consecutive ids in order (<|action_0|> = {ids[0]}, "
                f"<|action_{n_bins - 1}|> = {ids[-1]})"
            )
        mapping = cls(vocab_size=ids[0] + n_bins, n_bins=n_bins, placement="added_tokens")
        if len(tokenizer) > embedding_rows:
            raise ValueError(
                f"placement 'added_tokens': the tokenizer has {len(tokenizer)} tokens with the action tokens but the "
                f"embedding has {embedding_rows} rows; resize the model's embeddings to at least {len(tokenizer)} "
                "rows (e.g. model.resize_token_embeddings(len(tokenizer))) and pass the new row count"
            )
        return mapping

    def verify_tokenizer(self, tokenizer: TokenizerLike, embedding_rows: int) -> None:
        """ValueError if this (saved) mapping does not fit the tokenizer and embedding it is used with."""
        embedding_rows = _int("embedding_rows", embedding_rows)
        n = len(tokenizer)
        problems = []
        if self.last_id >= embedding_rows:
            problems.append(f"action ids reach {self.last_id} but the embedding has {embedding_rows} rows")
        if self.placement == "last_ids":
            if self.vocab_size != embedding_rows:
                why = (
                    (
                        f" (it equals len(tokenizer) = {n}: the mapping was built from len(tokenizer), not from the "
                        "embedding rows)"
                    )
                    if self.vocab_size == n
                    else ""
                )
                problems.append(
                    f"'last_ids' uses vocab_size {self.vocab_size} but the embedding has {embedding_rows} rows{why}"
                )
            if self.first_id < n:
                problems.append(
                    f"action ids {self.first_id}..{self.last_id} overlap tokenizer ids (len(tokenizer) = {n})"
                )
        else:
            names = action_token_names(self.n_bins)
            ids = _token_ids(tokenizer, names)
            absent = [name for name, i in zip(names, ids) if i is None]
            moved = [
                (name, i, self.first_id + b)
                for b, (name, i) in enumerate(zip(names, ids))
                if i is not None and i != self.first_id + b
            ]
            if absent:
                problems.append(
                    f"the tokenizer lacks {len(absent)} of the {self.n_bins} action tokens (e.g. {absent[0]})"
                )
            if moved:
                name, got, want = moved[0]
                problems.append(
                    f"{len(moved)} action tokens are at other ids than the saved mapping's (e.g. {name} "
                    f"is {got}, the mapping says {want})"
                )
            if n > embedding_rows:
                problems.append(f"len(tokenizer) = {n} exceeds the embedding's {embedding_rows} rows")
        if problems:
            raise ValueError(
                f"action token mapping (placement {self.placement!r}, vocab_size {self.vocab_size}, ids "
                f"{self.first_id}..{self.last_id}) does not match this tokenizer/model: " + "; ".join(problems)
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "n_bins": self.n_bins,
            "placement": self.placement,
            "first_id": self.first_id,
            "last_id": self.last_id,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ActionTokenizer:
        """Inverse of :meth:`to_dict`; ``first_id`` / ``last_id`` are optional but must agree if present."""
        if not isinstance(d, Mapping):
            raise ValueError(f"action tokenizer must be a JSON object, got {type(d).__name__}")
        known = {"vocab_size", "n_bins", "placement", "first_id", "last_id"}
        unknown = sorted(set(d) - known)
        if unknown or "vocab_size" not in d or "placement" not in d:
            raise ValueError(
                f"action tokenizer needs vocab_size and placement (optional n_bins, first_id, "
                f"last_id), got keys {sorted(d)}"
            )
        tok = cls(vocab_size=d["vocab_size"], n_bins=d.get("n_bins", 256), placement=d["placement"])
        for name in ("first_id", "last_id"):
            if name in d and d[name] != getattr(tok, name):
                raise ValueError(
                    f"action tokenizer {name} {d[name]!r} disagrees with vocab_size {tok.vocab_size} "
                    f"and n_bins {tok.n_bins} (which give {getattr(tok, name)})"
                )
        return tok
