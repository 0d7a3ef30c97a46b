"""Resumable, parallel evaluation: every ``(task, trial)`` episode once, results in ``episodes.jsonl``.

* ``workers >= 1``: episodes run in that many worker processes (forked; each builds its env lazily
  and keeps it while consecutive episodes share a task). A worker that crashes (a segfault in the
  simulator) or exceeds ``episode_timeout_s`` fails only its episode, with the reason recorded, and
  is replaced. Workers die with the parent (``PR_SET_PDEATHSIG``), so ``kill -9`` leaves nothing behind.
* ``workers = 0`` runs in-process (for debugging; no crash isolation).
* Resume: episodes already in ``episodes.jsonl`` are skipped; a killed run loses at most the
  episodes in flight and never records one twice (a single process appends, one fsync'd line each).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

from envs.registry import list_tasks, make_env, require

from ..agents import Seedable, make_agent
from ..rollout.record import DemoRecorder, merge_demos
from ..rollout.runtime import Subscriber, run_episode
from ..rollout.video import VIDEO_MODES, VideoWriter
from .store import EpisodeStore, summarize, write_json_atomic


@dataclass
class EvalSpec:
    """Everything a worker needs to run episodes (plain data, so it crosses process boundaries)."""

    env: dict[str, Any]
    agent: dict[str, Any]
    out: str
    tasks: list[int] | None = None
    trials_per_task: int = 50
    workers: int = 1
    videos: str = "none"
    video_fps: int = 20
    seed: int = 7
    episode_timeout_s: float = 3600.0
    record: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the gst questioner's config
    perception: dict[str, Any] | None = None  # the profile applied to what the agent receives (None: exact)
    rerun: dict[str, Any] | None = None  # live view / .rrd files (vla/rollout/rerun_view.py); not the run's identity

    def __post_init__(self) -> None:
        if self.videos not in VIDEO_MODES:
            raise ValueError(f"eval.videos must be one of {VIDEO_MODES}, got {self.videos!r}")
        if int(self.workers) < 0:
            raise ValueError(f"eval.workers must be >= 0, got {self.workers}")
        if int(self.trials_per_task) < 1:
            raise ValueError(f"eval.trials_per_task must be >= 1, got {self.trials_per_task}")
        if self.episode_timeout_s is not None and float(self.episode_timeout_s) <= 0:
            raise ValueError(f"eval.episode_timeout_s must be > 0, got {self.episode_timeout_s}")


def build_subscribers(spec: EvalSpec) -> list[Subscriber]:
    subs: list[Subscriber] = []
    if spec.extra.get("gst"):
        from ..gst.midepisode import GSTQuestioner, gst_options

        if gst_options(spec.extra["gst"])["enabled"]:
            subs.append(GSTQuestioner(spec.extra["gst"]))  # before the video writer: questions freeze the episode first
    if spec.videos != "none":
        subs.append(VideoWriter(Path(spec.out) / "videos", spec.videos, spec.video_fps))
    if spec.record:
        subs.append(DemoRecorder(spec.record))
    if spec.rerun and spec.rerun.get("enabled"):
        from ..rollout.rerun_view import RerunView

        subs.append(RerunView(Path(spec.out) / "rerun", spec.rerun))
    return subs


def suite_name(env_cfg: dict[str, Any]) -> str:
    if env_cfg.get("seed") is not None:
        return f"{env_cfg['name']}/seed{env_cfg['seed']}"
    for k in ("suite", "split"):
        if env_cfg.get(k) is not None:
            return f"{env_cfg['name']}/{env_cfg[k]}" if k == "split" else str(env_cfg[k])
    return str(env_cfg["name"])


class EpisodeRunner:
    """Runs episodes of one spec; keeps the env of the current task alive between episodes."""

    def __init__(self, spec: EvalSpec) -> None:
        self.spec = spec
        self.agent = make_agent(spec.agent, seed=spec.seed)
        self.subscribers = build_subscribers(spec)
        self._env = None
        self._task: int | None = None

    def run(self, task_id: int, trial: int, task_name: str) -> dict[str, Any]:
        key = {
            "env": self.spec.env["name"],
            "suite": suite_name(self.spec.env),
            "task_id": task_id,
            "task": task_name,
            "trial": trial,
        }
        error = None
        try:
            if self._task != task_id:
                self.close()
                self._env = make_env(self.spec.env, task_id)
                self._task = task_id
        except Exception as exc:  # noqa: BLE001 - a broken task fails its episodes, not the run
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            return {**key, "success": False, "steps": 0, "seconds": 0.0, "error": f"env construction failed: {error}"}
        if isinstance(self.agent, Seedable):
            self.agent.seed((self.spec.seed, task_id, trial))
        result = run_episode(
            self._env, self.agent, key, self.subscribers, seed=self.spec.seed, perception=self.spec.perception
        )
        return {
            **key,
            "success": result.success,
            "steps": result.steps,
            "seconds": round(result.seconds, 3),
            "error": result.error,
            **result.extra,
        }

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env, self._task = None, None


# ----------------------------------------------------------------------------- worker processes
def _die_with_parent(parent_pid: int) -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    if os.getppid() != parent_pid:  # parent died before prctl took effect
        os._exit(1)


def _worker_main(conn, spec: EvalSpec, parent_pid: int) -> None:
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    runner = EpisodeRunner(spec)
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
    job: tuple[int, int, str] | None = None
    started: float = 0.0


def _signal_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "unknown exit"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


class _Pool:
    def __init__(self, spec: EvalSpec, n: int) -> None:
        self.spec, self.ctx = spec, mp.get_context("fork")
        self.workers = [self._start() for _ in range(n)]

    def _start(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child, self.spec, os.getpid()), daemon=True)
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


def _run_pool(spec: EvalSpec, todo: deque, on_result: Callable[[dict[str, Any]], None]) -> None:
    pool = _Pool(spec, min(int(spec.workers), len(todo)))
    try:
        while todo or any(w.job for w in pool.workers):
            for w in pool.workers:
                if w.job is None and todo:
                    w.job, w.started = todo.popleft(), time.time()
                    w.conn.send(w.job)
            busy = [w for w in pool.workers if w.job]
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
            for w in busy:
                task_id, trial, name = w.job
                failure = None
                if w.conn in ready:
                    try:
                        rec = w.conn.recv()
                    except (EOFError, OSError):
                        w.proc.join(1)
                        failure = f"worker process died ({_signal_text(w.proc.exitcode)})"
                    else:
                        w.job = None
                        on_result(rec)
                        continue
                elif w.proc.sentinel in ready or not w.proc.is_alive():
                    w.proc.join(1)
                    failure = f"worker process died ({_signal_text(w.proc.exitcode)})"
                elif spec.episode_timeout_s and time.time() - w.started > spec.episode_timeout_s:
                    failure = f"episode timed out after {spec.episode_timeout_s:.0f} s"
                if failure:
                    on_result(
                        {
                            "env": spec.env["name"],
                            "suite": suite_name(spec.env),
                            "task_id": task_id,
                            "task": name,
                            "trial": trial,
                            "success": False,
                            "steps": 0,
                            "seconds": round(time.time() - w.started, 3),
                            "error": failure,
                        }
                    )
                    w.job = None
                    pool.replace(w)
        pool.close()
    except BaseException:
        pool.kill()
        raise


# ----------------------------------------------------------------------------- entry point
def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"output directory {out} is not writable: {exc.strerror or exc}") from exc


def plan(spec: EvalSpec) -> tuple[dict[int, str], list[tuple[int, int, str]]]:
    """The task names and the ordered list of (task_id, trial, task name) episodes of a spec."""
    require(spec.env)  # a missing simulator fails the run now, not every episode
    infos = {t.task_id: t for t in list_tasks(spec.env)}
    ids = sorted(infos) if spec.tasks is None else list(spec.tasks)
    bad = [t for t in ids if not isinstance(t, int) or t not in infos]
    if bad:
        raise ValueError(f"unknown task id(s) {bad} for {suite_name(spec.env)}; valid ids: 0..{len(infos) - 1}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"eval.tasks lists a task twice: {ids}")
    for t in ids:
        if spec.trials_per_task > infos[t].num_trials:
            raise ValueError(
                f"eval.trials_per_task={spec.trials_per_task} but task {t} ({infos[t].name}) "
                f"has only {infos[t].num_trials} initial states"
            )
    episodes = [(t, k, infos[t].name) for t in ids for k in range(int(spec.trials_per_task))]
    return {t: infos[t].name for t in ids}, episodes


def evaluate(spec: EvalSpec, progress: bool = True) -> dict[str, Any]:
    out = Path(spec.out)
    _check_writable(out)
    if spec.record:
        _check_writable(Path(spec.record))
    tasks, episodes = plan(spec)
    run_file = out / "run.json"
    identity = {"env": spec.env, "agent": spec.agent, "extra": spec.extra}
    if spec.perception is not None:  # runs before perception profiles existed had exact perception
        identity["perception"] = spec.perception
    if run_file.exists():
        import json

        previous = json.loads(run_file.read_text())
        if {k: previous.get(k) for k in identity} != identity:
            raise ValueError(f"{out} holds episodes of a different run ({run_file}); choose another out= or delete it")
    else:
        write_json_atomic(run_file, identity)

    store = EpisodeStore(out / "episodes.jsonl")
    logs = [log for sub in build_subscribers(spec) for log in sub.episode_logs(out)]
    for log in logs:
        log.open((int(r["task_id"]), int(r["trial"])) for r in store)
    todo = deque(e for e in episodes if (e[0], e[1]) not in store)
    header = {"env": spec.env["name"], "suite": suite_name(spec.env), "agent": spec.agent["name"], "seed": spec.seed}
    header["perception"] = (spec.perception or {}).get("name", "gt")
    selected = {(t, k) for t, k, _ in episodes}

    def current_summary(complete: bool) -> dict[str, Any]:
        recs = [r for r in store if (int(r["task_id"]), int(r["trial"])) in selected]
        summary = {**summarize(recs, tasks, header), "complete": complete, "planned": len(episodes)}
        for log in logs:
            part = log.summary(selected)
            if part is not None:
                summary[log.summary_key] = part
        return summary

    done = len(episodes) - len(todo)
    bar = tqdm(
        total=len(episodes),
        initial=done,
        desc=f"{header['suite']} · {header['agent']}",
        unit="ep",
        disable=not progress,
        dynamic_ncols=True,
        file=sys.stderr,
    )
    last_summary = [0.0]

    def on_result(rec: dict[str, Any]) -> None:
        for log in logs:  # side rows first: an episode line means all of it is on disk
            log.append(rec, rec.pop(log.field, None))
        store.append(rec)
        s = current_summary(False)
        bar.set_postfix_str(
            f"success {100 * (s['success_rate'] or 0):.1f}% ({s['successes']}/{s['episodes']})"
            + (f", errors {s['errors']}" if s["errors"] else "")
        )
        bar.update(1)
        if time.time() - last_summary[0] > 5:
            write_json_atomic(out / "summary.json", s)
            last_summary[0] = time.time()

    try:
        if not todo:
            pass
        elif int(spec.workers) == 0:
            runner = EpisodeRunner(spec)
            try:
                while todo:
                    on_result(runner.run(*todo.popleft()))
            finally:
                runner.close()
        else:
            _run_pool(spec, todo, on_result)
    finally:
        bar.close()
        summary = current_summary(complete=not todo and all((t, k) in store for t, k, _ in episodes))
        write_json_atomic(out / "summary.json", summary)
        store.close()
        for log in logs:
            log.close()
    if spec.record:
        merge_demos(spec.record, tasks)
    return summary
