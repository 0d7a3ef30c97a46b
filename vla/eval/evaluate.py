"""Resumable, parallel evaluation: every ``(task, trial)`` episode once, results in ``episodes.jsonl``.

* Where episodes run is the backend's business (:mod:`vla.eval.backends`): ``eval.backend=local``
  (``workers >= 1`` forked worker processes, ``workers = 0`` in-process) or ``ray`` (actors on a
  Ray cluster). Both hand every finished episode back to this process, which alone writes files.
* ``eval.shard=k/n`` runs the k-th of n contiguous blocks of the ordered plan (:mod:`vla.eval.shard`),
  for schedulers without Ray (SLURM array jobs); ``vla-merge`` joins the shards' out dirs.
* Resume: episodes already in ``episodes.jsonl`` are skipped; a killed run loses at most the
  episodes in flight and never records one twice (a single process appends, one fsync'd line each).
  A paused one (SIGSTOP / Ctrl-Z, then SIGCONT / ``fg``) loses nothing: with the local backend the
  time it stood still counts against no episode's ``eval.episode_timeout_s``.
* Infrastructure errors are not results: an episode ended by one (the policy server gone, an env
  that cannot be built, a worker lost twice; :class:`~vla.agents.base.InfrastructureError`) goes
  to ``infra_errors.jsonl``, not ``episodes.jsonl``: success rates leave it out, the summary lists
  it, and the next run of the same command runs it again. When the policy server is gone the run
  stops with the reason (:class:`RunStopped`), as it does when a worker cannot build its agent.
* ``eval.trials_per_task`` unset: the env's own protocol (LIBERO's 50 trials per task; every
  initial state of an apartment).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from envs.registry import list_tasks, protocol_trials, require
from vla_common.atomic import write_json_atomic

from ..rollout.record import merge_demos
from .backends import run_episodes
from .identity import check_identity, clean_temporaries, run_identity
from .runner import EvalSpec, build_subscribers, seed_everything, suite_name
from .shard import select_shard, write_plan
from .store import EpisodeStore, InfraLog, infra_summary, summarize


class RunStopped(ValueError):
    """An infrastructure error that every later episode would meet too (the policy server is gone):
    the run stops with the reason; the same command resumes it (a ValueError: the CLIs print one line)."""


# ----------------------------------------------------------------------------- entry point
def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"output directory {out} is not writable: {exc.strerror or exc}") from exc


def with_protocol_trials(spec: EvalSpec) -> EvalSpec:
    """``spec`` with ``trials_per_task`` resolved: as given, else the env family's protocol number
    (:func:`envs.registry.protocol_trials`: LIBERO's 50), else every initial state of the tasks."""
    if spec.trials_per_task is not None:
        return spec
    from dataclasses import replace

    require(spec.env)
    n = protocol_trials(spec.env)
    if n is None:
        infos = list_tasks(spec.env)
        chosen = [t for t in infos if spec.tasks is None or t.task_id in spec.tasks] or infos
        n = min(t.num_trials for t in chosen)
    return replace(spec, trials_per_task=int(n))


def plan(spec: EvalSpec) -> tuple[dict[int, str], list[tuple[int, int, str]]]:
    """The task names and the ordered list of (task_id, trial, task name) episodes of a spec."""
    require(spec.env)  # a missing simulator fails the run now, not every episode
    spec = with_protocol_trials(spec)
    infos = {t.task_id: t for t in list_tasks(spec.env)}
    ids = sorted(infos) if spec.tasks is None else list(spec.tasks)
    bad = [t for t in ids if not isinstance(t, int) or t not in infos]
    if bad:
        raise ValueError(f"unknown task id(s) {bad} for {suite_name(spec.env)}; valid ids: 0..{len(infos) - 1}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"eval.tasks lists a task twice: {ids}")
    for t in ids:
        if spec.first_trial + spec.trials_per_task > infos[t].num_trials:
            asked = f"eval.trials_per_task={spec.trials_per_task}" + (
                f" from eval.first_trial={spec.first_trial}" if spec.first_trial else ""
            )
            raise ValueError(f"{asked} but task {t} ({infos[t].name}) has only {infos[t].num_trials} initial states")
    trials = range(int(spec.first_trial), int(spec.first_trial) + int(spec.trials_per_task))
    episodes = [(t, k, infos[t].name) for t in ids for k in trials]
    return {t: infos[t].name for t in ids}, episodes


def evaluate(spec: EvalSpec, progress: bool = True) -> dict[str, Any]:
    out = Path(spec.out)
    _check_writable(out)
    spec = with_protocol_trials(spec)
    tasks, planned = plan(spec)
    episodes = select_shard(planned, spec.shard)
    infos = {t.task_id: t for t in list_tasks(spec.env)}
    identity = run_identity(spec, {t: info for t, info in infos.items() if t in tasks})
    if spec.record:
        if not identity["protocol"]["cameras"]:
            raise ValueError(
                f"record={spec.record} writes demonstrations with their camera images, but this env renders no "
                "cameras (env.render=false): drop env.render=false, or drop record="
            )
        _check_writable(Path(spec.record))
    check_identity(out, identity)
    for p in clean_temporaries(out, *([spec.record] if spec.record else [])):
        print(f"removed {p} (left by a killed run)", file=sys.stderr)
    seed_everything(spec.seed)

    header = {"env": spec.env["name"], "suite": suite_name(spec.env), "agent": spec.agent["name"], "seed": spec.seed}
    header["perception"] = (spec.perception or {}).get("name", "gt")  # before the plan: vla-merge's header
    logs = [log for sub in build_subscribers(spec) for log in sub.episode_logs(out)]
    write_plan(out, spec, planned, episodes, header, logs)  # a dir holds one shard: checked before any file changes
    if spec.shard is not None:
        header["shard"] = spec.shard

    store = EpisodeStore(out / "episodes.jsonl")
    infra = InfraLog(out / "infra_errors.jsonl")
    for log in logs:
        log.open((int(r["task_id"]), int(r["trial"])) for r in store)
    todo = [e for e in episodes if (e[0], e[1]) not in store]
    selected = {(t, k) for t, k, _ in episodes}

    def current_summary(complete: bool) -> dict[str, Any]:
        recs = [r for r in store if (int(r["task_id"]), int(r["trial"])) in selected]
        summary = {**summarize(recs, tasks, header), "complete": complete, "planned": len(episodes)}
        summary.update(infra_summary(infra.pending(selected, store)))
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
    recs = [r for r in store if (int(r["task_id"]), int(r["trial"])) in selected]
    counts = {
        "n": len(recs),
        "ok": sum(bool(r["success"]) for r in recs),
        "err": sum(r["error"] is not None for r in recs),
        "infra": 0,
    }

    def on_result(rec: dict[str, Any]) -> None:
        if rec.get("infra"):  # not a result: recorded apart, run again by the next run
            for log in logs:
                rec.pop(log.field, None)
            infra.append(rec)
            counts["infra"] += 1
            bar.set_postfix_str(f"infrastructure errors {counts['infra']} (not counted)")
            if rec.get("stops_run"):
                raise RunStopped(
                    f"stopped: {rec['error']} (task {rec['task_id']} trial {rec['trial']}, not counted); the "
                    f"finished episodes are kept in {out / 'episodes.jsonl'}: run the same command again when "
                    "it is back"
                )
            return
        for log in logs:  # side rows first: an episode line means all of it is on disk
            log.append(rec, rec.pop(log.field, None))
        store.append(rec)
        if (int(rec["task_id"]), int(rec["trial"])) in selected:  # counted as it comes: O(1) per episode
            counts["n"] += 1
            counts["ok"] += bool(rec["success"])
            counts["err"] += rec["error"] is not None
        bar.set_postfix_str(
            f"success {100 * counts['ok'] / max(counts['n'], 1):.1f}% ({counts['ok']}/{counts['n']})"
            + (f", errors {counts['err']}" if counts["err"] else "")
            + (f", infrastructure errors {counts['infra']} (not counted)" if counts["infra"] else "")
        )
        bar.update(1)
        if time.time() - last_summary[0] > 5:  # the whole summary (side logs' too) at most every 5 s
            write_json_atomic(out / "summary.json", current_summary(False))
            last_summary[0] = time.time()

    try:
        run_episodes(spec, todo, on_result)
    finally:
        bar.close()
        summary = current_summary(complete=all((t, k) in store for t, k, _ in episodes))
        write_json_atomic(out / "summary.json", summary)
        store.close()
        infra.close()
        for log in logs:
            log.close()
    if spec.record and spec.merge_record:
        merge_demos(spec.record, tasks)
    return summary
