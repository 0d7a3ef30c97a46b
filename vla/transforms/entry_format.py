"""Memory entries on disk: the one identity and the one format both memory caches keep them in.

The entries are what :meth:`~vla.transforms.map_inputs.MemoryInputs.entries` returns: numpy arrays of one or
more dimensions (numbers or unicode), ``str``, ``bool``, ``int``, ``float``.
:class:`~vla.data.map_input_cache.MemoryCache` (one file per demonstration, every step) and
:class:`~vla.policy.question_map.StreamMemoryCache` (one file per GST question stream or question, one
step) both name their files by :func:`memory_key` and write and read them through this module.

**Identity** (:func:`memory_key`): a hash of the storage :data:`FORMAT`, the memory config
(:meth:`~vla.transforms.map_inputs.MemoryInputsConfig.to_json`) and what the entries were computed from (the
caller's ``source`` fields). A file stores its key in the ``key`` attribute; a file whose stored
identity is not the one asked for (another format, a file copied or renamed from another cache, an older
cache) is never read: the caches compute its entries again and replace it.

**Format** (HDF5): one dataset per entry key (``frames``, ``topdown``, ``agent/point``, ``objects/id``,
``text``, ...). Numbers and strings are (T,) datasets; arrays are concatenated along their first axis
with ``_offsets/<key>`` (T+1,) giving step ``t``'s rows (object tables vary in length; a map is ``H``
rows of one chunk); unicode arrays are stored as UTF-8 strings. Arrays of more than 4 kB per step are
compressed. Attributes: ``format``, ``key``, ``config``, ``kinds`` (entry key -> kind, JSON) and the
caller's own. Files are written atomically (a temporary file, then ``os.replace``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import h5py
import numpy as np

from .map_inputs import MemoryInputsConfig

FORMAT = 2  # 2: named objects lead the table (the instruction is passed); HDF5 for both caches
SCALARS: dict[str, type] = {"str": str, "bool": bool, "int": int, "float": float}
_COMPRESS_BYTES = 4096
_STR = h5py.string_dtype("utf-8")


def memory_key(config: MemoryInputsConfig, length: int = 20, **source: Any) -> str:
    """The identity of stored memory entries: the storage format, the memory config and ``source``
    (JSON-ready fields naming what the entries were computed from), hashed to ``length`` hex digits."""
    blob = json.dumps({"format": FORMAT, "config": config.to_json(), **source}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def entry_kind(key: str, value: Any) -> str:
    """The kind of a memory entry's value; ``ValueError`` naming the entry for anything else."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0 or value.dtype == object:
            raise ValueError(f"memory entry {key!r}: cannot cache a {value.ndim}-d {value.dtype} array")
        return "array"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    raise ValueError(f"memory entry {key!r}: cannot cache a {type(value).__name__}")


def scalar(kind: str, value: Any) -> Any:
    """A stored scalar (a numpy scalar, bytes for ``str``) back as the Python value of its kind."""
    if kind == "str" and isinstance(value, bytes):
        return value.decode()
    return SCALARS[kind](value.item() if isinstance(value, np.generic) else value)


