"""``eval.backend=ray``: episodes on a Ray cluster, results streamed back to the driver.

The driver (``vla-rollout``) keeps everything that makes a run resumable -- the plan, ``episodes.jsonl``,
the side logs, the summary -- exactly as with the local backend; only where an episode runs changes.

* Every worker is a Ray **actor**: one process that builds its env lazily (so GL contexts are
  created in the worker, never forked) and keeps it while consecutive episodes share a task, as a
  local worker does. Actors are placed by ``ray.num_cpus`` / ``ray.num_gpus`` / ``ray.resources``;
  ``eval.workers`` actors are started (0: as many as the cluster has room for).
* A worker that is **lost** (its node went away, its process was killed or segfaulted) costs only
  the episode it was running: that episode is run again on a fresh worker up to ``ray.retries``
  times (1), then recorded as an infrastructure error with the reason (not counted; the next run
  of the same command tries it again). An episode over ``eval.episode_timeout_s`` is
  failed and its worker replaced (a hang is not retried).
* The actors belong to the driver's job: when the driver dies (``kill -9``), Ray ends them. Run the
  same command again to resume; finished episodes are never run twice.
* ``ray.serve=true``: the agent runs once, in a ``vla-serve`` actor (``ray.serve_num_gpus`` places it
  on a GPU), and every worker plays it as ``agent=remote``, its own session on that server.

Files that workers write themselves (videos under ``out/videos``, demonstrations under ``record=``)
land on the worker's machine: on a multi-node cluster point ``out`` and ``record`` at a filesystem
every node mounts. Ray is imported only here, only when this backend is chosen.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from .base import Episode, OnResult, failure_record, make_schedule
from .options import RayOptions


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ValueError(
            "backend=ray needs Ray: pip install -e '.[ray]' (ray==2.60.0, pinned in requirements.lock)"
        ) from exc
    return ray


def _runtime_env(options: RayOptions) -> dict[str, Any]:
    env = dict(options.runtime_env)
    env_vars = {k: os.environ[k] for k in options.forward_env if k in os.environ}
    if "PYTHONPATH" in options.forward_env:  # this checkout's packages, where the nodes share the path
        root = str(Path(__file__).resolve().parents[3])
        parts = [p for p in env_vars.get("PYTHONPATH", "").split(os.pathsep) if p]
        env_vars["PYTHONPATH"] = os.pathsep.join([root] + [p for p in parts if p != root])
    env_vars.update(env.get("env_vars") or {})
    if env_vars:
        env["env_vars"] = env_vars
    return env


@contextmanager
def connected(options: RayOptions) -> Iterator[Any]:
    """Ray, initialised for ``options`` (an already initialised Ray is used as it is, and left running)."""
    import logging

    ray = import_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"runtime_env": _runtime_env(options), "logging_level": logging.WARNING}
        if options.address is None:  # a fresh instance on this machine, gone with the driver
            kwargs.update(address="local", include_dashboard=False)
            if options.local_cpus:
                kwargs["num_cpus"] = int(options.local_cpus)
        else:
            kwargs["address"] = options.address
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ValueError(f"cannot connect to Ray at ray.address={options.address!r}: {exc}") from exc
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def capacity(ray, options: RayOptions, reserved: dict[str, float] | None = None) -> int:
    """How many workers of ``options``' size the cluster has room for now (after ``reserved``)."""
    total = dict(ray.cluster_resources())
    for k, v in (reserved or {}).items():
        total[k] = total.get(k, 0.0) - v
    need = {"CPU": float(options.num_cpus), "GPU": float(options.num_gpus), **options.resources}
    counts = [int(total.get(k, 0.0) // v) for k, v in need.items() if v > 0]
    return max(0, min(counts)) if counts else 0


# ----------------------------------------------------------------------------- actors
class EpisodeWorker:
    """One worker process: an :class:`~vla.eval.runner.EpisodeRunner` (agent, subscribers, env)."""

    def __init__(self, spec) -> None:
        from ..runner import EpisodeRunner

        self.runner = EpisodeRunner(spec)

    def where(self) -> tuple[str, int]:
        return socket.gethostname(), os.getpid()

    def run(self, job: Episode) -> dict[str, Any]:
        return self.runner.run(*job)

    def close(self) -> None:
        self.runner.close()


class ServeActor:
    """``vla-serve`` in an actor: the agent once, for every worker (``ray.serve=true``)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from vla.serve.cli import build_server

        self.server = build_server(cfg).start()

    def url(self) -> str:
        host = self.server.cfg.host
        if host in ("0.0.0.0", "::", ""):
            import ray

            host = ray.util.get_node_ip_address()
        return f"ws://{host}:{self.server.port}"

    def stop(self) -> None:
        self.server.stop()


def _start_server(ray, spec, options: RayOptions) -> tuple[Any, dict[str, Any]]:
    serve = {"port": 0, **options.serve_options}
    if options.address is not None:  # workers on other machines: listen beyond loopback, with a secret
        serve.setdefault("host", "0.0.0.0")
        serve.setdefault("token", secrets.token_hex(16))
    cfg = {"agent": spec.agent, **serve}
    actor = (
        ray.remote(ServeActor)
        .options(num_cpus=options.serve_num_cpus, num_gpus=options.serve_num_gpus, max_restarts=0)
        .remote(cfg)
    )
    try:
        url = ray.get(actor.url.remote())
    except ray.exceptions.RayActorError as exc:
        raise ValueError(f"ray.serve=true: the vla-serve actor did not start: {_reason(exc)}") from exc
    return actor, {"name": "remote", "url": url, "token": serve.get("token")}


def _lost_text(exc: BaseException) -> str:
    """``worker lost (ActorDiedError on 10.0.0.7 pid 123, SYSTEM_ERROR)``: where and how, in one line."""
    import re

    text = str(exc)
    where = [f"{k} {m.group(1)}" for k in ("ip", "pid") if (m := re.search(rf"\b{k}: (\S+)", text))]
    kind = re.search(r"Worker exit type: (\w+)", text)
    details = ", ".join(([" ".join(where)] if where else []) + ([kind.group(1)] if kind else []))
    return f"worker lost ({type(exc).__name__}" + (f": {details}" if details else "") + ")"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    tail = [ln.strip() for ln in text if ln.strip()]
    return (tail[-1] if tail else type(exc).__name__)[:300]


@dataclass
class _Slot:
    actor: Any
    job: Episode
    started: float


def run_ray(spec, todo: list[Episode], on_result: OnResult) -> None:
    if not todo:
        return
    options = RayOptions.from_dict(spec.ray)
    with connected(options) as ray:
        _drive(ray, spec, todo, on_result, options)


def _drive(ray, spec, todo: list[Episode], on_result: OnResult, options: RayOptions) -> None:
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

    lost_errors = tuple(
        getattr(ray.exceptions, name)
        for name in ("RayActorError", "WorkerCrashedError", "ObjectLostError", "NodeDiedError")
        if hasattr(ray.exceptions, name)
    )
    server, reserved = None, {}
    worker_spec = spec
    if options.serve:
        server, remote_agent = _start_server(ray, spec, options)
        worker_spec = replace(spec, agent=remote_agent)
        reserved = {"CPU": options.serve_num_cpus, "GPU": options.serve_num_gpus}
    room = capacity(ray, options, reserved)
    n = int(spec.workers) or room
    if n > room:
        print(
            f"ray: {n} workers asked for, the cluster has room for {room}; the rest wait for resources",
            file=sys.stderr,
        )
    if n < 1:
        raise ValueError(
            f"the Ray cluster has no room for a worker with num_cpus={options.num_cpus}, num_gpus={options.num_gpus}, "
            f"resources={options.resources} (cluster: {ray.cluster_resources()})"
        )
    worker_cls = ray.remote(EpisodeWorker).options(
        num_cpus=options.num_cpus,
        num_gpus=options.num_gpus,
        resources=dict(options.resources) or None,
        max_restarts=0,
        max_task_retries=0,
    )
    schedule = make_schedule(todo)
    attempts: dict[tuple[int, int], int] = {}
    starting: dict[Any, Any] = {}  # readiness probe -> actor (placed, env stack imported)
    idle: list[Any] = []  # started actors without an episode
    inflight: dict[Any, _Slot] = {}
    failed_starts = [0]

    def start_worker() -> None:
        actor = worker_cls.remote(worker_spec)
        starting[actor.where.remote()] = actor

    def lost(slot: _Slot, reason: str) -> None:
        key = (int(slot.job[0]), int(slot.job[1]))
        attempts[key] = attempts.get(key, 0) + 1
        schedule.release(slot.actor)
        if attempts[key] <= int(options.retries):
            schedule.push_front(slot.job)
        else:
            tries = attempts[key]
            on_result(
                failure_record(
                    spec, slot.job, time.time() - slot.started, f"{reason} ({tries} attempts)", infra="worker_lost"
                )
            )
        start_worker()

    for _ in range(min(n, len(schedule))):
        start_worker()
    try:
        while schedule or inflight:
            while idle and schedule:  # episodes go to started workers only (a queued one holds none)
                actor = idle.pop()
                job = schedule.next(actor)
                if job is None:
                    idle.append(actor)
                    break
                inflight[actor.run.remote(job)] = _Slot(actor, job, time.time())
            if not schedule:  # nothing left to hand out: free what is not running an episode
                for actor in idle + list(starting.values()):
                    ray.kill(actor, no_restart=True)
                idle.clear()
                starting.clear()
            waiting = list(inflight) + list(starting)
            if not waiting:
                continue
            ready, _ = ray.wait(waiting, num_returns=1, timeout=1.0)
            for ref in ready:
                if ref in starting:
                    actor = starting.pop(ref)
                    try:
                        ray.get(ref)
                    except lost_errors as exc:
                        if isinstance(exc, RayActorError) and "creation task" in str(exc):
                            raise ValueError(f"a Ray worker could not start: {_reason(exc)}") from exc
                        failed_starts[0] += 1
                        if failed_starts[0] > 3 * max(n, 1):
                            raise ValueError(f"Ray workers keep dying while they start: {_lost_text(exc)}") from exc
                        start_worker()
                    else:
                        idle.append(actor)
                    continue
                slot = inflight.pop(ref)
                try:
                    rec = ray.get(ref)
                except RayTaskError as exc:  # the runner itself raised (it records env and agent errors itself)
                    on_result(
                        failure_record(spec, slot.job, time.time() - slot.started, f"worker error: {_reason(exc)}")
                    )
                    idle.append(slot.actor)
                except lost_errors as exc:
                    ray.kill(slot.actor, no_restart=True)
                    lost(slot, _lost_text(exc))
                except GetTimeoutError:  # cannot happen for a ready ref; keep the episode
                    schedule.push_front(slot.job)
                    idle.append(slot.actor)
                else:
                    on_result(rec)
                    idle.append(slot.actor)
            timeout = spec.episode_timeout_s
            for ref, slot in list(inflight.items()):
                if timeout and time.time() - slot.started > timeout:
                    inflight.pop(ref)
                    ray.kill(slot.actor, no_restart=True)
                    schedule.release(slot.actor)
                    on_result(
                        failure_record(
                            spec, slot.job, time.time() - slot.started, f"episode timed out after {timeout:.0f} s"
                        )
                    )
                    start_worker()
    finally:
        for actor in idle + list(starting.values()) + [s.actor for s in inflight.values()]:
            ray.kill(actor, no_restart=True)
        if server is not None:
            ray.kill(server, no_restart=True)


# ----------------------------------------------------------------------------- plain tasks (vla-gst generate)
def map_ordered(
    fn: Callable[..., Any],
    items: list[tuple],
    on_result: Callable[[int, Any], None],
    options: RayOptions,
    window: int = 0,
) -> None:
    """``fn(*item)`` for every item as Ray tasks; ``on_result(i, result)`` in the items' order.

    At most ``window`` tasks are in flight (0: twice the cluster's room), so results do not pile
    up in the driver. A task whose worker is lost is re-run by Ray up to ``options.retries`` times;
    an exception raised by ``fn`` stops the run (as it would locally)."""
    if not items:
        return
    with connected(options) as ray:
        task = ray.remote(fn).options(
            num_cpus=options.num_cpus,
            num_gpus=options.num_gpus,
            resources=dict(options.resources) or None,
            max_retries=int(options.retries),
            retry_exceptions=False,
        )
        window = window or max(2, 2 * capacity(ray, options))
        refs: dict[int, Any] = {}
        done: dict[int, Any] = {}
        nxt, emit = 0, 0
        try:
            while emit < len(items):
                while nxt < len(items) and len(refs) < window:
                    refs[nxt] = task.remote(*items[nxt])
                    nxt += 1
                pending = {ref: i for i, ref in refs.items() if i not in done}
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    i = pending[ref]
                    done[i] = ray.get(ref)  # raises what fn raised
                while emit in done:
                    on_result(emit, done.pop(emit))
                    refs.pop(emit)
                    emit += 1
        finally:
            for ref in refs.values():
                ray.cancel(ref, force=True)
