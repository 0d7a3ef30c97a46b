"""GST-Bench metrics, exactly as GST-Bench defines them (docs/GST.md) (each in [0, 1]; reports multiply by 100).

* angle mAcc: mean over t in {15, 30, 45} of [e < t], e the wrapped absolute angle error;
* MRA: mean over t in {0.50, 0.55, ..., 0.95} of [|y' - y| / y < 1 - t];
* point mAcc: mean over d in {100, 150, 200, 250, 300} of [||p' - p|| < d] on the 0-999 grid;
* accuracy: exact option letter.

An answer that could not be parsed (``None``) scores 0. ``overall`` = mean over the subtasks scored.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from vla.questions.subtasks import SUBTASKS

ANGLE_THRESHOLDS = (15.0, 30.0, 45.0)
MRA_THRESHOLDS = tuple(np.round(np.arange(0.50, 0.951, 0.05), 2))
POINT_THRESHOLDS = (100.0, 150.0, 200.0, 250.0, 300.0)


def angle_error(a: float, b: float) -> float:
    d = abs(float(a) - float(b)) % 360.0
    return min(d, 360.0 - d)


def angle_macc(pred: float | None, truth: float) -> float:
    if pred is None:
        return 0.0
    e = angle_error(pred, truth)
    return float(np.mean([e < t for t in ANGLE_THRESHOLDS]))


def mra(pred: float | None, truth: float) -> float:
    if pred is None:
        return 0.0
    if truth <= 0:
        raise ValueError(f"MRA needs a positive ground truth, got {truth}")
    rel = abs(float(pred) - float(truth)) / float(truth)
    return float(np.mean([rel < 1.0 - t for t in MRA_THRESHOLDS]))


def point_macc(pred: tuple[float, float] | None, truth: tuple[float, float]) -> float:
    if pred is None:
        return 0.0
    d = float(np.hypot(pred[0] - truth[0], pred[1] - truth[1]))
    return float(np.mean([d < t for t in POINT_THRESHOLDS]))


def accuracy(pred: str | None, truth: str) -> float:
    return float(pred is not None and pred == truth)


METRIC = {"angle": angle_macc, "distance": mra, "point": point_macc, "choice": accuracy}


def score(answer_type: str, pred: Any, truth: Any) -> float:
    if answer_type not in METRIC:
        raise ValueError(f"unknown answer type {answer_type!r}; expected one of {sorted(METRIC)}")
    return METRIC[answer_type](pred, truth)


def bootstrap_ci(values: Iterable[float], n: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (same units as ``values``)."""
    v = np.asarray(list(values), dtype=np.float64)
    if len(v) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n, len(v)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def aggregate(per_question: list[tuple[str, float]], bootstrap: int = 1000) -> dict[str, Any]:
    """Scores x100 per subtask (in the canonical order), overall mean of subtasks, counts, 95 % CIs."""
    by_code: dict[str, list[float]] = {}
    for code, s in per_question:
        by_code.setdefault(code, []).append(s)
    order = [c for c in SUBTASKS if c in by_code]
    per = {c: 100.0 * float(np.mean(by_code[c])) for c in order}
    ci = {c: [100.0 * x for x in bootstrap_ci(by_code[c], n=bootstrap)] for c in order}
    return {
        "overall": float(np.mean(list(per.values()))) if per else None,
        "per_subtask": per,
        "count": {c: len(by_code[c]) for c in order},
        "ci95": ci,
    }
