"""The frame-only control of GST (docs/GST.md, "Frame-only control"): a question as a perceiver
that keeps no memory sees it -- one frame, its current view, and nothing it saw before.

:func:`single_frame` rewrites a question (as an agent got it, sensors applied) so that the memory
answerer, unchanged, answers from that one frame: the stream becomes the current view alone (for a
question without a current view -- GP, TDS, Traj -- the stream's last frame), and the red boxes, which
mark the target in *earlier* frames of the video, are gone. The maps, the answer options and a Traj
clip stay: they are what the question asks about, not what the agent remembers. The geometry that
turns detections into answers is the memory answerer's own, so the gap between this control and the
memory agent, under the same perception profile and detector, is what integrating frames is worth.
"""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np

from .question import SENSOR_MEDIA, MediaRef, Question


def _ref(value, token: str) -> MediaRef:
    return MediaRef(lambda: value, lambda: token)


def single_frame(question: Question) -> Question:
    """``question`` restricted to one frame (see the module doc). The current view of an offline question
    has no pose: it is placed at the pose of the stream's last frame (any upright pose would do: every
    answer is relative to the view, or registered to a map) and given as the question's current pose,
    so the answerer does not have to localise a view in a memory made of that view."""
    stream = question.get("stream")
    if not stream:
        raise ValueError(f"question {question.id} has an empty stream: no frame to answer from")
    last = stream[-1]
    if "current_sensors" in question.media:
        pose = question.current_pose if question.current_pose is not None else last.T_world_cam
        pose = np.asarray(pose, dtype=np.float64)
        frame = dataclasses.replace(question.get("current_sensors"), T_world_cam=pose, step=last.step + 1)
        current_pose = pose
    else:
        frame, current_pose = last, question.current_pose
    token = f"single-frame-{uuid.uuid4().hex}"  # never the token of a whole stream: no cached memory is reused
    media = dict(question.media)
    media["stream"] = _ref([frame], token)
    if "current_sensors" in media:
        media["current_sensors"] = _ref(frame, token + "-view")
    for key in SENSOR_MEDIA:  # the rest as the agent's sensors made them (not corrupted a second time)
        if key in media and key not in ("stream", "current_sensors"):
            media[key] = _ref(question.get(key), f"{token}-{key}")
    if "boxes" in media:
        media["boxes"] = _ref({}, token + "-boxes")
    return dataclasses.replace(question, media=media, current_pose=current_pose, sensors=None, _cache={})
