"""What every backend shares: the episode tuple, the record of an episode that never reported, and
the schedule that hands episodes to workers.

A backend runs a todo list of ``(task_id, trial, task name)`` episodes and calls ``on_result(record)``
once per episode, in the driver process, as each one finishes; the evaluator does everything else
(plan, ``episodes.jsonl``, side logs, summary), so the backends cannot drift apart on those.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Hashable, Iterable

Episode = tuple  # (task_id, trial, task name)
OnResult = Callable[[dict[str, Any]], None]


def failure_record(spec, job: Episode, seconds: float, error: str, infra: str | None = None) -> dict[str, Any]:
    """The row of an episode whose worker never reported (died, lost, timed out); ``infra``: the kind
    of infrastructure error when it is not a result of the policy (a worker lost on every attempt)."""
    from ..runner import suite_name

    task_id, trial, name = job
    return {
        "env": spec.env["name"],
        "suite": suite_name(spec.env),
        "task_id": task_id,
        "task": name,
        "trial": trial,
        "success": False,
        "steps": 0,
        "seconds": round(seconds, 3),
        "error": error,
        **({"infra": infra} if infra else {}),
    }


class FifoSchedule:
    """Episodes in plan order, first come first served.

    The interface every schedule offers the backends: ``next(worker)`` (the next episode for that
    worker, None when nothing is left), ``release(worker)`` (the worker is gone), ``push_front(job)``
    (run this one next, e.g. a retry), ``pending()``, ``len()`` and truth."""

    def __init__(self, episodes: Iterable[Episode]) -> None:
        self._queue: deque = deque(episodes)

    def __len__(self) -> int:
        return len(self._queue)

    def __bool__(self) -> bool:
        return bool(self._queue)

    def next(self, worker: Hashable) -> Episode | None:
        return self._queue.popleft() if self._queue else None

    def release(self, worker: Hashable) -> None:
        pass

    def push_front(self, job: Episode) -> None:
        self._queue.appendleft(job)

    def pending(self) -> list[Episode]:
        return list(self._queue)


def make_schedule(episodes: Iterable[Episode]):
    """Consecutive trials of one task per worker (:class:`vla.eval.schedule.LaneSchedule`: LIBERO's
    episodes follow the env's sequential random stream, which a worker replays when it skips)."""
    from ..schedule import LaneSchedule

    return LaneSchedule(list(episodes))
