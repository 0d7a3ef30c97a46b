"""Answering GST questions in several processes (``vla-gst eval workers=N``).

An agent's answer is a function of the question alone: agents are seeded per question, and the memory
agent's memory is the one its question's sensor stream builds (its caches are keyed by the memory's
state and the media's contents). So the questions can be shared out between processes with the same
answers as one process gives. They are shared out **by sensor stream**: the questions of one stream go
to one worker, which builds that stream's memory once (as a single process does for questions that
follow each other); streams go to the least loaded worker, the largest first.

Each worker loads the question set itself and sends one row per question back as soon as it is
answered; the parent appends the rows to ``predictions.jsonl`` in the order they arrive, so a killed
run loses at most the questions in flight and resumes like a serial one.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import zlib
from collections import defaultdict
from typing import Any, Callable, Iterable

_DONE = "__worker_done__"


class WorkerFailed(RuntimeError):
    """A question worker stopped before answering its share (its reason in the message)."""


def answer_one(agent: Any, question: Any, sensors: Any) -> dict[str, Any]:
    """The prediction row of one question: the agent seeded by the question's id, an exception scored
    as no answer (the run goes on)."""
    from vla.agents.base import Seedable

    if isinstance(agent, Seedable):
        agent.seed((0, zlib.crc32(question.id.encode())))
    try:
        return {"id": question.id, "prediction": agent.answer(question.for_agent(sensors))}
    except Exception as exc:  # noqa: BLE001 - an answer that fails scores 0; the run goes on
        return {"id": question.id, "prediction": None, "error": f"{type(exc).__name__}: {exc}"}


def stream_key(question: Any) -> str:
    """What a question's memory is built from: its sensor stream (its id when it has none)."""
    stream = question.media.get("stream")
    return str(stream) if isinstance(stream, str) else f"id:{question.id}"


def share_out(questions: Iterable[Any], workers: int) -> list[list[str]]:
    """Question ids per worker: whole streams, each to the least loaded worker, the largest first
    (ties to the lower worker; the order of questions within a stream kept)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for q in questions:
        groups[stream_key(q)].append(q.id)
    shares: list[list[str]] = [[] for _ in range(workers)]
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        w = min(range(workers), key=lambda i: (len(shares[i]), i))
        shares[w].extend(groups[key])
    return [s for s in shares if s]


def _worker(cfg: dict[str, Any], ids: list[str], out: Any) -> None:
    try:
        from vla.agents import make_agent
        from vla.questions.question import load_questions

        from .sensors import sensors_of_config

        agent, (_, sensors) = make_agent(cfg["agent"], seed=0), sensors_of_config(cfg)
        by_id = {q.id: q for q in load_questions(cfg["questions"])}
        for i in ids:
            out.put(answer_one(agent, by_id[i], sensors))
    except BaseException as exc:  # noqa: BLE001 - tell the parent why, then stop
        out.put({_DONE: False, "error": f"{type(exc).__name__}: {exc}"})
        raise
    out.put({_DONE: True})


def answer_in_workers(
    cfg: dict[str, Any], questions: list[Any], workers: int, on_row: Callable[[dict[str, Any]], None]
) -> None:
    """Answer ``questions`` in ``workers`` processes (see the module doc); ``on_row(row)`` per answer,
    in the parent, as they arrive. A worker that fails stops the run with its error (the rows
    already written stay: the same command resumes)."""
    shares = share_out(questions, workers)
    ctx = mp.get_context("spawn")  # a fresh interpreter: nothing of the parent's threads or handles
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(cfg, ids, out), daemon=True) for ids in shares]
    for p in procs:
        p.start()
    running = len(procs)
    try:
        while running:
            try:
                row = out.get(timeout=5.0)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise WorkerFailed(f"a question worker died (exit code {dead[0].exitcode})") from None
                continue
            if _DONE in row:
                if not row[_DONE]:
                    raise WorkerFailed(f"a question worker failed: {row['error']}")
                running -= 1
            else:
                on_row(row)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
