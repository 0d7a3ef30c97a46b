"""The spatial memory's inputs for a GST question's sensor stream, fused once and kept.

A GST question (``vla-gst generate``) carries the sensor stream its video was rendered from
(``stream``; a Traj question its clip's, ``clip_stream``): depth, instance masks, camera poses,
what an agent is given. :func:`stream_memory_entries` replays it through
:class:`~vla.transforms.map_inputs.MemoryInputs` and returns ``MemoryInputs.entries()`` -- the
``memory/*`` inputs of a memory-reading policy after the whole stream.

A question with a current view or a target gets more than the stream's state
(:func:`question_entries`): the object table is measured from the current view, where the memory
localises it (offline views come without a pose), and the object the question is about, as the
memory resolves it (a category, or what the red boxes show), leads the table marked ``[target]`` --
what the memory agent computes its answers from, in words, for a model to read.

Fusing a stream takes seconds; the questions of a scene share one stream, so
:class:`StreamMemoryCache` keeps what it fused: in memory (the last ``lru`` streams) and, with a
``root``, on disk -- one ``.hdf5`` file per question's entries (``q``-prefixed), in the format and
under the identity both memory caches share (:mod:`vla.transforms.entry_format`): named by
:func:`~vla.transforms.entry_format.memory_key` of the memory config, the content of the stream's files and
of the question's view and red boxes, its subtask, prompt and public metadata: never of an id or a
path, so a question and its agent's blind view (:meth:`Question.for_agent`, which names files by
content), training and eval share the entry, and a changed config, stream or view is never served
stale. A damaged file, or one whose stored identity is not its name's, is derived data and is fused
again. A training run's data-loader workers and ``vla-gst eval`` share one such directory. (Caches
written before this format, ``.npz`` files, are not read; delete them.)
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.registry import demo_layout
from vla.policy import memory_inputs
from vla.questions.question import PUBLIC_META, MediaRef, Question, content_token, scene_family
from vla.transforms.map_inputs import MemoryInputs, MemoryInputsConfig
from vla.transforms.entry_format import memory_key, read_entries, write_entries


QUESTION_MEDIA = ("current_sensors", "current_view", "boxes")  # what a question's entries read besides its stream


def stream_key_of(q: Question) -> str:
    """The media key of the stream a question's memory fuses: its clip's for Traj, else the video's."""
    return "clip_stream" if "clip_stream" in q.media else "stream"


def fused_stream(q: Question, memory: MemoryInputsConfig | dict, stream_key: str | None = None) -> MemoryInputs:
    """A memory transform that has fused the question's sensor stream (its clip's, for Traj)."""
    cfg = MemoryInputsConfig.from_any(memory)
    stream_key = stream_key or stream_key_of(q)
    inputs = memory_inputs(cfg, seed=0)
    family = scene_family(q.scene)  # the family's own spec (its layout ignores the dimensions given)
    inputs.reset(demo_layout(family).implied_spec(family, [], {}, 0, 0))
    camera = cfg.camera or "ego"
    for f in q.get(stream_key):
        inputs.integrate(Observation(cameras={camera: f}, state=np.zeros(0), instruction="", step=f.step))
    return inputs


def stream_memory_entries(
    q: Question, memory: MemoryInputsConfig | dict, stream_key: str | None = None
) -> dict[str, Any]:
    """The memory inputs (``MemoryInputs.entries()``) after fusing the question's sensor stream (its
    clip's, for Traj) -- what an agent offline has of the video, in the memory's form."""
    return fused_stream(q, memory, stream_key).entries()


def question_entries(q: Question, inputs: MemoryInputs) -> dict[str, Any]:
    """The memory inputs for question ``q`` from a memory transform that holds its video (fused from the
    stream offline, the agent's live one mid-episode): the object table measured from the question's
    current view and led by its target (see the module doc); a question with neither gets the plain
    entries. Traj questions read their clip's memory (:func:`fused_stream` with ``clip_stream``)."""
    from vla.questions.answering import AnswererConfig, MemoryAnswerer

    if stream_key_of(q) != "stream" or inputs.memory is None or inputs.memory.n_frames == 0:
        return inputs.entries()
    cfg = inputs.config
    answerer = MemoryAnswerer(
        AnswererConfig(tabletop=not inputs.mobile_base, perception=cfg.perception, overrides=cfg.memory_overrides)
    )
    view, target = answerer.view_and_target(q, inputs.memory)
    return inputs.entries("", view, target)


