"""Which of a TDS question's maps shows the scene (MemoryAnswerer.scene_choice): offline the whole memory must
fill the right map; mid-episode, and in the frame-only control, the registration score alone decides."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from spatial_memory.frame import CameraFrame
from vla.questions.answering import AnswererConfig, MemoryAnswerer
from vla.questions.question import Question

# option 0: the best score, but the memory squeezed into a corner of it; option 1: a lower score, filled
FITS = [SimpleNamespace(score=0.45, extent_overlap=0.08), SimpleNamespace(score=0.40, extent_overlap=0.93)]


class Stub(MemoryAnswerer):
    def registration(self, memory, image, level):
        return FITS[int(image[0, 0, 0])]


def question(stream) -> Question:
    options = [np.full((4, 4, 3), i, dtype=np.uint8) for i in range(len(FITS))]
    return Question(
        id="q", subtask="TDS-M", scene="house/val/800000", prompt="", media={"stream": stream, "options": options}
    )


def test_offline_the_map_the_whole_memory_fills_wins():
    q = question("video.npz")  # a file: an offline question, the video explores the whole scene
    assert not q.held_in_memory("stream")
    assert Stub().scene_choice(q, None, "medium") == 1


def test_mid_episode_and_frame_only_go_by_the_score():
    frame = CameraFrame(np.zeros((2, 2, 3), np.uint8), np.ones((2, 2), np.float32), np.eye(3), np.eye(4))
    live = question([frame])  # the agent's own frames: part of the scene so far
    assert live.held_in_memory("stream")
    assert Stub().scene_choice(live, None, "medium") == 0
    assert Stub(AnswererConfig(frame_only=True)).scene_choice(question("video.npz"), None, "medium") == 0
