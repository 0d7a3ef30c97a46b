"""``eval.backend=local``: episodes on this machine.

* ``workers >= 1``: that many forked worker processes (each builds its env lazily, after the fork,
  and keeps it while consecutive episodes share a task; forked by a fresh ``forkserver`` process
  when this one has Ray running, whose threads make a plain fork unsafe). A worker that crashes (a
  segfault in the simulator) is replaced and its episode run once more on the new worker; a second
  loss is an infrastructure error (not counted; the next run tries again). An episode that exceeds
  ``episode_timeout_s`` fails, with the reason recorded. Workers die with the parent
  (``PR_SET_PDEATHSIG``), so ``kill -9`` leaves nothing behind.
* ``workers = 0`` runs in-process (for debugging; no crash isolation).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from envs.registry import lazy_registrations

from .base import Episode, OnResult, failure_record, make_schedule


def run_local(spec, todo: list[Episode], on_result: OnResult) -> None:
    if not todo:
        return
    if int(spec.workers) == 0:
        from ..runner import EpisodeRunner

        try:
            runner = EpisodeRunner(spec)
        except Exception as exc:  # noqa: BLE001 - as a worker process that cannot start: stop, saying why
            raise WorkerStartupError(f"could not build the agent: {type(exc).__name__}: {exc}") from exc
        try:
            for job in todo:
                on_result(runner.run(*job))
        finally:
            runner.close()
    else:
        _run_pool(spec, todo, on_result)


class WorkerStartupError(ValueError):
    """A worker process could not build its env or agent (bad checkpoint, bad config): the run stops
    (a ValueError, so the CLIs print it as one line)."""


def _die_with_parent(parent_pid: int | None) -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    if parent_pid is not None and os.getppid() != parent_pid:  # parent died before prctl took effect
        os._exit(1)


def _worker_main(conn, spec, parent_pid: int | None, families: dict[str, str] | None = None) -> None:
    from envs.registry import register

    from ..runner import EpisodeRunner

    _die_with_parent(parent_pid)
    for name, path in (families or {}).items():  # a fork-server worker starts fresh: the parent's families
        if lazy_registrations().get(name) != path:
            register(name, path)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    try:
        runner = EpisodeRunner(spec)
    except Exception as exc:  # noqa: BLE001 - the env or agent cannot be built: say why, once, and stop
        conn.send({"startup_error": f"{type(exc).__name__}: {exc}"})
        return
    try:
        while True:
            job = conn.recv()
            if job is None:
                break
            conn.send(runner.run(*job))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        runner.close()


@dataclass
class _Worker:
    proc: mp.Process
    conn: Any
    job: Episode | None = None
    started: float = 0.0


def signal_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "unknown exit"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def _start_method() -> str:
    """``fork`` (fast, nothing to pickle), unless this process runs Ray's threads or has rendered with
    software GL (Mesa's llvmpipe and disk-cache threads): a child forked while another thread holds a
    lock waits on it forever (a forked worker hung in its first ``mjr_render``), so then ``forkserver``
    (a fresh server process that forks the workers)."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return "forkserver"
    return "forkserver" if _gl_threads() else "fork"


def _gl_threads() -> bool:
    """Whether this process runs Mesa's threads (a GL context was made here: llvmpipe workers, the
    shader disk cache), read from the thread names in ``/proc/self/task``."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # not Linux: no /proc
        return False
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                name = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith("llvmpipe") or "disk$" in name:
            return True
    return False


class _Pool:
    def __init__(self, spec, n: int) -> None:
        self.spec, self.ctx = spec, mp.get_context(_start_method())
        self.workers = [self._start() for _ in range(n)]

    def _start(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        ppid = os.getpid() if self.ctx.get_start_method() == "fork" else None  # else: the fork server's child
        families = None if ppid is not None else lazy_registrations()  # forked workers inherit them
        proc = self.ctx.Process(target=_worker_main, args=(child, self.spec, ppid, families), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def replace(self, w: _Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(5)
        w.conn.close()
        self.workers[self.workers.index(w)] = self._start()

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        deadline = time.time() + 10
        for w in self.workers:
            w.proc.join(max(0.0, deadline - time.time()))
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(2)

    def kill(self) -> None:
        for w in self.workers:
            if w.proc.is_alive():
                w.proc.kill()
            w.proc.join(2)


LOST_ATTEMPTS = 2  # a worker lost this many times on one episode: an infrastructure error
# the loop below looks at its workers at least once a second; a longer gap between two looks is time the
# run was suspended (SIGSTOP / Ctrl-Z, a host asleep), which no episode's timeout may count
PAUSE_GAP_S = 30.0


def _run_pool(spec, todo: list[Episode], on_result: OnResult) -> None:
    schedule = make_schedule(todo)
    pool = _Pool(spec, min(int(spec.workers), len(schedule)))
    lost: dict[tuple[int, int], int] = {}
    tick = time.time()
    try:
        while schedule or any(w.job for w in pool.workers):
            for w in pool.workers:
                if w.job is None and schedule:
                    job = schedule.next(id(w))
                    if job is not None:
                        w.job, w.started = job, time.time()
                        w.conn.send(w.job)
            busy = [w for w in pool.workers if w.job]
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
            now = time.time()
            if now - tick > PAUSE_GAP_S:  # suspended, workers and all: the pause is no episode's time
                for w in busy:
                    w.started += now - tick
            tick = now
            for w in busy:
                failure = None
                if w.conn in ready:
                    try:
                        rec = w.conn.recv()
                    except (EOFError, OSError):
                        w.proc.join(1)
                        failure = f"worker process died ({signal_text(w.proc.exitcode)})"
                    else:
                        if isinstance(rec, dict) and "startup_error" in rec:
                            # every worker would fail the same way: stop the run instead of failing each episode
                            raise WorkerStartupError(
                                f"a worker could not build the env or agent: {rec['startup_error']}"
                            )
                        w.job = None
                        on_result(rec)
                        continue
                elif w.proc.sentinel in ready or not w.proc.is_alive():
                    w.proc.join(1)
                    failure = f"worker process died ({signal_text(w.proc.exitcode)})"
                elif spec.episode_timeout_s and now - w.started > spec.episode_timeout_s:
                    failure = f"episode timed out after {spec.episode_timeout_s:.0f} s"
                if failure:
                    job, key = w.job, (int(w.job[0]), int(w.job[1]))
                    w.job = None
                    schedule.release(id(w))
                    pool.replace(w)
                    if failure.startswith("worker process died"):
                        lost[key] = lost.get(key, 0) + 1
                        if lost[key] < LOST_ATTEMPTS:
                            schedule.push_front(job)  # once more, on a fresh worker
                            continue
                        failure, infra = f"{failure} ({lost[key]} attempts)", "worker_lost"
                    else:
                        infra = None
                    on_result(failure_record(spec, job, time.time() - w.started, failure, infra))
        pool.close()
    except BaseException:
        pool.kill()
        raise
