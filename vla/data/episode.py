"""``DemoEpisode``: one demonstration as every dataset reader and writer here sees it.

Images are in the evaluation protocol's orientation (LIBERO's OpenGL buffers turned by 180
degrees, what a policy sees at evaluation), whatever the file stored; ``state`` is the protocol's
8-dim state (end-effector position, axis-angle, the two finger joints); ``actions[t]`` was taken
on the observation at ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

CAMERA_KEYS = ("agentview", "wrist")  # protocol camera names (LiberoEnv's)


@dataclass
class DemoEpisode:
    task: str  # the language instruction
    actions: np.ndarray  # (T, 7) float
    state: np.ndarray  # (T, 8) float32
    images: dict[str, np.ndarray] = field(default_factory=dict)  # camera -> (T, H, W, 3) uint8
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # joint_states, sim states, ...
    meta: dict[str, Any] = field(default_factory=dict)  # source file, demo name, task name, trial ...

    def __post_init__(self) -> None:
        self.actions = np.asarray(self.actions)
        self.state = np.asarray(self.state)
        T = len(self.actions)
        if self.actions.ndim != 2 or self.actions.shape[1] != 7:
            raise ValueError(f"episode actions must be (T, 7), got {self.actions.shape}")
        if self.state.shape != (T, 8):
            raise ValueError(f"episode state must be ({T}, 8) to match {T} actions, got {self.state.shape}")
        for name, im in self.images.items():
            if im.ndim != 4 or im.shape[0] != T or im.shape[-1] != 3 or im.dtype != np.uint8:
                raise ValueError(f"episode images[{name!r}] must be ({T}, H, W, 3) uint8, got {im.shape} {im.dtype}")

    def __len__(self) -> int:
        return len(self.actions)
