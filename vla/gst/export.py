"""A leak-free copy of a question set for outside models: ``vla-gst export questions=DIR out=DIR``.

What an outside model gets (``out/questions.jsonl`` and ``out/media/``): per question an opaque id,
the subtask, the prompt, the media and the public metadata (``category``, ``level``,
``num_options``) -- nothing else:

* no answers (they go to a separate private file, ``answers=...``, default ``<out>.answers.jsonl``
  next to the export, never inside it), no world poses, no target ids, no scene names;
* media files get random names in one flat folder (no path names a scene, a subtask or a level),
  and questions are written in a random order (a question set lists scenes in turn and balances
  answer letters in blocks: the order would tell);
* every image is a new file: each copy carries its own imperceptible noise (+-2 grey levels on a few
  percent of its pixels, never changing what is wall, object or free on a map), so no two files are
  byte- or pixel-identical -- the right TDS option is no longer the very file of the scene's map
  questions, and an option cannot be found by hashing;
* sensor streams (when exported) are re-written through the chosen perception profile (the noise an
  agent with sensors would have), with frame-local ids and per-frame label tables under detector
  profiles; a current view never carries a pose.

``vla-gst score answers=<private file> predictions=FILE out=DIR`` scores predictions against it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .question import PUBLIC_META, SENSOR_MEDIA, Question, load_questions, save_stream

IMAGE_MEDIA = ("current_view", "map", "options")
VIDEO_MEDIA = ("video", "clip_video")


def _perturb(img: np.ndarray, rng: np.random.Generator, fraction: float = 0.03) -> np.ndarray:
    """A copy of an image with +-1..2 grey levels on ``fraction`` of its pixels (all channels alike)."""
    out = img.astype(np.int16).copy()
    sel = rng.random(img.shape[:2]) < fraction
    delta = rng.choice(np.array([-2, -1, 1, 2]), size=int(sel.sum()))
    out[sel] += delta[:, None]
    return np.clip(out, 0, 255).astype(np.uint8)


class Exporter:
    def __init__(self, out: Path, seed: int = 0, sensors: Any = None, streams: bool = True) -> None:
        self.out = Path(out)
        self.media = self.out / "media"
        self.rng = np.random.default_rng(seed)
        self.salt = self.rng.bytes(16)
        self.sensors = sensors
        self.streams = streams
        self._done: dict[tuple, str] = {}  # (kind, source path) -> exported name (videos and streams are shared)

    def _name(self, suffix: str) -> str:
        return self.rng.bytes(8).hex() + suffix

    def _image(self, src: Path) -> str:
        import imageio.v2 as imageio

        img = np.asarray(imageio.imread(src))[..., :3]
        name = self._name(".png")
        imageio.imwrite(self.media / name, _perturb(img, self.rng))
        return "media/" + name

    def _copy(self, src: Path, suffix: str) -> str:
        key = ("copy", str(src))
        if key not in self._done:
            name = self._name(suffix)
            shutil.copyfile(src, self.media / name)
            self._done[key] = "media/" + name
        return self._done[key]

    def _sensor(self, q: Question, name: str) -> str:
        key = ("sensor", name, str(q._path(name)))
        if key not in self._done:
            obj = q.get(name)  # through the perception profile, when the question carries one
            out = self._name(".npz")
            frames = [obj] if name == "current_sensors" else list(obj)
            save_stream(self.media / out, frames, with_pose=name != "current_sensors", single=name == "current_sensors")
            self._done[key] = "media/" + out
        return self._done[key]

    def question(self, q: Question, new_id: str) -> dict[str, Any]:
        media: dict[str, Any] = {}
        for key in q.media:
            if key in SENSOR_MEDIA:
                if self.streams:
                    media[key] = self._sensor(q, key)
            elif key in IMAGE_MEDIA:
                media[key] = [self._image(p) for p in _paths(q, key)] if key == "options" else self._image(q._path(key))
            elif key in VIDEO_MEDIA:
                media[key] = self._copy(q._path(key), ".mp4")
            elif key == "boxes":
                media[key] = self._copy(q._path(key), ".json")
            else:
                raise ValueError(f"question {q.id}: no export rule for media {key!r}")
        meta = {k: v for k, v in q.meta.items() if k in PUBLIC_META and v is not None}
        return {"id": new_id, "subtask": q.subtask, "prompt": q.prompt, "media": media, "meta": meta}


def _paths(q: Question, key: str) -> list[Path]:
    root = q.root or Path(".")
    return [Path(p) if Path(p).is_absolute() else root / p for p in q.media[key]]


def export(
    questions_dir: str | Path,
    out: str | Path,
    answers: str | Path | None = None,
    seed: int = 0,
    sensors: Any = None,
    streams: bool = True,
) -> dict[str, Any]:
    """Write the export (see the module doc); returns a summary. ``out`` must not exist yet (an export is
    written whole: a half-written one is removed and redone)."""
    out = Path(out)
    answers = Path(answers) if answers else out.with_name(out.name + ".answers.jsonl")
    if answers.resolve().is_relative_to(out.resolve()):
        raise ValueError(f"answers={answers} lies inside the export {out}: the private answers must stay outside it")
    done = out / "questions.jsonl"
    if done.exists() and answers.exists():
        raise ValueError(f"{out} already holds an export; choose a new out= or delete it")
    if out.exists():
        shutil.rmtree(out)  # an unfinished export (killed): start again
    qs = load_questions(questions_dir)
    exp = Exporter(out, seed, sensors, streams)
    exp.media.mkdir(parents=True)
    order = exp.rng.permutation(len(qs))
    rows, private = [], []
    for k, i in enumerate(order):
        q = qs[i]
        new_id = "q" + hashlib.sha256(exp.salt + q.id.encode()).hexdigest()[:12]
        rows.append(exp.question(q.for_agent(sensors), new_id))
        private.append({"id": new_id, "subtask": q.subtask, "answer": q.answer, "source": q.id, "scene": q.scene})
    tmp = answers.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in private))
    os.replace(tmp, answers)
    tmp = done.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, done)
    return {"questions": len(rows), "out": str(out), "answers": str(answers), "media_files": len(os.listdir(exp.media))}
