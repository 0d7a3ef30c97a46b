"""Answering GST questions from a :class:`SpatialMemory` (the memory agent's brain).

The answerer sees only what an agent is given (:meth:`Question.for_agent`): the video and its sensor
stream (depth, instance masks, odometry poses), the current view (offline: without a pose) and the
top-down images. It builds a memory from the stream (or uses the agent's live memory mid-episode),
localises an offline current view against it, registers its own top-down render to the image it is
shown, and answers in the benchmark's formats. It never touches scene truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spatial_memory import SpatialMemory
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import backproject, camera_yaw, egocentric_bearing, transform_points

from .answers import format_answer
from .question import Question
from .subtasks import CHOICES, SUBTASKS

RED = np.array([220, 30, 30])


def _locate_in_stream(stream: list[CameraFrame], boxes: dict[int, list[int]] | None, instances) -> np.ndarray:
    """Median world point of the pixels of ``instances(frame)`` (inside ``boxes[frame index]`` when
    given) over the recorded frames: depth back-projected with each frame's own pose."""
    pts = []
    for idx, f in enumerate(stream):
        if f.instance is None or (boxes is not None and idx not in boxes):
            continue
        ids = instances(f)
        if not ids:
            continue
        x0, y0, x1, y1 = boxes[idx] if boxes is not None else (0, 0, f.instance.shape[1] - 1, f.instance.shape[0] - 1)
        inst = f.instance[y0 : y1 + 1 : 2, x0 : x1 + 1 : 2]
        sel = np.isin(inst, ids)
        if not sel.any():
            continue
        K = np.array(f.K, dtype=np.float64)
        K[:2] /= 2  # every 2nd pixel ...
        K[0, 2] -= x0 / 2  # ... of the crop
        K[1, 2] -= y0 / 2
        p = backproject(f.depth[y0 : y1 + 1 : 2, x0 : x1 + 1 : 2], K)
        sel &= np.isfinite(p).all(axis=-1) & (p[..., 2] > 0)
        pts.append(transform_points(f.T_world_cam, p[sel]))
    if not pts:
        raise LookupError("the target appears in none of the recorded frames")
    return np.median(np.concatenate(pts), axis=0)


@dataclass
class AnswererConfig:
    tabletop: bool = False  # LIBERO-scale memory (MemoryConfig.tabletop())
    perception: str = "gt"  # the sensors the media come from (memory settings: memory_config_for)
    overrides: dict | None = None  # MemoryConfig fields on top


