"""A leak-free copy of a question set for outside models: ``vla-gst export questions=DIR out=DIR``.

What an outside model gets (``out/questions.jsonl`` and ``out/media/``): per question an opaque id,
the subtask, the prompt, the media and the public metadata (``category``, ``level``,
``num_options``) -- nothing else:

* no answers (they go to a separate private file, ``answers=...``, default ``<out>.answers.jsonl``
  next to the export, never inside it), no world poses, no target ids, no scene names;
* media files get random names in one flat folder, and questions are written in a random order;
* **every question has its own copy of every medium** (video, sensor stream, red boxes, current view,
  map, options, Traj clip), disguised independently of every other copy (:mod:`vla.gst.disguise`:
  zoom or crop, colour, noise, thinned and renumbered frames, an odometry frame and instance ids of
  its own, re-encoding), so no two files of the export are near-duplicates and nothing pairs a
  question with another by its files; answers on a map move with the map's crop;
* **choice letters** are drawn anew over the whole export (each letter right equally often over all
  its TDS and Traj questions, in a random order), not in the generator's blocks per apartment;
* **TDS apart** (``tds="apart"``, the default): a TDS option is an apartment's map, and the
  apartment's other questions show that very map (GP, Pos, Ori, Traj) or its layout, so anyone who
  can tell which questions share an apartment (the same video, however disguised) could answer TDS
  by matching layouts across questions. So the export splits the apartments: some (in blocks of four,
  about ``tds_share`` of them) keep their TDS questions and lose every question that shows their
  map; the others keep their map questions and lose their TDS questions. The options of a TDS
  question are the maps of its block, the same four apartments for each of the block's questions:
  knowing which questions share an apartment, or which options show the same map, then tells nothing
  about which option is right. ``tds="mixed"`` keeps every question (TDS is then open to that
  cross-question matching; fine for a model that answers each question on its own);
* sensor streams (when exported) are re-written through the chosen perception profile, then disguised;
  a current view never carries a pose.

``vla-gst score answers=<private file> predictions=FILE out=DIR`` scores predictions against it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .disguise import CameraCopy, IdMap, MapCopy
from vla.questions.question import PUBLIC_META, Question, load_questions, save_stream
from vla.questions.subtasks import CHOICES, TDS_LEVEL

# every medium a question may carry (anything else is refused: it would go out without a disguise)
KNOWN_MEDIA = ("video", "stream", "boxes", "current_view", "current_sensors", "map", "options")
KNOWN_MEDIA += ("clip_video", "clip_stream")
TDS_MODES = ("apart", "mixed")


def shows_map(q: Question) -> bool:
    """Whether a question (other than TDS) shows its apartment's top-down map (a map, or Traj's options)."""
    return q.subtask not in TDS_LEVEL and ("map" in q.media or "options" in q.media)


def tds_blocks(qs: list[Question], rng: np.random.Generator, share: float) -> list[list[str]]:
    """Blocks of four apartments that keep their TDS questions (see the module doc): apartments with a
    TDS question at every level the set asks, about ``share`` of the apartments (at least one block when
    the set has five or more, so that some apartments keep their map questions)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"export tds_share must be within [0, 1], got {share}")
    scenes = list(dict.fromkeys(q.scene for q in qs))
    levels = {q.subtask for q in qs if q.subtask in TDS_LEVEL}
    has: dict[str, set[str]] = {s: set() for s in scenes}
    for q in qs:
        if q.subtask in TDS_LEVEL:
            has[q.scene].add(q.subtask)
    eligible = [s for s in scenes if levels and has[s] == levels]
    wanted = max(int(len(scenes) * share) // 4, 1 if share > 0 and len(scenes) >= 5 else 0)
    n = min(len(eligible) // 4, wanted)
    chosen = [eligible[i] for i in rng.permutation(len(eligible))[: 4 * n]]
    return [chosen[4 * b : 4 * b + 4] for b in range(n)]


def _kept_apart(q: Question, block_of: dict[str, list[str]]) -> bool:
    """TDS apart: a TDS question only in a block's apartment, a question showing a map only elsewhere."""
    if q.subtask in TDS_LEVEL:
        return q.scene in block_of
    return not (shows_map(q) and q.scene in block_of)


def _own_maps(qs: list[Question], scenes: set[str]) -> dict[tuple[str, str], np.ndarray]:
    """(apartment, TDS subtask) -> the apartment's map at that level: the right option of its question."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for q in qs:
        if q.subtask in TDS_LEVEL and q.scene in scenes and (q.scene, q.subtask) not in out:
            out[(q.scene, q.subtask)] = q.get("options")[CHOICES.index(q.answer["value"])]
    for (scene, code), img in out.items():
        for (other, code2), img2 in out.items():
            if code2 == code and other != scene and img.shape == img2.shape and np.array_equal(img, img2):
                raise ValueError(f"{scene} and {other} have the same {code} map: they cannot share a TDS block")
    return out


def balanced_letters(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` right letters, each letter ``n // 4`` or ``n // 4 + 1`` times, in a random order."""
    pool = list(CHOICES) * (n // 4) + [str(c) for c in rng.choice(CHOICES, n % 4, replace=False)]
    return [pool[i] for i in rng.permutation(n)]


class Exporter:
    def __init__(self, out: Path, sensors: Any = None, streams: bool = True) -> None:
        self.out = Path(out)
        self.media = self.out / "media"
        self.sensors = sensors
        self.streams = streams
        # ids stay the same object's from frame to frame only without a detector (gt: no sensors)
        self.stable_ids = sensors is None or not getattr(sensors.profile, "frame_local_ids", False)

    # ------------------------------------------------------------------ files
    def _file(self, rng: np.random.Generator, suffix: str) -> tuple[Path, str]:
        name = rng.bytes(8).hex() + suffix
        return self.media / name, "media/" + name

    def _png(self, img: np.ndarray, rng: np.random.Generator) -> str:
        import imageio.v2 as imageio

        path, rel = self._file(rng, ".png")
        imageio.imwrite(path, img)
        return rel

    def _video(self, frames: list[np.ndarray], rng: np.random.Generator) -> str:
        import imageio.v2 as imageio

        path, rel = self._file(rng, ".mp4")
        quality = int(rng.integers(7, 10))
        imageio.mimwrite(
            path, frames, fps=10, codec="libx264", macro_block_size=1, quality=quality, pixelformat="yuv420p"
        )
        return rel

    def _stream(self, frames: list, rng: np.random.Generator, single: bool = False) -> str:
        path, rel = self._file(rng, ".npz")
        save_stream(path, frames, with_pose=not single, single=single)
        return rel

    # ------------------------------------------------------------------ one question
    def question(
        self, q: Question, new_id: str, rng: np.random.Generator, letter: str | None, tds_options: list | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(public row, private answer row) of one question, every medium a new disguised copy."""
        unknown = sorted(set(q.media) - set(KNOWN_MEDIA))
        if unknown:
            raise ValueError(f"question {q.id}: no export rule for media {unknown}")
        src = replace(q, sensors=self.sensors, _cache={})  # sensor media through the perception profile
        ids = IdMap(rng, self.stable_ids)
        media: dict[str, Any] = {}
        answer = q.answer
        if "video" in q.media or "stream" in q.media:
            cam = CameraCopy(rng, ids)
            video = src.get("video") if "video" in q.media else None
            stream = src.get("stream") if "stream" in q.media and self.streams else None
            if video is not None and stream is not None and len(video) != len(stream):
                raise ValueError(f"question {q.id}: video of {len(video)} frames, stream of {len(stream)}")
            boxes = {int(k): v for k, v in src.get("boxes").items()} if "boxes" in q.media else {}
            n = len(video) if video is not None else len(src.get("stream"))
            kept = cam.keep(n, set(boxes))
            if video is not None:
                media["video"] = self._video([cam.image(video[i]) for i in kept], rng)
                shape = video[0].shape
            if stream is not None:
                media["stream"] = self._stream([cam.frame(stream[i], j) for j, i in enumerate(kept)], rng)
                shape = stream[0].rgb.shape
            if "boxes" in q.media:
                moved = {j: cam.box(boxes[i], shape) for j, i in enumerate(kept) if i in boxes}
                media["boxes"] = self._json({str(j): b for j, b in moved.items() if b is not None}, rng)
        else:
            cam = None
        if "current_view" in q.media or "current_sensors" in q.media:
            view = CameraCopy(rng, ids)  # a picture of its own: its own zoom and colour
            if "current_view" in q.media:
                media["current_view"] = self._png(view.image(src.get("current_view")), rng)
            if "current_sensors" in q.media and self.streams:
                frame = view.frame(src.get("current_sensors"), 0, pose=False)
                media["current_sensors"] = self._stream([frame], rng, single=True)
        if "clip_video" in q.media or "clip_stream" in q.media:
            # under gt a clip shares the video's odometry frame; under a profile it is a recording of its own
            shared = cam.T_odom if cam is not None and self.sensors is None else None
            clip = CameraCopy(rng, ids, T_odom=shared)
            if "clip_video" in q.media:
                media["clip_video"] = self._video([clip.image(f) for f in src.get("clip_video")], rng)
            if "clip_stream" in q.media and self.streams:
                frames = [clip.frame(f, j) for j, f in enumerate(src.get("clip_stream"))]
                media["clip_stream"] = self._stream(frames, rng)
        if "map" in q.media:
            copy = MapCopy(src.get("map"), rng)
            media["map"] = self._png(copy.image, rng)
            if answer["type"] == "point":
                answer = {"type": "point", "value": copy.grid(answer["value"])}
        if "options" in q.media:
            if tds_options is not None:
                options, right = tds_options, 0
            else:
                options, right = src.get("options"), CHOICES.index(answer["value"])
            others = [options[i] for i in rng.permutation(len(options)) if i != right]
            at = CHOICES.index(letter)
            order = others[:at] + [options[right]] + others[at:]
            media["options"] = [self._png(MapCopy(img, rng).image, rng) for img in order]
            answer = {"type": "choice", "value": letter}
        meta = {k: v for k, v in q.meta.items() if k in PUBLIC_META and v is not None}
        row = {"id": new_id, "subtask": q.subtask, "prompt": q.prompt, "media": _ordered(media, q.media), "meta": meta}
        private = {"id": new_id, "subtask": q.subtask, "answer": answer, "source": q.id, "scene": q.scene}
        return row, private

    def _json(self, obj: Any, rng: np.random.Generator) -> str:
        path, rel = self._file(rng, ".json")
        path.write_text(json.dumps(obj))
        return rel


def _ordered(media: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    return {k: media[k] for k in like if k in media}


def export(
    questions_dir: str | Path,
    out: str | Path,
    answers: str | Path | None = None,
    seed: int = 0,
    sensors: Any = None,
    streams: bool = True,
    tds: str = "apart",
    tds_share: float = 0.5,
) -> dict[str, Any]:
    """Write the export (see the module doc); returns a summary. ``out`` must not exist yet (an export is
    written whole: a half-written one is removed and redone)."""
    if tds not in TDS_MODES:
        raise ValueError(f"export tds must be one of {TDS_MODES}, got {tds!r}")
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
    rng = np.random.default_rng([seed, 0x6578])
    salt = rng.bytes(16)
    blocks = tds_blocks(qs, rng, tds_share) if tds == "apart" else []
    block_of = {s: b for b in blocks for s in b}
    kept = [q for q in qs if tds == "mixed" or _kept_apart(q, block_of)]
    dropped = Counter(q.subtask for q in qs if tds == "apart" and not _kept_apart(q, block_of))
    qs = kept
    own = _own_maps(qs, set(block_of))
    order = rng.permutation(len(qs))  # position in the export of each question
    position = {int(i): k for k, i in enumerate(order)}
    choice = [int(i) for i in order if "options" in qs[int(i)].media]
    letters = dict(zip(choice, balanced_letters(len(choice), rng)))
    exp = Exporter(out, sensors, streams)
    exp.media.mkdir(parents=True)
    rows: list[Any] = [None] * len(qs)
    private: list[Any] = [None] * len(qs)
    for i, q in enumerate(qs):  # in the set's order: a scene's noisy recording is made once
        k = position[i]
        tds_options = None
        if q.subtask in TDS_LEVEL and tds == "apart":
            block = block_of[q.scene]
            tds_options = [own[(q.scene, q.subtask)]] + [own[(s, q.subtask)] for s in block if s != q.scene]
        new_id = "q" + hashlib.sha256(salt + q.id.encode()).hexdigest()[:12]
        rows[k], private[k] = exp.question(
            q, new_id, np.random.default_rng([seed, 0x7175, k]), letters.get(i), tds_options
        )
    tmp = answers.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in private))
    os.replace(tmp, answers)
    tmp = done.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, done)
    return {
        "questions": len(rows),
        "out": str(out),
        "answers": str(answers),
        "media_files": len(os.listdir(exp.media)),
        "tds_blocks": len(blocks),
        "dropped": dict(dropped),
    }
