"""Dynamic batching: one inference thread owns the policy; ``infer`` calls of many sessions share a batch.

Every call that touches the policy (``reset``, ``infer``, ``close``) is a job on one queue, run by
one thread in arrival order, so the policy needs no locks and a session's reset is always applied
before its next infer. ``infer`` jobs are gathered into a batch: after the first one arrives the
thread keeps collecting for at most ``max_wait_ms`` -- and only while fewer sessions than
``min(max_batch, expected())`` are in the batch, where ``expected()`` is the number of sessions that
could still send one (so a single client never waits) -- then calls ``policy.infer_batch`` once. A
batch holds at most one observation per session; a second one waits for the next batch. A control
job that arrives while gathering closes the batch and runs right after it.

``idle`` is set whenever no batch or control job is running: query threads wait on it (briefly),
so reading the map never competes with inference for the interpreter (see docs/SERVING.md).
"""

from __future__ import annotations

import logging
import queue
import threading
import traceback
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from .policy import BatchPolicy

log = logging.getLogger("vla.serve")
Callback = Callable[[Any, dict[str, Any]], None]  # (result or exception, timing)


@dataclass
class Job:
    kind: str  # "infer" | "control"
    callback: Callback
    session: str | None = None
    observation: Any = None
    fn: Callable[[], Any] | None = None
    received: float = field(default_factory=time.perf_counter)


class Batcher:
    """The inference thread (see the module doc)."""

    def __init__(
        self,
        policy: BatchPolicy,
        max_batch: int = 8,
        max_wait_ms: float = 2.0,
        expected: Callable[[], int] | None = None,
    ) -> None:
        if int(max_batch) < 1 or float(max_wait_ms) < 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_ms >= 0, got {max_batch}, {max_wait_ms}")
        self.policy, self.max_batch, self.max_wait = policy, int(max_batch), float(max_wait_ms) / 1000.0
        self.expected = expected or (lambda: self.max_batch)
        self.idle = threading.Event()
        self.idle.set()
        self._q: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._held: deque[Job] = deque()  # jobs taken off the queue but not yet run (order kept)
        self._thread = threading.Thread(target=self._run, name="vla-serve-inference", daemon=True)
        self.stats = {"batches": 0, "items": 0, "max_batch_seen": 0, "errors": 0}

    def start(self) -> "Batcher":
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._q.put(None)
        self._thread.join(timeout)

    # ------------------------------------------------------------------ submitting (any thread)
    def infer(self, session: str, observation: Any, callback: Callback) -> None:
        self._q.put(Job("infer", callback, session=session, observation=observation))

    def control(self, fn: Callable[[], Any], callback: Callback) -> None:
        self._q.put(Job("control", callback, fn=fn))

    # ------------------------------------------------------------------ the thread
    def _next(self, timeout: float | None) -> Job | None | str:
        if self._held:
            return self._held.popleft()
        try:
            return self._q.get(timeout=timeout) if timeout is None or timeout > 0 else self._q.get_nowait()
        except queue.Empty:
            return "empty"

    def _want(self) -> int:
        try:
            return min(self.max_batch, max(1, int(self.expected())))
        except Exception:  # noqa: BLE001 - a failing estimate must not stop inference
            return self.max_batch

    def _run(self) -> None:
        while True:
            try:
                if not self._step():
                    return
            except Exception:  # noqa: BLE001 - the inference thread must outlive any one job
                log.error("inference thread: %s", traceback.format_exc())

    def _step(self) -> bool:
        """One job or one batch; False when told to stop."""
        job = self._next(None)
        if job is None:
            return False
        if job.kind == "control":
            self._run_control(job)
            return True
        batch, later = [job], []
        sessions = {job.session}
        deadline = time.perf_counter() + self.max_wait
        stop = False
        while len(batch) < self._want():
            nxt = self._next(deadline - time.perf_counter())
            if nxt == "empty":
                break
            if nxt is None:
                stop = True
                break
            if nxt.kind == "control" or nxt.session in sessions:
                later.append(nxt)
                if nxt.kind == "control":
                    break
                continue
            batch.append(nxt)
            sessions.add(nxt.session)
        self._run_batch(batch)
        self._held.extendleft(reversed(later))
        return not stop

    def _run_control(self, job: Job) -> None:
        self.idle.clear()
        t0 = time.perf_counter()
        try:
            result: Any = job.fn()
        except Exception as exc:  # noqa: BLE001 - the caller gets the exception as its reply
            result = exc
        finally:
            self.idle.set()
        job.callback(result, {"queue_ms": (t0 - job.received) * 1e3, "infer_ms": (time.perf_counter() - t0) * 1e3})

    def _run_batch(self, batch: list[Job]) -> None:
        self.idle.clear()
        t0 = time.perf_counter()
        try:
            results = self.policy.infer_batch([j.session for j in batch], [j.observation for j in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"infer_batch returned {len(results)} results for {len(batch)} observations")
        except Exception as exc:  # noqa: BLE001 - a failing policy fails this batch's replies, not the server
            results = [exc] * len(batch)
        finally:
            self.idle.set()
        t1 = time.perf_counter()
        self.stats["batches"] += 1
        self.stats["items"] += len(batch)
        self.stats["max_batch_seen"] = max(self.stats["max_batch_seen"], len(batch))
        for j, r in zip(batch, results):
            if isinstance(r, Exception):
                self.stats["errors"] += 1
            j.callback(r, {"queue_ms": (t0 - j.received) * 1e3, "infer_ms": (t1 - t0) * 1e3, "batch_size": len(batch)})
