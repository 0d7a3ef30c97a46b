"""A memory of frames: the implicit-memory baseline beside the spatial map.

A policy with ``inputs.history=K`` sees, beside its current cameras, K earlier frames of one camera
(``inputs.history_camera``, default its first): the episode's first frame and K-1 more, evenly spaced
between it and now -- at step ``t`` the frames of steps ``i * t // K`` for ``i < K``
(:func:`frame_steps`). The rule is a pure function of ``t`` and ``K``, so the frames a demonstration's
sample at step ``t`` holds (``vla.data.DemoSource(frames=...)``) are the frames a live episode holds at
its step ``t`` (:class:`FrameMemory`, which keeps every frame it is shown). They are memory entries of
the observation, ``memory/frames/<i>`` (uint8 HxWx3), oldest first.

This is the fair comparison for the map (docs/LIBERO.md, "A memory suite"): the same frames the
spatial memory fuses, kept as pixels instead of a map -- what RoboMME's sampled-past-frames baseline
and a first-frame memory give a policy.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from envs.observation import Observation

PREFIX = "frames"


def frame_steps(t: int, k: int) -> list[int]:
    """The steps whose frames the memory shows at step ``t``: ``[i * t // k for i in range(k)]`` (the first
    frame, then evenly spaced; all before ``t`` except at ``t = 0``, where every one is the first frame)."""
    if k < 1 or t < 0:
        raise ValueError(f"frame_steps needs k >= 1 and t >= 0, got k={k}, t={t}")
    return [i * t // k for i in range(k)]


def frame_entries(read: Callable[[int], np.ndarray], t: int, k: int) -> dict[str, np.ndarray]:
    """``{"frames/<i>": read(step)}`` for the steps of :func:`frame_steps` (memory entries, without ``memory/``)."""
    return {f"{PREFIX}/{i}": np.asarray(read(s)) for i, s in enumerate(frame_steps(t, k))}


def frame_keys(k: int) -> list[str]:
    """The observation keys of a K-frame memory, in the order the policy shows them."""
    return [f"memory/{PREFIX}/{i}" for i in range(k)]


class FrameMemory:
    """Keeps every frame of ``camera`` an episode shows it and adds the K frames of :func:`frame_steps` to
    each observation (``memory/frames/<i>``). It must see every step: an observation whose step is not the
    next one (a skipped frame, a missing camera) is refused, never silently filled."""

    def __init__(self, k: int, camera: str) -> None:
        if int(k) < 1:
            raise ValueError(f"a frame memory keeps k >= 1 frames, got {k}")
        self.k, self.camera = int(k), str(camera)
        self._frames: list[np.ndarray] = []

    def reset(self, spec: Any = None) -> None:
        self._frames = []

    def __call__(self, observation: Observation) -> Observation:
        step = int(observation.step)
        if step != len(self._frames):
            raise RuntimeError(
                f"the frame memory has seen {len(self._frames)} steps but is shown step {step}: it needs every "
                "frame of the episode, from reset on"
            )
        frame = observation.cameras.get(self.camera)
        if frame is None:
            raise ValueError(
                f"the policy remembers frames of camera {self.camera!r} but the observation has cameras "
                f"{sorted(observation.cameras)} (is rendering off?)"
            )
        self._frames.append(np.array(frame.rgb, dtype=np.uint8, copy=True))  # an env may reuse its buffers
        entries = frame_entries(self._frames.__getitem__, step, self.k)
        return replace(observation, memory={**observation.memory, **entries})
