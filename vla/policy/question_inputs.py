"""A GST question's inputs for the policy: the images and the prompt a model sees for it.

One function, :func:`question_inputs`, for training (:class:`~vla.data.gst_qa.GSTQASource`) and for an
agent answering (``vla.agents.vla``), so a model is asked exactly as it was taught. Images, in the order
the prompt refers to them, each marked ``<image>``:

* the video: up to ``max_video_frames`` frames spread evenly over it (Traj: its short clip); for a visual
  target half of them (at least one) are those with the largest red boxes, so the target is marked;
* with memory inputs instead of the video: the memory's top-down map (``memory/topdown``) and object
  table (``memory/text``) of the question's stream (:mod:`vla.policy.question_map`), and up to two of a
  visual target's boxed frames;
* the current view, the top-down map and the options A-D, when the question has them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vla.questions.question import Question
from vla.questions.subtasks import CHOICES, SUBTASKS


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