def _files(q: Question, stream_key: str) -> list[Path] | None:
    """A medium's files, or None when it is held in memory."""
    value = q.media[stream_key]
    rels = value if isinstance(value, list) else [value]
    if not rels or not all(isinstance(r, (str, Path)) for r in rels):
        return None
    return [Path(r) if Path(r).is_absolute() else Path(q.root or ".") / r for r in rels]


def _content(q: Question, name: str) -> list[str] | None:
    """Names for the content of a medium's files (an agent's handles carry theirs); None when the medium
    is held in memory (nothing to key a cache on)."""
    value = q.media[name]
    refs = value if isinstance(value, list) else [value]
    if refs and all(isinstance(r, MediaRef) for r in refs):  # an agent's view of a question: no paths
        return [r.token for r in refs]
    paths = _files(q, name)
    if paths is None:
        return None
    try:
        return [content_token(p) for p in paths]
    except OSError as exc:
        raise ValueError(f"question {q.id}: {name} file: {exc}") from exc


class StreamMemoryCache:
    """:func:`stream_memory_entries`, each stream fused once per config (see the module doc)."""

    def __init__(self, config: MemoryInputsConfig | dict, root: str | Path | None = None, lru: int = 4) -> None:
        self.config = MemoryInputsConfig.from_any(config)
        self.root = Path(root) if root is not None else None
        if int(lru) < 1:
            raise ValueError(f"StreamMemoryCache lru must be >= 1, got {lru}")
        self.lru = int(lru)
        self._memo: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._streams: OrderedDict[str, MemoryInputs] = OrderedDict()  # fused streams, for question entries
        self.fused = 0  # streams fused by this process (not served from memory or disk)

    def __getstate__(self) -> dict[str, Any]:  # data-loader workers start with an empty memo
        d = dict(self.__dict__)
        d["_memo"], d["_streams"] = OrderedDict(), OrderedDict()
        return d

    def key(self, q: Question, stream_key: str | None = None) -> str | None:
        """The cache key of the question's stream under this config; None for an in-memory stream."""
        content = _content(q, stream_key or stream_key_of(q))
        if content is None:
            return None
        return memory_key(self.config, 24, content=content)

    def path(self, key: str) -> Path | None:
        return self.root / f"{key}.hdf5" if self.root is not None else None

    def entries(self, q: Question, stream_key: str | None = None) -> dict[str, Any]:
        """The memory inputs after the question's stream: from memory, from disk, or fused now."""
        stream_key = stream_key or stream_key_of(q)
        key = self.key(q, stream_key)
        if key is None:
            self.fused += 1
            return stream_memory_entries(q, self.config, stream_key)

        def compute() -> dict[str, Any]:
            self.fused += 1
            return stream_memory_entries(q, self.config, stream_key)

        return self._cached(key, compute)

    def question_entries(self, q: Question) -> dict[str, Any]:
        """:func:`question_entries` of ``q``, kept per question (a scene's questions fuse its stream once)."""
        skey = self.key(q)
        if skey is None:
            self.fused += 1
            return question_entries(q, fused_stream(q, self.config))
        # what the entries depend on besides the stream, by content: never the id or a path (a question
        # and its agent's blind view, training and eval, share the entry)
        media = {k: _content(q, k) for k in QUESTION_MEDIA if k in q.media}
        meta = {k: q.meta.get(k) for k in PUBLIC_META}
        key = "q" + memory_key(self.config, 24, stream=skey, subtask=q.subtask, prompt=q.prompt, meta=meta, media=media)

        def compute() -> dict[str, Any]:
            inputs = self._streams.get(skey)
            if inputs is None:
                inputs = fused_stream(q, self.config)
                self.fused += 1
                self._streams[skey] = inputs
                while len(self._streams) > 2:
                    self._streams.popitem(last=False)
            self._streams.move_to_end(skey)
            return question_entries(q, inputs)

        if None in media.values():  # a view held in memory: nothing to key it on
            return compute()
        return self._cached(key, compute)

    def _cached(self, key: str, compute) -> dict[str, Any]:
        hit = self._memo.get(key)
        if hit is None:
            hit = self._load(key)
            if hit is None:
                hit = compute()
                self._save(key, hit)
            self._memo[key] = hit
            while len(self._memo) > self.lru:
                self._memo.popitem(last=False)
        self._memo.move_to_end(key)
        return hit

    # ------------------------------------------------------------------ disk
    def _load(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        return None if path is None else read_entries(path, key)

    def _save(self, key: str, entries: dict[str, Any]) -> None:
        path = self.path(key)
        if path is not None:
            write_entries(path, [entries], key, self.config)
