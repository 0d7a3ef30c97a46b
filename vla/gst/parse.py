"""Free-text answers -> typed answers. Anything unparseable becomes ``None`` (scored 0), never an error.

Accepted forms (examples): ``"-134°"``, ``"turn right 45 degrees"``, ``"about 1.3 m"``,
``"130 cm"``, ``"<point>391 698</point>"``, ``"(391, 698)"``, ``"(B) because ..."``,
``"The answer is C."``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from vla.questions.subtasks import CHOICES

_NUM = r"[-+−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"  # "1.5e2" is one number, not 1.5
_NUMBER = re.compile(_NUM)
_POINT_TAG = re.compile(r"<point>\s*(" + _NUM + r")\s*[, ]\s*(" + _NUM + r")\s*</point>", re.IGNORECASE)
_POINT_PAIR = re.compile(r"[\(\[]\s*(" + _NUM + r")\s*[, ]\s*(" + _NUM + r")\s*[\)\]]")
_POINT_BARE = re.compile(r"(?<![\d.])(" + _NUM + r")\s*[, ]\s*(" + _NUM + r")(?![\d.])")
_UNITS = {
    "mm": 0.001,
    "millimetre": 0.001,
    "millimeter": 0.001,
    "cm": 0.01,
    "centimetre": 0.01,
    "centimeter": 0.01,
    "m": 1.0,
    "metre": 1.0,
    "meter": 1.0,
    "km": 1000.0,
    "ft": 0.3048,
    "feet": 0.3048,
    "foot": 0.3048,
}
_DIST = re.compile(
    r"(" + _NUM + r")\s*(mm|millimet(?:re|er)s?|cm|centimet(?:re|er)s?|km|ft|feet|foot|m(?:et(?:re|er)s?)?)?\b",
    re.IGNORECASE,
)


def _f(text: str) -> float:
    return float(text.replace("−", "-"))


def parse_angle(text: str) -> float | None:
    """Degrees, left positive. A signed number wins; an unsigned one takes its side from 'left'/'right'."""
    if not isinstance(text, str):
        return None
    t = text.strip().lower()
    m = _NUMBER.search(t)
    if m is None:
        if re.search(r"straight ahead|in front|directly ahead", t):
            return 0.0
        if re.search(r"\bbehind\b", t):
            return 180.0
        return None
    value = _f(m.group(0))
    if m.group(0)[0] not in "+-−":
        left, right = (
            "left" in t or "counter" in t or "anticlockwise" in t,
            re.search(r"\bright\b|(?<!counter-)(?<!counter)clockwise", t) is not None,
        )
        if right and not left:
            value = -value
    if "rad" in t[m.end() : m.end() + 8] and "deg" not in t:
        value = value * 180.0 / 3.141592653589793
    if not -360.0 <= value <= 360.0:
        return None
    return value


def parse_distance(text: str) -> float | None:
    if not isinstance(text, str):
        return None
    m = _DIST.search(text.strip())
    if m is None:
        return None
    value = _f(m.group(1))
    unit = (m.group(2) or "m").lower()
    key = next((k for k in sorted(_UNITS, key=len, reverse=True) if unit.startswith(k)), "m")
    value *= _UNITS[key]
    return value if 0 <= value < math.inf else None


def parse_point(text: str) -> tuple[float, float] | None:
    if not isinstance(text, str):
        return None
    for pattern in (_POINT_TAG, _POINT_PAIR, _POINT_BARE):
        m = pattern.search(text)
        if m:
            x, y = _f(m.group(1)), _f(m.group(2))
            if 0 <= x <= 999 and 0 <= y <= 999:
                return (x, y)
            return None
    return None


_CHOICE_PATTERNS = (
    re.compile(r"(?:answer|option|choice)\s*(?:is|:)?\s*\(?([A-D])\b", re.IGNORECASE),  # "The answer is C"
    re.compile(r"\(([A-D])\)"),  # "(B) because", "... is (C)"
    re.compile(r"^\s*([A-D])\s*(?:$|[\.\):,])"),  # "B", "B.", "B)"
    re.compile(r"(?<![A-Za-z])([A-D])(?![A-Za-z])(?!\s+[a-z])"),  # a lone capital letter, not the article "A map"
)


def parse_choice(text: str) -> str | None:
    if not isinstance(text, str):
        return None
    for p in _CHOICE_PATTERNS:
        m = p.search(text)
        if m:
            letter = m.group(1).upper()
            return letter if letter in CHOICES else None
    return None


PARSERS = {"angle": parse_angle, "distance": parse_distance, "point": parse_point, "choice": parse_choice}


def parse(answer_type: str, text: Any) -> Any:
    if answer_type not in PARSERS:
        raise ValueError(f"unknown answer type {answer_type!r}; expected one of {sorted(PARSERS)}")
    try:
        return PARSERS[answer_type](text)
    except (ValueError, TypeError, OverflowError):
        return None
