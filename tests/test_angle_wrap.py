"""One angle wrap: every angle of the project wraps to (-pi, pi] / (-180, 180] through
``spatial_memory.geometry.wrap_angle`` / ``wrap_deg`` (docs/ARCHITECTURE.md §4). A second wrap
written inline -- ``atan2(sin(a), cos(a))``, ``(a + pi) % (2 pi) - pi``, ``(d + 180) % 360 - 180``,
``np.mod(a + pi, 2 pi)`` -- is easy to write with the other half-open range ([-pi, pi)), so the
project's source is scanned for them. Tests are not scanned: their oracles compute on their own."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("vla_common", "spatial_memory", "envs", "vla", "scripts", "analyses")
HELPERS = {("spatial_memory/geometry.py", "wrap_angle"), ("spatial_memory/geometry.py", "wrap_deg")}
FULL_TURNS = (2 * math.pi, 360.0)
HALF_TURNS = (math.pi, 180.0)
MAY_WRAP = re.compile(r"tan2\(|mod\(|remainder\(|%")  # every form below needs one of these (a cheap first pass)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _number(node: ast.AST) -> float | None:
    """The value of a constant expression of numbers, ``pi`` and ``tau`` (any module), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    name = _dotted(node).split(".")[-1]
    if name == "pi":
        return math.pi
    if name == "tau":
        return 2 * math.pi
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _number(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp):
        a, b = _number(node.left), _number(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Div) and b:
            return a / b
    return None


def _is(value: float | None, turns: tuple[float, ...]) -> bool:
    return value is not None and any(math.isclose(value, t) for t in turns)


def _shifts_by_half_turn(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.BinOp)
        and isinstance(n.op, (ast.Add, ast.Sub))
        and (_is(_number(n.left), HALF_TURNS) or _is(_number(n.right), HALF_TURNS))
        for n in ast.walk(node)
    )


def _call_name(node: ast.AST) -> str:
    return _dotted(node.func).split(".")[-1] if isinstance(node, ast.Call) else ""


def _is_wrap(node: ast.AST) -> bool:
    if _call_name(node) in ("atan2", "arctan2") and len(node.args) == 2:
        return _call_name(node.args[0]) == "sin" and _call_name(node.args[1]) == "cos"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _is(_number(node.right), FULL_TURNS) and _shifts_by_half_turn(node.left)
    if _call_name(node) in ("mod", "fmod", "remainder") and len(node.args) == 2:
        return _is(_number(node.args[1]), FULL_TURNS) and _shifts_by_half_turn(node.args[0])
    return False


def wraps_in(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of every inline angle wrap in a module's source."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if _is_wrap(node):
            found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "")
    return found


@pytest.mark.parametrize(
    "code",
    [
        "y = (a + np.pi) % (2 * np.pi) - np.pi",  # [-pi, pi)
        "y = float(np.arctan2(np.sin(th), np.cos(th)))",
        "y = math.atan2(math.sin(a + b), math.cos(a + b))",
        "y = np.mod(x + np.pi, 2 * np.pi) - np.pi",
        "y = math.fmod(a + math.pi, math.tau)",
        "y = (d - 180.0) % 360 - 180",
    ],
)
def test_the_scan_finds_an_inline_wrap(code):
    assert MAY_WRAP.search(code) and wraps_in(code) == [(1, "")]


@pytest.mark.parametrize(
    "code",
    [
        "e = abs(a - b) % 360.0",  # an angular error, not a wrap
        "y = np.mod(yaw, np.pi / 2)",  # a box's symmetry, not a wrap
        "y = math.atan2(dy, dx)",
        "y = wrap_angle(a + np.pi)",
    ],
)
def test_the_scan_leaves_other_arithmetic_alone(code):
    assert wraps_in(code) == []


def test_no_angle_wrap_outside_the_canonical_helpers():
    found, helpers = [], set()
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            for line, function in wraps_in(text) if MAY_WRAP.search(text) else []:
                if (rel, function) in HELPERS:
                    helpers.add((rel, function))
                else:
                    found.append(f"{rel}:{line} (in {function or 'module level'})")
    assert helpers == HELPERS, "the scan no longer sees the canonical helpers themselves"
    assert not found, (
        "angles wrapped inline; use spatial_memory.geometry.wrap_angle (radians) or wrap_deg (degrees): "
        + ", ".join(found)
    )
