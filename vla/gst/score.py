"""Scoring: questions + free-text predictions -> ``scores.json`` and ``scores.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .metrics import aggregate, score
from .parse import parse
from vla.questions.subtasks import SUBTASKS


def load_jsonl(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{i} is not valid JSON ({exc})") from exc
    return out


def typed_truth(question: dict[str, Any]) -> Any:
    ans = question["answer"]
    v = ans["value"] if isinstance(ans, dict) else ans
    return tuple(v) if SUBTASKS[question["subtask"]].answer_type == "point" else v


def score_one(question: dict[str, Any], prediction: str | None) -> tuple[Any, float]:
    kind = SUBTASKS[question["subtask"]].answer_type
    parsed = parse(kind, prediction) if prediction is not None else None
    return parsed, score(kind, parsed, typed_truth(question))


def score_predictions(
    questions: list[dict[str, Any]], predictions: dict[str, str], bootstrap: int = 1000
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Missing predictions score 0 (and are counted). Returns (scores, per-question rows)."""
    rows, pairs = [], []
    unknown = set(predictions) - {q["id"] for q in questions}
    if unknown:
        raise ValueError(f"{len(unknown)} prediction id(s) match no question, e.g. {sorted(unknown)[:3]}")
    for q in questions:
        pred = predictions.get(q["id"])
        parsed, s = score_one(q, pred)
        rows.append(
            {
                "id": q["id"],
                "subtask": q["subtask"],
                "prediction": pred,
                "parsed": parsed,
                "truth": typed_truth(q),
                "score": s,
            }
        )
        pairs.append((q["subtask"], s))
    result = aggregate(pairs, bootstrap=bootstrap)
    result["missing"] = sum(r["prediction"] is None for r in rows)
    result["unparsed"] = sum(r["prediction"] is not None and r["parsed"] is None for r in rows)
    return result, rows


def load_reference(path: str | Path | None = None) -> dict[str, dict[str, float | None]]:
    """``configs/gst/reference.yaml``: the analytic chance level of uniform answers per subtask."""
    import yaml

    from vla.config import CONFIG_DIR

    p = Path(path) if path else CONFIG_DIR / "gst" / "reference.yaml"
    return yaml.safe_load(p.read_text()) if p.exists() else {}


def random_scores(questions: list[dict[str, Any]], draws: int = 50, seed: int = 0) -> dict[str, Any]:
    """What uniform answers score on these very questions (the random agent's answers, ``draws`` of them
    per question, averaged): the baseline a score on this question set is read against."""
    from vla.questions.answers import random_answer

    rng = np.random.default_rng(seed)
    pairs = []
    for q in questions:
        mean = float(np.mean([score_one(q, random_answer(q, rng))[1] for _ in range(int(draws))]))
        pairs.append((q["subtask"], mean))
    return aggregate(pairs, bootstrap=100)


def plot_scores(
    scores: dict[str, Any],
    path: str | Path,
    label: str = "ours",
    baselines: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Per-subtask bars with 95 % intervals, beside baselines on the same questions (``baselines``: name ->
    scores, e.g. :func:`random_scores` of the question set) and the analytic chance level of uniform
    answers. Published numbers of other question sets are not drawn: they are not comparable
    (docs/GST.md, "Published numbers")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    codes = [c for c in SUBTASKS if c in scores["per_subtask"]] + ["overall"]
    rows = [(label, {**scores["per_subtask"], "overall": scores["overall"]})]
    for name, other in (baselines or {}).items():
        rows.append((name, {**other["per_subtask"], "overall": other["overall"]}))
    chance = load_reference().get("chance") or {}
    if chance:
        rows.append(("chance (uniform answers, analytic)", chance))
    width = 0.8 / len(rows)
    fig, ax = plt.subplots(figsize=(13, 4.5))
    x = np.arange(len(codes))
    colours = ["#1f77b4", "#2ca02c", "#d62728", "#7f7f7f", "#bcbd22", "#9467bd"]
    for i, (name, vals) in enumerate(rows):
        ys = [vals.get(c) for c in codes]
        xs = x + (i - (len(rows) - 1) / 2) * width
        present = [(xx, y) for xx, y in zip(xs, ys) if y is not None]
        if not present:
            continue
        bars = ax.bar(
            [p[0] for p in present], [p[1] for p in present], width, label=name, color=colours[i % len(colours)]
        )
        if i == 0 and scores.get("ci95"):
            lo = [scores["ci95"].get(c, [y, y])[0] if c != "overall" else y for c, y in zip(codes, ys)]
            hi = [scores["ci95"].get(c, [y, y])[1] if c != "overall" else y for c, y in zip(codes, ys)]
            ax.errorbar(
                xs, ys, yerr=[np.subtract(ys, lo), np.subtract(hi, ys)], fmt="none", ecolor="black", capsize=2, lw=0.8
            )
        del bars
    ax.set_xticks(x, [f"{c}\n(n={scores['count'][c]})" if c in scores["count"] else c for c in codes], fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("score (x100)")
    ax.set_title(f"GST-style questions: {label} (overall {scores['overall']:.1f})")
    ax.legend(fontsize=8, ncol=len(rows), loc="upper center", bbox_to_anchor=(0.5, -0.16))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
