"""Which episode a worker runs next: consecutive trials of one task per worker.

LIBERO's episodes depend on the order an env ran them in (the fixtures' placement comes from a
random stream that every reset advances; :meth:`envs.libero.env.LiberoEnv.reset` replays what a
worker skipped). Handing each worker a *lane* -- a run of consecutive trials of one task -- keeps
its env on the sequential stream, so nothing is replayed except when a lane is split: a worker
with nothing left takes the second half of the longest lane still pending (it replays the resets
up to that trial once). Every env family is scheduled this way; for the others it only keeps an
env alive across more episodes. It offers the interface of
:class:`vla.eval.backends.base.FifoSchedule` (``next``, ``release``, ``push_front``, ``pending``).
"""

from __future__ import annotations

from collections import deque
from typing import Hashable

Episode = tuple  # (task_id, trial, task name)


class LaneSchedule:
    def __init__(self, episodes: list[Episode], min_split: int = 4) -> None:
        by_task: dict[int, list[Episode]] = {}
        for e in episodes:
            by_task.setdefault(int(e[0]), []).append(e)
        self.lanes: list[deque] = [deque(sorted(v, key=lambda e: e[1])) for v in by_task.values()]
        self.owner: dict[int, Hashable] = {}  # lane index -> worker
        self.current: dict[Hashable, int] = {}  # worker -> lane index
        self.min_split = int(min_split)
        self.front: deque = deque()  # retries, before any lane

    def __len__(self) -> int:
        return len(self.front) + sum(len(lane) for lane in self.lanes)

    def __bool__(self) -> bool:
        return bool(self.front) or any(self.lanes)

    def next(self, worker: Hashable) -> Episode | None:
        """The next episode for ``worker`` (None when nothing is left to hand out)."""
        if self.front:
            return self.front.popleft()
        i = self.current.get(worker)
        if i is not None and self.lanes[i]:
            return self.lanes[i].popleft()
        for j, lane in enumerate(self.lanes):  # a lane nobody runs
            if lane and self.owner.get(j) in (None, worker):
                return self._take(worker, j)
        j = max(range(len(self.lanes)), key=lambda k: len(self.lanes[k]), default=None)
        if j is None or not self.lanes[j]:
            return None
        lane = self.lanes[j]
        if len(lane) >= self.min_split:  # the second half of the longest lane becomes ours
            half = len(lane) // 2
            tail = deque(list(lane)[half:])
            for _ in range(len(tail)):
                lane.pop()
            self.lanes.append(tail)
            return self._take(worker, len(self.lanes) - 1)
        return self._take(worker, j)  # short lanes are shared

    def _take(self, worker: Hashable, j: int) -> Episode:
        old = self.current.get(worker)
        if old is not None and self.owner.get(old) == worker:
            del self.owner[old]
        self.owner[j] = worker
        self.current[worker] = j
        return self.lanes[j].popleft()

    def release(self, worker: Hashable) -> None:
        """``worker`` is gone (crashed, replaced): its lane is free for anyone."""
        j = self.current.pop(worker, None)
        if j is not None and self.owner.get(j) == worker:
            del self.owner[j]

    def push_front(self, job: Episode) -> None:
        """Hand ``job`` out next, to whichever worker asks first (a retry)."""
        self.front.appendleft(job)

    def pending(self) -> list[Episode]:
        return list(self.front) + [e for lane in self.lanes for e in lane]
