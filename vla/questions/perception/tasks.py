"""The spatial-perception task types, their answer strings, and how a prediction is scored (docs/SPATIAL.md).

Every answer is a short string a small model can emit token by token; every record also keeps its
answer as numbers (``truth``) so scoring never re-parses the answer it was built from:

============== ========================================== ===============================================
task           answer                                     correct when
============== ========================================== ===============================================
depth_order    ``A`` or ``B``                             exact
depth          metres, one decimal (``2.4``)              ``|p - t| <= max(0.1 t, 0.05)``
distance       metres, one decimal                        ``|p - t| <= max(0.1 t, 0.05)``
size           centimetres, integer (``87``)              ``|p - t| <= max(0.15 t, 2)``
bbox_3d        ``[{"label": ..., "bbox_3d": [9 numbers]}]`` centre within ``0.2 |c|`` and each size
                                                          within ``max(0.3 s, 0.05)``
direction      ``left`` or ``right``                      exact
camera_motion  ``<forward m> <left m> <turn deg>``        translation within ``max(0.2 |t|, 0.15)`` m
                                                          and turn within 10 degrees
count          integer                                    exact
presence       ``yes`` or ``no``                          exact   (control: no geometry)
colour         a colour name of ``COLOURS``               exact   (control: no geometry)
============== ========================================== ===============================================

``presence`` and ``colour`` are the **control** tasks of stage 2 (docs/SPATIAL.md): questions about the same
images that need perception but no geometry (is a category in view; the colour name nearest the median
pixel of a named object). ``SPATIAL_TASKS`` is the default set; ``CONTROL_TASKS`` the control set.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import numpy as np

from spatial_memory.geometry import wrap_deg

SPATIAL_TASKS = ("depth_order", "depth", "distance", "size", "bbox_3d", "direction", "camera_motion", "count")
CONTROL_TASKS = ("presence", "colour")
TASKS = SPATIAL_TASKS + CONTROL_TASKS
# colour names and the RGB each stands for (a named object's colour is the nearest to its median pixel)
COLOURS = {
    "red": (200, 40, 40),
    "orange": (230, 130, 40),
    "yellow": (220, 200, 50),
    "green": (60, 150, 60),
    "blue": (50, 80, 200),
    "purple": (130, 60, 160),
    "pink": (230, 150, 180),
    "brown": (120, 80, 50),
    "black": (30, 30, 30),
    "grey": (128, 128, 128),
    "white": (235, 235, 235),
}
CHOICES = {
    "depth_order": ("A", "B"),
    "direction": ("left", "right"),
    "presence": ("yes", "no"),
    "colour": tuple(COLOURS),
}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def check_tasks(tasks) -> None:
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise ValueError(f"unknown spatial task type(s) {bad}; valid: {list(TASKS)}")


def format_answer(task: str, truth: Any, label: str = "") -> str:
    """The answer string of a task's truth value (what a perfect model says)."""
    check_tasks([task])
    if task in CHOICES or task == "count":
        return str(truth)
    if task in ("depth", "distance"):
        return f"{float(truth):.1f}"
    if task == "size":
        return str(int(round(float(truth))))
    if task == "camera_motion":
        f, left, turn = truth
        return f"{float(f):.1f} {float(left):.1f} {int(round(float(turn)))}"
    v = [float(x) for x in truth]  # bbox_3d
    nums = [round(x, 2) for x in v[:6]] + [int(round(x)) for x in v[6:]]
    return json.dumps([{"label": label, "bbox_3d": nums}], separators=(", ", ": "))


def parse_answer(task: str, text: str) -> Any:
    """The value a prediction string states, or ``None`` when it states none the task accepts."""
    check_tasks([task])
    text = (text or "").strip()
    if task in CHOICES:
        words = re.findall(r"[A-Za-z]+", text)
        for w in words:
            for c in CHOICES[task]:
                if w == c or (task != "depth_order" and w.lower() == c):
                    return c
        return None
    if task == "bbox_3d":
        try:
            obj = json.loads(text)
            box = (obj[0] if isinstance(obj, list) else obj)["bbox_3d"]
            return [float(x) for x in box][:9] if len(box) >= 6 else None
        except (ValueError, TypeError, KeyError, IndexError):
            nums = [float(x) for x in _NUMBER.findall(text)]
            return nums[:9] if len(nums) >= 6 else None
    nums = [float(x) for x in _NUMBER.findall(text)]
    if task == "camera_motion":
        return nums[:3] if len(nums) >= 3 else None
    if not nums:
        return None
    return int(nums[0]) if task == "count" and float(nums[0]).is_integer() else nums[0]


