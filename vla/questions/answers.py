"""Answer spaces of the subtasks, typed answers <-> text, and the uniform random answer."""

from __future__ import annotations

from typing import Any

import numpy as np

from .subtasks import CHOICES, SUBTASKS

# Random distances are drawn log-uniformly over this range (metres): indoor target distances.
RANDOM_DISTANCE_RANGE = (0.5, 12.0)


def format_answer(answer_type: str, value: Any) -> str:
    """Canonical text of a typed answer (what a perfect model would say)."""
    if answer_type == "angle":
        return f"{int(round(value))}"
    if answer_type == "distance":
        return f"{value:.1f}"
    if answer_type == "point":
        return f"<point>{int(round(value[0]))} {int(round(value[1]))}</point>"
    if answer_type == "choice":
        return f"({value})"
    raise ValueError(f"unknown answer type {answer_type!r}")


def random_value(answer_type: str, rng: np.random.Generator) -> Any:
    if answer_type == "angle":
        return float(rng.uniform(-180.0, 180.0))
    if answer_type == "distance":
        lo, hi = RANDOM_DISTANCE_RANGE
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
    if answer_type == "point":
        return (float(rng.integers(0, 1000)), float(rng.integers(0, 1000)))
    if answer_type == "choice":
        return str(rng.choice(CHOICES))
    raise ValueError(f"unknown answer type {answer_type!r}")


def random_answer(question: Any, rng: np.random.Generator) -> str:
    """Uniform over the question's answer space (the chance anchor of docs/GST.md)."""
    code = question["subtask"] if isinstance(question, dict) else question.subtask
    kind = SUBTASKS[code].answer_type
    return format_answer(kind, random_value(kind, rng))
