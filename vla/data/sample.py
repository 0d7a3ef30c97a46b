"""``Sample`` (one training example, before the model's input transforms) and ``SampleSource`` (one dataset).

A :class:`Sample` is either an **action** sample -- the observation dict at step ``t`` of a
demonstration, exactly in the :meth:`~envs.observation.Observation.to_dict` layout, with the raw
actions ``a_t .. a_{t+K-1}`` -- or a **qa** sample: images, a prompt with one ``"<image>"`` marker
per image (in order) and the target answer text. The policy's input transforms turn either kind
into model inputs, in training and in inference alike.

A :class:`SampleSource` is one dataset under one key (the action statistics' key): a fixed,
deterministic list of samples grouped into episodes; ``subset`` restricts it to some episodes
(train/val splits are by episode, never by step: :func:`vla.data.split.split_by_episode`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

KINDS = ("action", "qa")


@dataclass
class Sample:
    dataset: str  # dataset key (the statistics key, e.g. "libero_spatial", "house_nav")
    episode: str  # episode id, unique within the dataset
    kind: str  # "action" | "qa"
    obs: dict[str, Any] | None = None  # action samples: Observation.to_dict() layout at step t (+ memory/*)
    actions: np.ndarray | None = None  # action samples: (K, D) raw actions a_t .. a_{t+K-1}, last one repeated
    images: list[np.ndarray] | None = None  # qa samples: uint8 HxWx3, in the order of the prompt's markers
    prompt: str | None = None  # qa samples: the question text with one "<image>" per image
    answer: str | None = None  # qa samples: the target answer text (GST answer format)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Sample.kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "action" and (self.obs is None or self.actions is None):
            raise ValueError(f"action sample {self.dataset}/{self.episode} needs obs and actions")
        if self.kind == "qa":
            if self.images is None or self.prompt is None or self.answer is None:
                raise ValueError(f"qa sample {self.dataset}/{self.episode} needs images, prompt and answer")
            markers = self.prompt.count("<image>")
            if markers != len(self.images):
                raise ValueError(
                    f"qa sample {self.dataset}/{self.episode}: the prompt has {markers} <image> markers "
                    f"but there are {len(self.images)} images"
                )


@runtime_checkable
class SampleSource(Protocol):
    """One dataset (see the module doc). ``sample(i)`` is deterministic: the same ``i``, the same Sample."""

    key: str

    def __len__(self) -> int: ...

    def sample(self, i: int) -> Sample: ...

    def episodes(self) -> list[str]: ...

    def episode_of(self, i: int) -> str: ...

    def actions(self) -> np.ndarray | None: ...

    def subset(self, episodes: set[str]) -> "SampleSource": ...


def check_index(source: Any, i: int) -> int:
    """``i`` as an int in ``[0, len(source))``, else ``IndexError`` naming the source."""
    n = len(source)
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"{type(source).__name__} {source.key!r}: sample index must be an int, got {i!r}")
    if not 0 <= int(i) < n:
        raise IndexError(f"{type(source).__name__} {source.key!r}: sample index {i} out of range [0, {n})")
    return int(i)


def check_episodes(source: Any, episodes: set[str] | list[str]) -> set[str]:
    """The episode ids as a set; ``ValueError`` naming any the source does not have."""
    wanted = set(episodes)
    unknown = sorted(wanted - set(source.episodes()))
    if unknown:
        raise ValueError(
            f"{type(source).__name__} {source.key!r} has no episode(s) {unknown[:5]}"
            + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else "")
        )
    return wanted


class SceneQuestions:
    """The :class:`SampleSource` bookkeeping of a question set (GST, spatial perception): ``_rows`` of
    questions, each naming its ``scene``, which is the episode (a split by episode is a split by
    scene); no actions."""

    _rows: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self._rows)

    def episodes(self) -> list[str]:
        return sorted({r["scene"] for r in self._rows})

    def episode_of(self, i: int) -> str:
        return self._rows[check_index(self, i)]["scene"]

    def actions(self) -> None:
        return None