class MemoryAnswerer:
    def __init__(self, cfg: AnswererConfig | None = None) -> None:
        self.cfg = cfg or AnswererConfig()
        self._cache_key: Any = None
        self._memory: SpatialMemory | None = None
        self._registrations: dict[tuple, Any] = {}

    # ------------------------------------------------------------------ memory
    def _new_memory(self) -> SpatialMemory:
        from vla.transforms.memory import memory_config_for

        return SpatialMemory(config=memory_config_for(self.cfg.perception, self.cfg.tabletop, self.cfg.overrides))

    def memory_for(self, question: Question, live: SpatialMemory | None = None) -> SpatialMemory:
        """Mid-episode (the question's video is the episode so far, held in memory, not in files), the
        agent's live memory, which fused exactly that video; offline, a memory built from the
        question's own sensor stream."""
        stream_ref = question.media.get("stream")
        mid_episode = stream_ref is not None and not isinstance(stream_ref, (str, Path))
        if live is not None and live.n_frames > 0 and (mid_episode or question.current_pose is not None):
            return live
        stream = question.get("stream")
        # a mid-episode stream without a live memory is a list that grows between checkpoints:
        # its length is part of the key
        key = (stream_ref if isinstance(stream_ref, (str, Path)) else (id(stream), len(stream)), question.root)
        if key != self._cache_key:
            memory = self._new_memory()
            for f in stream:
                memory.integrate(f)
            self._memory, self._cache_key, self._registrations = memory, key, {}
        return self._memory

    # ------------------------------------------------------------------ geometry of the question
    def current_T(self, question: Question, memory: SpatialMemory) -> np.ndarray:
        if question.current_pose is not None:
            return np.asarray(question.current_pose, dtype=np.float64)
        view: CameraFrame = question.get("current_sensors")
        loc = memory.localize(view)
        return loc.T_world_cam

    def target(self, question: Question, memory: SpatialMemory) -> np.ndarray:
        """Centre (memory frame, 3D) of the object the question is about: by category (semantic) or by
        the red box (visual). A target the memory's registry does not hold (a thin object whose
        samples were carved away) is located from its own pixels in the video's depth and poses."""
        stream = question.get("stream")
        if SUBTASKS[question.subtask].target == "semantic":
            category = question.meta["category"]
            try:
                return memory.object(category).center
            except (KeyError, LookupError):
                return _locate_in_stream(stream, None, lambda f: [i for i, c in f.labels.items() if c == category])
        boxes = {int(k): v for k, v in question.get("boxes").items()}
        votes: dict[int, int] = {}
        for idx, (x0, y0, x1, y1) in boxes.items():
            if idx >= len(stream) or stream[idx].instance is None:
                continue
            ids, counts = np.unique(stream[idx].instance[y0 : y1 + 1, x0 : x1 + 1], return_counts=True)
            for i, c in zip(ids, counts):
                if i > 0:
                    votes[int(i)] = votes.get(int(i), 0) + int(c)
        if not votes:
            raise LookupError("no instance inside the red boxes")
        instance = max(votes, key=votes.get)
        try:
            return memory.object(instance).center
        except (KeyError, LookupError):
            return _locate_in_stream(stream, boxes, lambda f: [instance])

    def registration(self, memory: SpatialMemory, image: np.ndarray, level: str):
        """The memory's registration to ``image``, cached per (memory state, image, level). A live
        memory grows between mid-episode checkpoints: an early, partial registration is never reused."""
        key = (id(memory), memory.n_frames, id(image), level)
        hit = self._registrations.get(key)
        if hit is None or hit[0] is not memory or hit[1] is not image:  # ids of collected objects are reused
            if len(self._registrations) > 64:
                self._registrations.clear()
            hit = self._registrations[key] = (memory, image, memory.register_topdown(image, level))
        return hit[2]

    # ------------------------------------------------------------------ answers
    def answer(self, question: Question, live: SpatialMemory | None = None) -> str:
        code = question.subtask
        memory = self.memory_for(question, live)
        kind = SUBTASKS[code].answer_type
        if code in ("EDv", "EDs", "EDistv", "EDists"):
            direction, distance = egocentric_bearing(self.current_T(question, memory), self.target(question, memory))
            return format_answer(kind, direction if kind == "angle" else distance)
        level = question.meta.get("level", "easy")
        if code in ("GPv", "GPs"):
            reg = self.registration(memory, question.get("map"), level)
            return format_answer("point", reg.odom_to_grid(self.target(question, memory)[:2]))
        if code in ("Pos", "Ori"):
            T = self.current_T(question, memory)
            reg = self.registration(memory, question.get("map"), level)
            if code == "Pos":
                return format_answer("point", reg.odom_to_grid(T[:2, 3]))
            return format_answer("angle", reg.yaw_to_heading(camera_yaw(T)))
        if code.startswith("TDS"):
            scores = [self.registration(memory, img, level).score for img in question.get("options")]
            return format_answer("choice", CHOICES[int(np.argmax(scores))])
        if code == "Traj":
            return format_answer("choice", self._trajectory_choice(question, memory, level))
        raise ValueError(f"cannot answer subtask {code!r}")

    def _trajectory_choice(self, question: Question, memory: SpatialMemory, level: str) -> str:
        options = question.get("options")
        clip: list[CameraFrame] = question.get("clip_stream")
        reg = self.registration(memory, options[0], level)
        mine = np.asarray(reg.odom_to_pixel(np.array([f.T_world_cam[:2, 3] for f in clip])), dtype=np.float64).reshape(
            -1, 2
        )
        costs = []
        for img in options:
            red = np.argwhere(np.all(np.abs(img.astype(int) - RED) < 40, axis=-1))[:, ::-1].astype(np.float64)  # (u, v)
            if len(red) == 0:
                costs.append(np.inf)
                continue
            d_mine = np.min(np.hypot(*(mine[:, None, :] - red[None, :, :]).transpose(2, 0, 1)), axis=1)
            sub = red[:: max(1, len(red) // 400)]
            d_red = np.min(np.hypot(*(sub[:, None, :] - mine[None, :, :]).transpose(2, 0, 1)), axis=1)
            costs.append(float(np.mean(d_mine) + np.mean(d_red)))
        return CHOICES[int(np.argmin(costs))]
