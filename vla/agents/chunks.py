"""The chunk broker: a policy that predicts chunks of actions, played out one step at a time.

A policy may answer one observation with a chunk ``(K, dim)`` of the next K actions (``policy.chunk``,
openpi's action horizon). :class:`ChunkBroker` sits between such a policy and the loop, which wants
one action per step, wherever the policy runs (in-process, ``agent=vla``; behind a server,
``agent=remote`` and ``agent=openpi``):

* ``replan = 0`` plays each chunk to its end, then asks again; ``replan = n`` plays its first ``n``
  actions only (the rest is dropped) and asks again;
* ``ensemble = m > 0`` asks every step and blends the overlapping predictions of the last chunks for
  this step with ACT's exponential weights ``w_i = exp(-m * i)`` (``i = 0`` the oldest prediction).

A single action ``(dim,)`` is passed through as it is (a policy without chunks).
"""

from __future__ import annotations

from collections import deque
from typing import Callable

import numpy as np


class ChunkBroker:
    """One action per call from a policy's chunks (see the module doc); ``reset()`` at every episode."""

    def __init__(self, replan: int = 0, ensemble: float = 0.0) -> None:
        if int(replan) < 0 or float(ensemble) < 0:
            raise ValueError(f"replan and ensemble must be >= 0, got {replan} and {ensemble}")
        self.replan, self.ensemble = int(replan), float(ensemble)
        self._queue: deque[np.ndarray] = deque()
        self._history: deque[tuple[int, np.ndarray]] = deque()  # ensemble: (step predicted, chunk)
        self._t = 0

    def reset(self) -> None:
        self._queue.clear()
        self._history.clear()
        self._t = 0

    @property
    def pending(self) -> int:
        """Actions of the current chunk still to be played (0: the next call asks the policy)."""
        return len(self._queue)

    def asks_next(self) -> bool:
        """Whether the next call asks the policy (and so reads the observation): no action of a chunk left
        to play (ensembling queues none: it asks every step)."""
        return self.pending == 0

    def __call__(self, predict: Callable[[], np.ndarray]) -> np.ndarray:
        """The next action; ``predict()`` (the policy's chunk for the current observation) is called
        only when a new prediction is due."""
        if self.ensemble > 0:
            chunk = _rows(predict())
            self._history.append((self._t, chunk))
            while self._history and self._t - self._history[0][0] >= len(self._history[0][1]):
                self._history.popleft()
            preds = np.stack([c[self._t - t0] for t0, c in self._history])  # oldest first
            w = np.exp(-self.ensemble * np.arange(len(preds)))
            action = (w[:, None] * preds).sum(0) / w.sum()
        else:
            if not self._queue:
                a = np.asarray(predict())
                if a.ndim == 1:  # a single action: nothing to queue
                    self._t += 1
                    return a
                self._queue.extend(_rows(a)[: self.replan or len(a)])
            action = self._queue.popleft()
        self._t += 1
        return action


def _rows(a) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or len(a) == 0:
        raise ValueError(f"a policy's chunk must be (K, dim) with K >= 1, got shape {a.shape}")
    return a
