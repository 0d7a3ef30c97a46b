"""Where episodes run (``eval.backend``): ``local`` (this machine) or ``ray`` (a Ray cluster).

A backend is one function ``run(spec, todo, on_result)``: it runs the ``(task_id, trial, task
name)`` episodes of ``todo`` and calls ``on_result(record)`` in the calling process as each one
finishes. Everything else -- the plan, ``episodes.jsonl``, side logs, summary, resume -- belongs to
the evaluator (:func:`vla.eval.evaluate.evaluate`), shared by both. The backends run episodes with
:class:`vla.eval.runner.EpisodeRunner` and never import the evaluator.
"""

from __future__ import annotations

from .base import Episode, OnResult


def run_episodes(spec, todo: list[Episode], on_result: OnResult) -> None:
    if spec.backend == "ray":
        from .ray_backend import run_ray  # Ray is imported only for backend=ray

        run_ray(spec, todo, on_result)
    else:
        from .local import run_local

        run_local(spec, todo, on_result)