def correct(task: str, prediction: str, truth: Any) -> bool:
    """Whether a prediction string answers a question whose true value is ``truth`` (tolerances: module doc)."""
    p = parse_answer(task, prediction)
    if p is None:
        return False
    if task in CHOICES or task == "count":
        return p == truth
    if task in ("depth", "distance"):
        return abs(p - float(truth)) <= max(0.1 * float(truth), 0.05)
    if task == "size":
        return abs(p - float(truth)) <= max(0.15 * float(truth), 2.0)
    if task == "camera_motion":
        t, q = np.asarray(truth[:2], float), np.asarray(p[:2], float)
        turn = float(wrap_deg(float(p[2]) - float(truth[2])))
        return float(np.linalg.norm(q - t)) <= max(0.2 * float(np.linalg.norm(t)), 0.15) and abs(turn) <= 10.0
    t, q = np.asarray(truth, float), np.asarray(p, float)  # bbox_3d
    if len(q) < 6:
        return False
    centre_ok = float(np.linalg.norm(q[:3] - t[:3])) <= 0.2 * float(np.linalg.norm(t[:3]))
    return centre_ok and bool(np.all(np.abs(q[3:6] - t[3:6]) <= np.maximum(0.3 * t[3:6], 0.05)))


def score(records: list[dict[str, Any]], predictions: dict[str, str]) -> dict[str, Any]:
    """Accuracy (percent) per task type and over all, of ``predictions`` (record id -> text).

    A record without a prediction counts as wrong (``missing`` says how many)."""
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    missing = 0
    for r in records:
        totals[r["task"]] += 1
        if r["id"] not in predictions:
            missing += 1
            continue
        hits[r["task"]] += int(correct(r["task"], predictions[r["id"]], r["truth"]))
    per = {t: round(100.0 * hits[t] / totals[t], 1) for t in TASKS if totals[t]}
    n = sum(totals.values())
    return {
        "per_task": per,
        "counts": {t: totals[t] for t in TASKS if totals[t]},
        "overall": round(100.0 * sum(hits.values()) / n, 1) if n else 0.0,
        "macro": round(float(np.mean(list(per.values()))), 1) if per else 0.0,
        "questions": n,
        "missing": missing,
    }


def prompt_key(prompt: str) -> str:
    """A question's words without its numbers (pixel coordinates): what a blind model reads."""
    return re.sub(r"-?\d+(\.\d+)?", "#", prompt)


def blind_answers(train: list[dict[str, Any]]) -> dict[str, str]:
    """The question-only ("blind") baseline: per question text with its numbers masked
    (:func:`prompt_key`: the task and the objects it names), the train set's majority or mean answer
    as :func:`baseline_answers` computes it over those questions. What the words alone predict, e.g.
    an object's size from its category; a question whose text no train question had falls back to
    the task's answer."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in train:
        groups.setdefault(prompt_key(r["prompt"]), []).append(r)
    return {key: next(iter(baseline_answers(rs).values())) for key, rs in groups.items()}


def baseline_answers(train: list[dict[str, Any]]) -> dict[str, str]:
    """The trivial baseline: per task type, the train set's majority answer (choices, counts) or its
    mean (numbers, component by component), as an answer string."""
    by: dict[str, list[Any]] = {}
    labels: Counter[str] = Counter()
    for r in train:
        by.setdefault(r["task"], []).append(r["truth"])
        if r["task"] == "bbox_3d":
            labels[r.get("meta", {}).get("label", "")] += 1
    out = {}
    for task, values in by.items():
        if task in CHOICES or task == "count":
            out[task] = format_answer(task, Counter(values).most_common(1)[0][0])
        elif task in ("bbox_3d", "camera_motion"):
            out[task] = format_answer(
                task, np.mean(np.asarray(values, float), axis=0).tolist(), labels.most_common(1)[0][0] if labels else ""
            )
        else:
            out[task] = format_answer(task, float(np.mean(np.asarray(values, float))))
    return out
