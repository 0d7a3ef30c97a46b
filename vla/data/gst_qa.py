"""``GSTQASource``: GST-Bench question sets (``vla-gst generate``) as visual question answering samples.

One sample per question; its episode is the question's **scene** (questions of a scene share their
video, so a train/val split by episode never lets a scene's video leak across). Questions are read
through :func:`vla.questions.question.load_questions`; the answer is
:func:`vla.questions.answers.format_answer` of the question's typed answer (what a perfect model says).

Images, in the order the question's prompt refers to them, each marked ``<image>`` in the prompt:

* the video: ``max_video_frames`` frames spread evenly over it (Traj: its short clip); the media's
  red boxes on visual targets are kept, and for a visual target half of the frames (at least one)
  are those with the largest boxes, so the target is marked in the frames shown;
* the current view (ED*, Pos, Ori), the top-down map (GP*, Pos, Ori), the options A-D (TDS, Traj).

With ``memory`` (a :class:`~vla.transforms.memory.MemoryInputsConfig`), the video frames are
replaced by what the spatial memory makes of the question's sensor stream (depth, instance masks,
odometry poses: what an agent is given): its top-down map (``memory/topdown``) and object table
text (``memory/text``) after fusing the stream (Traj: the clip's stream); visual targets keep up to
two of their boxed frames. The table is measured from the question's current view (where the
memory localises it) and led by its target as the memory resolves it
(:func:`~vla.data.stream_memory.question_entries`). Current view, map and options stay. Each
stream is fused once (:class:`~vla.data.stream_memory.StreamMemoryCache`; on disk under
``cache_dir`` when given, so data-loader workers and later runs share it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vla.questions.answers import format_answer
from vla.questions.question import Question, load_questions
from vla.questions.subtasks import CHOICES, SUBTASKS
from vla.transforms.memory import MemoryInputsConfig

from .sample import Sample, SceneQuestions, check_episodes, check_index
from .stream_memory import StreamMemoryCache, stream_key_of


def _media_paths(value: Any) -> list[str]:
    if isinstance(value, (str, Path)):
        return [str(value)]
    if isinstance(value, list) and all(isinstance(v, (str, Path)) for v in value):
        return [str(v) for v in value]
    return []


class GSTQASource(SceneQuestions):
    def __init__(
        self,
        questions_dir: str | Path,
        key: str = "gst_qa",
        memory: MemoryInputsConfig | dict | None = None,
        max_video_frames: int = 8,
        cache_dir: str | Path | None = None,
    ) -> None:
        root = Path(questions_dir)
        questions = load_questions(root)
        if not questions:
            raise ValueError(f"{root / 'questions.jsonl'} holds no questions")
        rows = []
        for q in questions:
            self._check(root, q, memory is not None)
            rows.append(q.to_json())
        if memory is not None and not isinstance(memory, MemoryInputsConfig):
            memory = MemoryInputsConfig.from_dict(memory)
        if memory is not None and not ({"topdown", "text"} & set(memory.inputs)):
            raise ValueError(f"GSTQASource memory inputs need 'topdown' and/or 'text', got {list(memory.inputs)}")
        cache = StreamMemoryCache(memory, cache_dir) if memory is not None else None
        self._setup(key, root, rows, memory, max_video_frames, cache)

    def _setup(
        self,
        key: str,
        root: Path,
        rows: list[dict],
        memory: MemoryInputsConfig | None,
        k: int,
        cache: StreamMemoryCache | None,
    ) -> None:
        if int(k) < 1:
            raise ValueError(f"max_video_frames must be >= 1, got {k}")
        self.key, self.root, self.memory, self.max_video_frames = key, root, memory, int(k)
        self._rows = rows
        self._cache: StreamMemoryCache | None = cache

    @staticmethod
    def _check(root: Path, q: Question, memory: bool) -> None:
        where = f"{root / 'questions.jsonl'}: question {q.id}"
        if not isinstance(q.answer, dict) or "value" not in q.answer:
            raise ValueError(f"{where}: no answer (a question set for training needs its answers)")
        kind = q.answer.get("type", SUBTASKS[q.subtask].answer_type)
        if kind != SUBTASKS[q.subtask].answer_type:
            want = SUBTASKS[q.subtask].answer_type
            raise ValueError(f"{where}: answer type {kind!r} but {q.subtask} answers are {want!r}")
        try:
            format_answer(kind, q.answer["value"])
        except (TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"{where}: answer {q.answer['value']!r} is not a valid {kind}: {exc}") from exc
        needed = stream_key_of(q) if memory else None
        video = "clip_video" if "clip_video" in q.media else "video"
        for name in [video] + ([needed] if needed else []):
            if name not in q.media:
                raise ValueError(f"{where}: media {name!r} is missing (it has {sorted(q.media)})")
        for name, value in q.media.items():
            for rel in _media_paths(value):
                p = Path(rel) if Path(rel).is_absolute() else root / rel
                if not p.exists():
                    raise ValueError(f"{where}: media {name!r} file {p} does not exist")

    # ------------------------------------------------------------------ SampleSource
    def subset(self, episodes: set[str]) -> "GSTQASource":
        keep = check_episodes(self, episodes)
        out = object.__new__(GSTQASource)
        rows = [r for r in self._rows if r["scene"] in keep]
        out._setup(self.key, self.root, rows, self.memory, self.max_video_frames, self._cache)
        return out

    def question(self, i: int) -> Question:
        return Question.from_json(self._rows[check_index(self, i)], root=self.root)

    def sample(self, i: int) -> Sample:
        q = self.question(i)
        entries = self._cache.question_entries(q) if self._cache is not None else None
        images, prompt = question_inputs(q, self.memory is not None, self.max_video_frames, entries)
        answer = format_answer(q.answer.get("type", q.answer_type), q.answer["value"])
        return Sample(dataset=self.key, episode=q.scene, kind="qa", images=images, prompt=prompt, answer=answer)

    def __repr__(self) -> str:
        return f"GSTQASource({self.key!r}: {len(self)} questions, {len(self.episodes())} scenes)"


def _frame_indices(n: int, k: int, boxes: dict | None, boxed_only: bool = False) -> list[int]:
    """Up to ``k`` frame indices in time order: evenly spread; with ``boxes`` (frame -> [x0, y0, x1,
    y1]) half of them (at least one) the frames with the largest boxes."""
    chosen: set[int] = set()
    if boxes:
        area = {int(j): (b[2] - b[0] + 1) * (b[3] - b[1] + 1) for j, b in boxes.items() if 0 <= int(j) < n}
        ranked = sorted(area, key=lambda j: (-area[j], j))
        chosen.update(ranked[: k if boxed_only else max(1, k // 2)])
    if not boxed_only and n > 0:
        rest = k - len(chosen)
        if rest > 0:
            chosen.update(int(round(x)) for x in np.linspace(0, n - 1, min(rest, n)))
    return sorted(chosen)


def question_inputs(
    q: Question, memory: bool, max_video_frames: int = 8, entries: dict[str, Any] | None = None
) -> tuple[list[np.ndarray], str]:
    """The images and the prompt (one ``<image>`` per image) a model sees for question ``q``: the same
    for training (:class:`GSTQASource`) and for an agent answering mid-episode (``vla.agents.vla``).
    With ``memory``, ``entries`` are the memory's ``memory/*`` entries after fusing the question's
    stream (offline: replayed from the stream files; mid-episode: the agent's live memory)."""
    images: list[np.ndarray] = []
    lines: list[str] = []

    def add(label: str, imgs: list[np.ndarray], tags: list[str] | None = None) -> None:
        marks = [f"{t} <image>" for t in tags] if tags else ["<image>"] * len(imgs)
        lines.append(f"{label}: " + " ".join(marks))
        images.extend(np.array(np.asarray(im)[..., :3], dtype=np.uint8) for im in imgs)  # copies: media are cached

    visual = SUBTASKS[q.subtask].target == "visual" and "boxes" in q.media
    video_key = "clip_video" if "clip_video" in q.media else "video"
    if not memory:
        frames = q.get(video_key)
        idx = _frame_indices(len(frames), max_video_frames, q.get("boxes") if visual else None)
        add("Video frames" if video_key == "video" else "Video clip frames", [frames[j] for j in idx])
    else:
        entries = entries or {}
        if "topdown" in entries:
            add(
                "Top-down map of your spatial memory, built from the video (red: the path travelled, "
                "blue: its start, green arrow: where the video ended)",
                [entries["topdown"]],
            )
        if "text" in entries:
            where = "the current view" if "current_view" in q.media else "the end of the video"
            lines.append(
                f"Objects in your spatial memory (direction and distance from {where}; [target]: the object "
                "asked about): " + entries["text"]
            )
        if visual:
            frames = q.get(video_key)
            boxed = _frame_indices(len(frames), 2, q.get("boxes"), boxed_only=True)
            if boxed:
                add("Video frames where the target is marked", [frames[j] for j in boxed])
    if "current_view" in q.media:
        add("Current view", [q.get("current_view")])
    if "map" in q.media:
        add("Top-down map", [q.get("map")])
    if "options" in q.media:
        opts = q.get("options")
        add("Options", opts, list(CHOICES[: len(opts)]))
    return images, "\n".join(lines + [q.prompt])