# ------------------------------------------------------------------------------------------ writing
def write_entries(
    path: Path,
    steps: Iterable[dict[str, Any]],
    key: str,
    config: MemoryInputsConfig,
    attrs: dict[str, Any] | None = None,
    compression: str = "lzf",
    expect: int | None = None,
) -> int:
    """Write every step's entries to ``path`` (atomically), under identity ``key``; the steps written.
    ``expect``: the number of steps there must be (``ValueError`` otherwise, nothing written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with h5py.File(tmp, "w") as out:
            writer = EntryWriter(out, compression)
            for entries in steps:
                writer.append(entries)
            writer.flush()
            if expect is not None and writer.steps != expect:
                raise ValueError(f"{path.name}: computed {writer.steps} steps of memory entries, expected {expect}")
            out.attrs.update(
                format=FORMAT, key=key, config=config.to_json(), kinds=json.dumps(writer.kinds), **(attrs or {})
            )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return writer.steps


class EntryWriter:
    """Collects steps' entries and appends them to resizable datasets, ``flush_every`` steps at a
    time (one h5py write per key and block: per-step writes cost more than the memory itself)."""

    def __init__(self, f: h5py.File, compression: str, flush_every: int = 64) -> None:
        self.f, self.compression, self.flush_every = f, compression, int(flush_every)
        self.kinds: dict[str, str] = {}
        self.steps = 0  # steps appended (flushed or not)
        self._buffer: dict[str, list[Any]] = {}
        self._written = 0  # steps flushed

    def _create(self, k: str, value: Any) -> None:
        kind = entry_kind(k, value)
        self.kinds[k] = kind
        if kind == "array":
            unicode = value.dtype.kind == "U"
            rest = value.shape[1:]
            big = not unicode and value.nbytes > _COMPRESS_BYTES
            chunks = (max(value.shape[0], 1),) + rest if big else True
            ds = self.f.create_dataset(
                k, shape=(0,) + rest, maxshape=(None,) + rest, dtype=_STR if unicode else value.dtype,
                chunks=chunks, compression=self.compression if big else None,
            )  # fmt: skip
            ds.attrs["unicode"] = unicode
            self.f.create_dataset(f"_offsets/{k}", shape=(1,), maxshape=(None,), dtype=np.int64, chunks=True)
        else:
            dtype = {"str": _STR, "bool": np.bool_, "int": np.int64, "float": np.float64}[kind]
            self.f.create_dataset(k, shape=(0,), maxshape=(None,), dtype=dtype, chunks=True)

    def append(self, entries: dict[str, Any]) -> None:
        if self.steps == 0:
            for k, v in entries.items():
                self._create(k, v)
                self._buffer[k] = []
        if set(entries) != set(self.kinds):
            raise ValueError(
                f"memory entries changed keys at step {self.steps}: {sorted(entries)} vs {sorted(self.kinds)}"
            )
        for k, v in entries.items():
            self._buffer[k].append(v)
        self.steps += 1
        if self.steps - self._written >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        n_new = self.steps - self._written
        if n_new == 0:
            return
        for k, rows in self._buffer.items():
            ds = self.f[k]
            if self.kinds[k] == "array":
                lengths = np.array([len(r) for r in rows], dtype=np.int64)
                block = np.concatenate(rows)
                if block.dtype.kind == "U":
                    block = block.astype(object)
                n = ds.shape[0]
                ds.resize(n + len(block), axis=0)
                if len(block):
                    ds[n:] = block
                off = self.f[f"_offsets/{k}"]
                off.resize(self.steps + 1, axis=0)
                off[self._written + 1 :] = n + np.cumsum(lengths)
            else:
                ds.resize(self.steps, axis=0)
                ds[self._written :] = np.array(rows, dtype=object if self.kinds[k] == "str" else ds.dtype)
            rows.clear()
        self._written = self.steps


# ------------------------------------------------------------------------------------------ reading
class EntryFile:
    """What :func:`read_step` needs of an open entries file: its kinds, offsets and unicode arrays.
    ``ValueError`` when the file is not entries under identity ``key`` (another format or key)."""

    def __init__(self, f: h5py.File, key: str) -> None:
        stored = (_attr(f, "format"), _attr(f, "key"))
        if stored != (FORMAT, key):
            raise ValueError(
                f"{f.filename}: stored memory entries of format {stored[0]!r} and key {stored[1]!r}, "
                f"not format {FORMAT} and key {key!r}"
            )
        self.kinds: dict[str, str] = json.loads(f.attrs["kinds"])
        self.offsets = {k: f[f"_offsets/{k}"][()] for k, kind in self.kinds.items() if kind == "array"}
        self.unicode = {k for k in self.offsets if f[k].attrs.get("unicode")}
        first = next(iter(self.kinds), None)
        if first is None:
            self.steps = 0
        else:
            self.steps = len(self.offsets[first]) - 1 if first in self.offsets else int(f[first].shape[0])

    def read_step(self, dataset: Callable[[str], Any], t: int) -> dict[str, Any]:
        """Step ``t``'s entries; ``dataset(name)`` gives the file's dataset ``name``."""
        out: dict[str, Any] = {}
        for k, kind in self.kinds.items():
            ds = dataset(k)
            if kind == "array":
                v = ds[self.offsets[k][t] : self.offsets[k][t + 1]]
                out[k] = np.array([s.decode() for s in v], dtype=np.str_) if k in self.unicode else v
            else:
                out[k] = scalar(kind, ds[t])
        return out


def _attr(f: h5py.File, name: str) -> Any:
    v = f.attrs.get(name)
    if isinstance(v, bytes):
        return v.decode()
    return v.item() if isinstance(v, np.generic) else v


def read_entries(path: Path, key: str, t: int = 0) -> dict[str, Any] | None:
    """Step ``t`` of the entries file ``path`` if it holds identity ``key``; None when it is missing,
    damaged or holds another identity (the caller computes the entries again and replaces it)."""
    if not path.exists():
        return None
    try:
        with h5py.File(path, "r") as f:
            ef = EntryFile(f, key)
            if not 0 <= t < ef.steps:
                return None
            return ef.read_step(f.__getitem__, t)
    except (OSError, ValueError, KeyError):
        return None
