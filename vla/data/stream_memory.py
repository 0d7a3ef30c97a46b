"""The spatial memory's inputs for a GST question's sensor stream, fused once and kept.

A GST question (``vla-gst generate``) carries the sensor stream its video was rendered from
(``stream``; a Traj question its clip's, ``clip_stream``): depth, instance masks, camera poses,
what an agent is given. :func:`stream_memory_entries` replays it through
:class:`~vla.transforms.memory.MemoryInputs` and returns ``MemoryInputs.entries()`` -- the
``memory/*`` inputs of a memory-reading policy after the whole stream.

Fusing a stream takes seconds; the questions of a scene share one stream, so
:class:`StreamMemoryCache` keeps what it fused: in memory (the last ``lru`` streams) and, with a
``root``, on disk -- one ``.npz`` per (memory config, stream files), named by a hash of the config
and of each stream file's content (what an agent's blind view of a question, :meth:`Question.for_agent`,
names a file by: a question and its agent's view share the entry), so a changed config or stream is
never served stale.
Files are written atomically (a temporary file, then ``os.replace``) and read without pickle; a
damaged file is derived data and is fused again. A training run's data-loader workers and
``vla-gst eval`` share one such directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from envs.observation import Observation
from vla.gst.question import MediaRef, Question, content_token
from vla.transforms.memory import MemoryInputs, MemoryInputsConfig

from .layout import house_spec, implied_spec
from .memory_cache import _config_json

FORMAT = 1
_KINDS = "__kinds__"


def stream_key_of(q: Question) -> str:
    """The media key of the stream a question's memory fuses: its clip's for Traj, else the video's."""
    return "clip_stream" if "clip_stream" in q.media else "stream"


def stream_memory_entries(
    q: Question, memory: MemoryInputsConfig | dict, stream_key: str | None = None
) -> dict[str, Any]:
    """The memory inputs (``MemoryInputs.entries()``) after fusing the question's sensor stream (its
    clip's, for Traj) -- what an agent offline has of the video, in the memory's form."""
    cfg = memory if isinstance(memory, MemoryInputsConfig) else MemoryInputsConfig.from_dict(memory)
    stream_key = stream_key or stream_key_of(q)
    inputs = MemoryInputs(cfg, seed=0)
    libero = q.scene.startswith("libero")
    inputs.reset(implied_spec("libero", [], {}, 7, 8) if libero else house_spec([], {}))
    camera = cfg.camera or "ego"
    for f in q.get(stream_key):
        inputs.integrate(Observation(cameras={camera: f}, state=np.zeros(0), instruction="", step=f.step))
    return inputs.entries()


def _files(q: Question, stream_key: str) -> list[Path] | None:
    """The stream's files, or None when the stream is held in memory (nothing to key a cache on)."""
    value = q.media[stream_key]
    rels = value if isinstance(value, list) else [value]
    if not rels or not all(isinstance(r, (str, Path)) for r in rels):
        return None
    return [Path(r) if Path(r).is_absolute() else Path(q.root or ".") / r for r in rels]


class StreamMemoryCache:
    """:func:`stream_memory_entries`, each stream fused once per config (see the module doc)."""

    def __init__(self, config: MemoryInputsConfig | dict, root: str | Path | None = None, lru: int = 4) -> None:
        self.config = config if isinstance(config, MemoryInputsConfig) else MemoryInputsConfig.from_dict(config)
        self.root = Path(root) if root is not None else None
        if int(lru) < 1:
            raise ValueError(f"StreamMemoryCache lru must be >= 1, got {lru}")
        self.lru = int(lru)
        self._config_json = _config_json(self.config)  # the same key text as MemoryCache's
        self._memo: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.fused = 0  # streams fused by this process (not served from memory or disk)

    def __getstate__(self) -> dict[str, Any]:  # data-loader workers start with an empty memo
        d = dict(self.__dict__)
        d["_memo"] = OrderedDict()
        return d

    def key(self, q: Question, stream_key: str | None = None) -> str | None:
        """The cache key of the question's stream under this config; None for an in-memory stream."""
        stream_key = stream_key or stream_key_of(q)
        value = q.media[stream_key]
        refs = value if isinstance(value, list) else [value]
        if refs and all(isinstance(r, MediaRef) for r in refs):  # an agent's view of a question: no paths
            content = [r.token for r in refs]
        else:
            paths = _files(q, stream_key)
            if paths is None:
                return None
            try:
                content = [content_token(p) for p in paths]
            except OSError as exc:
                raise ValueError(f"question {q.id}: stream file: {exc}") from exc
        blob = json.dumps({"format": FORMAT, "config": self._config_json, "content": content}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def path(self, key: str) -> Path | None:
        return self.root / f"{key}.npz" if self.root is not None else None

    def entries(self, q: Question, stream_key: str | None = None) -> dict[str, Any]:
        """The memory inputs after the question's stream: from memory, from disk, or fused now."""
        stream_key = stream_key or stream_key_of(q)
        key = self.key(q, stream_key)
        if key is None:
            self.fused += 1
            return stream_memory_entries(q, self.config, stream_key)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._load(key)
            if hit is None:
                hit = stream_memory_entries(q, self.config, stream_key)
                self.fused += 1
                self._save(key, hit)
            self._memo[key] = hit
            while len(self._memo) > self.lru:
                self._memo.popitem(last=False)
        self._memo.move_to_end(key)
        return hit

    # ------------------------------------------------------------------ disk
    def _load(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        if path is None or not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                kinds = json.loads(str(z[_KINDS]))
                return {k: _decode(z[k], kind) for k, kind in kinds.items()}
        except (OSError, ValueError, KeyError):  # damaged: fuse again (and overwrite)
            return None

    def _save(self, key: str, entries: dict[str, Any]) -> None:
        path = self.path(key)
        if path is None:
            return
        arrays, kinds = {}, {}
        for k, v in entries.items():
            kinds[k], arrays[k] = _encode(k, v)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
        try:
            np.savez(tmp, **{_KINDS: np.array(json.dumps(kinds))}, **arrays)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def _encode(key: str, v: Any) -> tuple[str, np.ndarray]:
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            raise TypeError(f"memory entry {key!r}: object arrays cannot be cached")
        return "array", v
    if isinstance(v, str):
        return "str", np.array(v)
    if isinstance(v, (bool, np.bool_)):
        return "bool", np.array(bool(v))
    if isinstance(v, (int, np.integer)):
        return "int", np.array(int(v))
    if isinstance(v, (float, np.floating)):
        return "float", np.array(float(v))
    raise TypeError(f"memory entry {key!r}: cannot cache a {type(v).__name__}")


def _decode(a: np.ndarray, kind: str) -> Any:
    if kind == "array":
        return a
    return {"str": str, "bool": bool, "int": int, "float": float}[kind](a.item())
