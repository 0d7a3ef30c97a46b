"""The frame-only control (vla/questions/single_frame.py): the memory answerer, given one frame -- the current
view, as the agent's sensors made it -- and nothing it saw before; on real generated apartments."""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
import pytest

from spatial_memory.profiles import PROFILES
from vla.gst.sensors import sensors_for
from vla.questions.answering import AnswererConfig, MemoryAnswerer
from vla.questions.question import MediaRef, load_questions
from vla.questions.single_frame import single_frame

from .test_gst_generate import qdir  # noqa: F401  (the generated question set fixture)


def test_a_question_with_a_current_view_keeps_that_view_alone(qdir):  # noqa: F811
    q = next(q for q in load_questions(qdir) if q.subtask == "EDv")
    qa = q.for_agent(sensors_for(PROFILES["realistic"], "house"))
    noisy_stream, noisy_view = qa.get("stream"), qa.get("current_sensors")
    one = single_frame(qa)
    (frame,) = one.get("stream")
    # the noisy view, not corrupted a second time, posed where the noisy stream ended
    assert np.array_equal(frame.rgb, noisy_view.rgb) and np.array_equal(frame.depth, noisy_view.depth)
    assert frame.labels == noisy_view.labels
    assert np.array_equal(frame.T_world_cam, noisy_stream[-1].T_world_cam)
    assert np.array_equal(one.current_pose, frame.T_world_cam)
    assert one.get("boxes") == {} and qa.get("boxes")  # the marks in earlier frames are gone
    assert not np.array_equal(noisy_stream[-1].rgb, frame.rgb)  # the view is not the video's last frame
    assert one.held_in_memory("stream") is False  # answered as offline, never from a live memory


def test_a_question_without_a_current_view_keeps_the_last_frame_and_its_map(qdir):  # noqa: F811
    q = next(q for q in load_questions(qdir) if q.subtask == "GPs")
    qa = q.for_agent()
    one = single_frame(qa)
    (frame,) = one.get("stream")
    assert frame is qa.get("stream")[-1]
    assert one.current_pose is None
    assert np.array_equal(one.get("map"), qa.get("map"))


def _with(question, **media):
    """``question`` with some media replaced by in-memory ones (each under a token of its own: no memory
    built from the original media is reused)."""
    new = {k: MediaRef(lambda v=v: v, lambda: f"test-{uuid.uuid4().hex}") for k, v in media.items()}
    return dataclasses.replace(question, media={**question.media, **new}, _cache={})


@pytest.mark.parametrize("code", ["EDv", "Pos", "GPv"])
def test_the_control_answers_from_its_one_frame_and_nothing_seen_before(qdir, code):  # noqa: F811
    """The control's answer is a function of its one frame (the current view; for GP, without one, the
    video's last frame) and of nothing earlier: the video before that frame replaced by another
    apartment's, or a live memory of the whole video offered (as mid-episode), the answer stays; that
    frame replaced by another apartment's, it changes. The memory answerer, which fuses the whole video,
    answers otherwise (the target is out of the current view, or, for GP, not in the last frame)."""
    q, other = [q.for_agent() for q in load_questions(qdir) if q.subtask == code][:2]
    full, control = MemoryAnswerer(), MemoryAnswerer(AnswererConfig(frame_only=True))
    answer = control.answer(q)
    assert answer.strip() and control._memory.n_frames == 1
    assert full.answer(q) != answer and full._memory.n_frames == len(q.get("stream")) > 1
    assert control.answer(q, live=full._memory) == answer  # the whole video in a live memory: not used
    stream, elsewhere = q.get("stream"), other.get("stream")
    assert len(elsewhere) > 1 and not np.array_equal(elsewhere[-2].rgb, stream[-2].rgb)
    # the last frame is kept: its pose is where the control places the current view (single_frame)
    assert control.answer(_with(q, stream=elsewhere[:-1] + stream[-1:])) == answer
    if "current_sensors" in q.media:
        assert control.answer(_with(q, current_sensors=other.get("current_sensors"))) != answer
    else:  # another apartment's last frame, at this video's last pose
        last = dataclasses.replace(elsewhere[-1], T_world_cam=stream[-1].T_world_cam, step=stream[-1].step)
        assert control.answer(_with(q, stream=stream[:-1] + [last])) != answer


def test_the_memory_agent_option_selects_the_control_and_refuses_other_values():
    from vla.agents.map_agent import MemoryAgent

    assert MemoryAgent(answer_from="frame").memory_answers.answerer().cfg.frame_only is True
    assert MemoryAgent().memory_answers.answerer().cfg.frame_only is False
    with pytest.raises(ValueError, match="answer_from"):
        MemoryAgent(answer_from="video")
