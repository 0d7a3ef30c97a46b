"""``GSTQASource``: GST-Bench question sets (``vla-gst generate``) as visual question answering samples.

One sample per question; its episode is the question's **scene** (questions of a scene share their
video, so a train/val split by episode never lets a scene's video leak across). Questions are read
through :func:`vla.questions.question.load_questions`; the answer is
:func:`vla.questions.answers.format_answer` of the question's typed answer (what a perfect model says).

Images, in the order the question's prompt refers to them, each marked ``<image>`` in the prompt
(:func:`vla.policy.question_inputs.question_inputs`, which an agent answering asks through too):

* the video: ``max_video_frames`` frames spread evenly over it (Traj: its short clip); the media's
  red boxes on visual targets are kept, and for a visual target half of the frames (at least one)
  are those with the largest boxes, so the target is marked in the frames shown;
* the current view (ED*, Pos, Ori), the top-down map (GP*, Pos, Ori), the options A-D (TDS, Traj).

With ``memory`` (a :class:`~vla.transforms.map_inputs.MemoryInputsConfig`), the video frames are
replaced by what the spatial memory makes of the question's sensor stream (depth, instance masks,
odometry poses: what an agent is given): its top-down map (``memory/topdown``) and object table
text (``memory/text``) after fusing the stream (Traj: the clip's stream); visual targets keep up to
two of their boxed frames. The table is measured from the question's current view (where the
memory localises it) and led by its target as the memory resolves it
(:func:`~vla.policy.question_map.question_entries`). Current view, map and options stay. Each
stream is fused once (:class:`~vla.policy.question_map.StreamMemoryCache`; on disk under
``cache_dir`` when given, so data-loader workers and later runs share it).

``subtasks`` keeps the questions of some subtasks only (``data.tasks``): with a mixture of two such
sources a training run weights some subtasks up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vla.policy.question_inputs import question_inputs
from vla.policy.question_map import StreamMemoryCache, stream_key_of
from vla.questions.answers import format_answer
from vla.questions.question import Question, load_questions
from vla.questions.subtasks import SUBTASKS
from vla.transforms.map_inputs import MemoryInputsConfig

from .sample import Sample, SceneQuestions, check_episodes, check_index


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
        subtasks: list[str] | None = None,
    ) -> None:
        root = Path(questions_dir)
        questions = load_questions(root)
        if not questions:
            raise ValueError(f"{root / 'questions.jsonl'} holds no questions")
        if subtasks is not None:
            unknown = sorted(set(subtasks) - set(SUBTASKS))
            if unknown or not subtasks:
                raise ValueError(f"GST subtasks must be a non-empty subset of {list(SUBTASKS)}, got {list(subtasks)}")
            questions = [q for q in questions if q.subtask in set(subtasks)]
            if not questions:
                raise ValueError(f"{root / 'questions.jsonl'} holds no questions of subtasks {list(subtasks)}")
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
