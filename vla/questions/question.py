"""A GST question, what an agent is given, and how questions travel (JSONL + media files).

What an agent is given (docs/GST.md): the exploration video and current view as images (what the
paper's models get), plus the robot's own sensor streams recorded with the video — depth, instance
masks and odometry poses in the robot's own frame (starting at its own origin). Offline, the
current view comes **without** its pose (``current_pose is None``); mid-episode the agent's own
odometry pose comes with it. Top-down images are just images. Scene truth and the answer are never
given: agents receive :meth:`Question.for_agent`, which drops them, and which is *blind* the way an
export is (docs/GST.md): an opaque id, no scene name (only its environment family, ``house`` or a
LIBERO suite), no question directory, and media as :class:`MediaRef` handles instead of paths (paths
name the scene, whose seed rebuilds its truth).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from spatial_memory.frame import CameraFrame

from .subtasks import SUBTASKS

# keys of ``meta`` an agent may see (everything else there is privileged: ids, world poses, ...)
PUBLIC_META = ("category", "level", "num_options")
SENSOR_MEDIA = ("stream", "current_sensors", "clip_stream")  # what a perception profile corrupts


@dataclass
class Question:
    id: str
    subtask: str
    scene: str
    prompt: str
    media: dict[str, Any]  # name -> relative path (offline) or an in-memory object (mid-episode)
    answer: dict[str, Any] | None = None  # {"type": ..., "value": ...}; None once handed to an agent
    meta: dict[str, Any] = field(default_factory=dict)
    root: Path | None = None  # where relative media paths live
    current_pose: np.ndarray | None = None  # 4x4 odometry-frame pose of the current view, when known
    # what the agent's sensors make of the sensor media (a perception profile: vla.gst.sensors); None = exact
    sensors: Any = field(default=None, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def answer_type(self) -> str:
        return SUBTASKS[self.subtask].answer_type

    def for_agent(self, sensors: Any = None) -> "Question":
        """The question as an agent may see it: no answer, no privileged metadata; its sensor media
        (``SENSOR_MEDIA``) as ``sensors`` makes them (a :class:`vla.gst.sensors.AgentSensors`), if given.

        Blind, like an export: the id is an opaque name (keyed by a secret of this process), of the
        scene only its environment family (:func:`scene_family`: ``house/test/900003`` -> ``house``; a
        memory needs to know a tabletop from an apartment), no root, and every file-backed medium a
        :class:`MediaRef` (its content's hash, never its path). An offline Traj clip is a recording of
        its own: its frames are numbered from 0, not with the video's steps. In-memory media
        (mid-episode: the agent's own frames) stay as they are."""
        src = replace(self, sensors=sensors, _cache=self._cache if sensors is None else {})
        media: dict[str, Any] = {}
        for key, value in self.media.items():
            if _is_path(value):
                load = (lambda k=key: _renumbered(src.get(k))) if key == "clip_stream" else (lambda k=key: src.get(k))
                media[key] = MediaRef(load, _fingerprint(src._path(key)))
            elif isinstance(value, list) and value and all(_is_path(v) for v in value):
                if key in SENSOR_MEDIA:
                    raise ValueError(f"question {self.id}: sensor media {key!r} split over several files")
                paths = [src._resolve(v) for v in value]
                media[key] = [MediaRef(lambda p=p: _cached_load(p), _fingerprint(p)) for p in paths]
            else:  # held in memory (mid-episode): through the sensors now, if any
                media[key] = src.get(key) if sensors is not None and key in SENSOR_MEDIA else value
        return Question(
            id=blind_id(self.id),
            subtask=self.subtask,
            scene=scene_family(self.scene),
            prompt=self.prompt,
            media=media,
            answer=None,
            meta={k: v for k, v in self.meta.items() if k in PUBLIC_META},
            root=None,
            current_pose=self.current_pose,
        )

    def held_in_memory(self, name: str) -> bool:
        """Whether a medium is an object in memory (mid-episode), not a file (or a handle on one)."""
        value = self.media.get(name)
        items = value if isinstance(value, list) else [value]
        return value is not None and not all(_is_path(v) or isinstance(v, MediaRef) for v in items)

    # ---------------------------------------------------------------- media access (lazy, cached)
    def _path(self, name: str) -> Path:
        value = self.media[name]
        if not _is_path(value):
            raise TypeError(
                f"media {name!r} of question {self.id} is not a file path (in memory, or an agent's handle)"
            )
        return self._resolve(value)

    def _resolve(self, value: str | Path) -> Path:
        p = Path(value)
        return p if p.is_absolute() or self.root is None else self.root / p

    def get(self, name: str) -> Any:
        """A media item as an object: image -> uint8 array, stream -> list[CameraFrame], view -> CameraFrame,
        options -> list of images, boxes -> {frame index: [x0, y0, x1, y1]}."""
        if name not in self.media:
            raise KeyError(f"question {self.id} ({self.subtask}) has no media {name!r}; it has {sorted(self.media)}")
        if name in self._cache:
            return self._cache[name]
        value = self.media[name]
        if _is_path(value):
            obj = _cached_load(self._path(name))
        elif isinstance(value, MediaRef):
            obj = value.load()
        elif isinstance(value, list) and value and _is_path(value[0]):
            obj = [_cached_load(self._resolve(v)) for v in value]
        elif isinstance(value, list) and value and isinstance(value[0], MediaRef):
            obj = [v.load() for v in value]
        else:
            obj = value
        if self.sensors is not None and name in SENSOR_MEDIA:
            obj = self.sensors(self, name, obj)
        self._cache[name] = obj
        return obj

    # ---------------------------------------------------------------- JSONL
    def to_json(self) -> dict[str, Any]:
        media = {}
        for k, v in self.media.items():
            if isinstance(v, (str, Path)):
                media[k] = str(v)
            elif isinstance(v, list) and all(isinstance(x, (str, Path)) for x in v):
                media[k] = [str(x) for x in v]
            else:
                raise TypeError(
                    f"media {k!r} of {self.id} is in memory (or an agent's handle); write it to a file first"
                )
        return {
            "id": self.id,
            "subtask": self.subtask,
            "scene": self.scene,
            "prompt": self.prompt,
            "media": media,
            "answer": self.answer,
            "meta": _jsonable(self.meta),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], root: Path | None = None) -> "Question":
        missing = [k for k in ("id", "subtask", "prompt", "media") if k not in d]
        if missing:
            raise ValueError(f"question line lacks {missing}: {str(d)[:200]}")
        if d["subtask"] not in SUBTASKS:
            raise ValueError(f"question {d['id']}: unknown subtask {d['subtask']!r}")
        return cls(
            id=d["id"],
            subtask=d["subtask"],
            scene=d.get("scene", ""),  # exported sets name no scene
            prompt=d["prompt"],
            media=d["media"],
            answer=d.get("answer"),
            meta=d.get("meta", {}),
            root=root,
        )


class MediaRef:
    """A medium as an agent gets it (:meth:`Question.for_agent`): a handle that loads it, and ``token``, a
    name for its content (a hash of the file), not for its place: questions that share a recording share
    the token (an agent may cache what it builds from it), and nothing in it names a scene."""

    __slots__ = ("_load", "_fingerprint", "_token")

    def __init__(self, load: Callable[[], Any], fingerprint: Callable[[], str]) -> None:
        self._load, self._fingerprint, self._token = load, fingerprint, None

    @property
    def token(self) -> str:
        if self._token is None:
            self._token = self._fingerprint()
        return self._token

    def load(self) -> Any:
        return self._load()

    def __repr__(self) -> str:
        return f"MediaRef({self.token})"


_SECRET = os.urandom(16)  # blind ids cannot be reversed by hashing guessed ids (they name scenes)
_FINGERPRINTS: dict[tuple, str] = {}


def scene_family(scene: str) -> str:
    """The environment family of a scene name (its first part): what a blind question keeps of it."""
    return scene.split("/", 1)[0]


def blind_id(question_id: str) -> str:
    """An agent's name for a question: stable within this process, says nothing about the question."""
    return "q" + hmac.new(_SECRET, question_id.encode(), hashlib.sha256).hexdigest()[:16]


def content_token(path: str | Path) -> str:
    """A name for a file's content (a hash; computed once per file version in a process)."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FINGERPRINTS:
        _FINGERPRINTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    return _FINGERPRINTS[key]


def _fingerprint(path: Path) -> Callable[[], str]:
    return lambda: content_token(path)


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, Path))


def _renumbered(frames: list[CameraFrame]) -> list[CameraFrame]:
    """A clip's frames numbered 0, 1, ... (a recording of its own), arrays shared."""
    return [replace(f, step=i) for i, f in enumerate(frames)]


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def load_questions(directory: str | Path) -> list[Question]:
    directory = Path(directory)
    path = directory / "questions.jsonl"
    if not path.exists():
        raise ValueError(f"{path} does not exist (generate questions with `vla-gst generate ... out={directory}`)")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(Question.from_json(json.loads(line), root=directory))
            except ValueError as exc:
                raise ValueError(f"{path}:{i}: {exc}") from exc
    return out


# -------------------------------------------------------------------- sensor streams on disk
def save_stream(path: str | Path, frames: list[CameraFrame], with_pose: bool = True, single: bool = False) -> None:
    """Frames as one compressed npz: rgb, depth (float16 metres), instance, K, T_world_cam, step, labels.

    ``single``: the file holds one view and loads as a CameraFrame (not a list). Without a pose the
    frames load with an identity ``T_world_cam`` that means "unknown"."""
    if not frames:
        raise ValueError("cannot save an empty stream")
    labels: dict[int, str] = {}
    shared = True  # one id -> category table for the whole stream (ids stable across frames)
    for f in frames:
        for k, v in f.labels.items():
            shared &= labels.setdefault(k, v) == v
    per_frame = [{str(k): v for k, v in f.labels.items()} for f in frames]
    arrays = {
        "rgb": np.stack([f.rgb for f in frames]),
        "depth": np.stack([np.where(np.isfinite(f.depth), f.depth, 0) for f in frames]).astype(np.float16),
        "K": np.stack([f.K for f in frames]),
        "step": np.array([f.step for f in frames]),
        # frame-local ids (a detector's) mean different things in different frames: one table per frame
        "labels": np.array(json.dumps({str(k): v for k, v in labels.items()} if shared else per_frame)),
    }
    if frames[0].instance is not None:
        arrays["instance"] = np.stack([f.instance for f in frames]).astype(np.int16)
    if with_pose:
        arrays["T_world_cam"] = np.stack([f.T_world_cam for f in frames])
    if single:
        arrays["single"] = np.array(True)
    np.savez_compressed(path, **arrays)


def load_stream(path: str | Path) -> list[CameraFrame] | CameraFrame:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}  # each z[k] decompresses the whole array: read once
    table = json.loads(str(arrays["labels"]))
    rgb, K, step = arrays["rgb"], arrays["K"], arrays["step"]
    n = len(rgb)
    if isinstance(table, list):
        if len(table) != n:
            raise ValueError(f"{path}: {len(table)} label tables for {n} frames")
        labels = [{int(k): v for k, v in t.items()} for t in table]
    else:
        labels = [{int(k): v for k, v in table.items()}] * n
    T = arrays["T_world_cam"] if "T_world_cam" in arrays else np.broadcast_to(np.eye(4), (n, 4, 4))
    inst = arrays["instance"].astype(np.int32) if "instance" in arrays else None
    depth = arrays["depth"].astype(np.float32)
    depth[depth <= 0] = np.inf  # saved as 0: nothing measured
    frames = [
        CameraFrame(
            rgb=rgb[i],
            depth=depth[i],
            K=K[i],
            T_world_cam=T[i],
            instance=None if inst is None else inst[i],
            labels=labels[i],
            step=int(step[i]),
        )
        for i in range(n)
    ]
    return frames[0] if "single" in arrays else frames


_MEDIA_CACHE: "OrderedDict[str, Any]" = OrderedDict()
_MEDIA_CACHE_SIZE = 16  # questions of one scene share their video: load it once


def _cached_load(path: Path) -> Any:
    key = str(path.resolve())
    if key in _MEDIA_CACHE:
        _MEDIA_CACHE.move_to_end(key)
        return _MEDIA_CACHE[key]
    obj = load_media(path)
    _MEDIA_CACHE[key] = obj
    if len(_MEDIA_CACHE) > _MEDIA_CACHE_SIZE:
        _MEDIA_CACHE.popitem(last=False)
    return obj


def load_media(path: Path) -> Any:
    if not path.exists():
        raise ValueError(f"media file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return load_stream(path)
    if suffix in (".png", ".jpg"):
        import imageio.v2 as imageio

        return np.asarray(imageio.imread(path))[..., :3]
    if suffix == ".json":
        return json.loads(path.read_text())
    if suffix == ".mp4":
        import imageio.v2 as imageio

        return [np.asarray(f) for f in imageio.mimread(path, memtest=False)]
    raise ValueError(f"unknown media type {path}")
