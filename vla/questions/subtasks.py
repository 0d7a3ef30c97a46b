"""The 12 GST-Bench subtasks (docs/GST.md): codes, competences, answer types, metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subtask:
    code: str
    competence: str  # object localisation | self localisation | scene structure
    answer_type: str  # angle | distance | point | choice
    target: str | None  # "semantic" | "visual" | None


SUBTASKS: dict[str, Subtask] = {
    s.code: s
    for s in (
        Subtask("EDv", "object localisation", "angle", "visual"),
        Subtask("EDs", "object localisation", "angle", "semantic"),
        Subtask("EDistv", "object localisation", "distance", "visual"),
        Subtask("EDists", "object localisation", "distance", "semantic"),
        Subtask("GPv", "object localisation", "point", "visual"),
        Subtask("GPs", "object localisation", "point", "semantic"),
        Subtask("Pos", "self localisation", "point", None),
        Subtask("Ori", "self localisation", "angle", None),
        Subtask("TDS-E", "scene structure", "choice", None),
        Subtask("TDS-M", "scene structure", "choice", None),
        Subtask("TDS-H", "scene structure", "choice", None),
        Subtask("Traj", "scene structure", "choice", None),
    )
}
CODES = tuple(SUBTASKS)
CHOICES = ("A", "B", "C", "D")
TDS_LEVEL = {"TDS-E": "easy", "TDS-M": "medium", "TDS-H": "hard"}


def check_codes(codes) -> list[str]:
    codes = list(codes)
    bad = [c for c in codes if c not in SUBTASKS]
    if bad:
        raise ValueError(f"unknown GST subtask(s) {bad}; valid codes: {list(CODES)}")
    return codes
