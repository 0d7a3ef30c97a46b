"""Writing question media to disk (offline question sets): each shared object is written once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import numpy as np

from spatial_memory.frame import CameraFrame

from vla.questions.question import Question, save_stream


class MediaWriter:
    """Turns a question's in-memory media into files under ``root`` (paths stored relative to it)."""

    def __init__(self, root: str | Path, fps: int = 10) -> None:
        self.root, self.fps = Path(root), fps
        self._written: dict[int, str | list[str]] = {}
        self._keep: list[Any] = []  # keep objects alive so their id() stays unique

    def _path(self, scene: str, name: str) -> Path:
        p = self.root / "scenes" / scene.replace("/", "-") / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def _write(self, q: Question, key: str, obj: Any, index: int) -> str:
        if id(obj) in self._written:
            return self._written[id(obj)]
        stem = f"{key}_{index:04d}"
        if key in ("video", "clip_video"):
            path = self._path(q.scene, stem + ".mp4")
            frames = [np.ascontiguousarray(f) for f in obj]
            imageio.mimwrite(
                path, frames, fps=self.fps, codec="libx264", macro_block_size=1, quality=8, pixelformat="yuv420p"
            )
        elif key in ("stream", "clip_stream"):
            path = self._path(q.scene, stem + ".npz")
            save_stream(path, obj)
        elif key == "current_sensors":
            path = self._path(q.scene, stem + ".npz")
            save_stream(path, [obj], with_pose=False, single=True)  # offline current views carry no pose
        elif key == "boxes":
            import json

            path = self._path(q.scene, stem + ".json")
            path.write_text(json.dumps(obj))
        elif isinstance(obj, np.ndarray) and obj.ndim == 3:
            path = self._path(q.scene, stem + ".png")
            imageio.imwrite(path, obj)
        else:
            raise TypeError(f"cannot write media {key!r} of type {type(obj).__name__}")
        rel = str(path.relative_to(self.root))
        self._written[id(obj)] = rel
        self._keep.append(obj)
        return rel

    def externalise(self, q: Question) -> Question:
        media = {}
        for key, obj in q.media.items():
            if isinstance(obj, (str, Path)):
                media[key] = str(obj)
            elif key == "options":
                media[key] = [self._write(q, "option", img, len(self._written)) for img in obj]
            elif isinstance(obj, CameraFrame) or isinstance(obj, (list, dict, np.ndarray)):
                media[key] = self._write(q, key, obj, len(self._written))
            else:
                raise TypeError(f"question {q.id}: cannot write media {key!r} ({type(obj).__name__})")
        q.media = media
        q.root = self.root
        return q
