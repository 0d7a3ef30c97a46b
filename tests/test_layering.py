"""The layering rule (docs/ARCHITECTURE.md §2), read from the source with ``ast`` (nothing is imported).

* The top-level packages import one way: ``vla -> envs -> spatial_memory -> vla_common``.
* No import circles between modules.
* Inside ``vla``, the parts everything else builds on stay below it: the action tokens, GST's questions,
  the memory transform, the policy, the wire format and client, openpi's key maps and the agents import
  none of data, gst, serve, eval, rollout, train or the CLIs (:data:`VLA_BELOW`), except the arrows in
  :data:`ALLOWED`, each with its reason (none today).

What counts as an arrow: every ``import`` / ``from ... import`` statement of a module, wherever it stands
-- at the top, inside a function (a lazy import), under ``if TYPE_CHECKING:``. A lazy import only moves
the moment the dependency is paid; a type-only import is still a module its reader needs. Importing
``a.b.c`` also runs the ``__init__`` of ``a.b`` (unless it is the importer's own package), so that is an
arrow too. Names in a registry that are imported by string (``"vla.agents.random:RandomAgent"``) are
plug-ins, not arrows.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vla_common", "spatial_memory", "envs", "vla")  # lowest first: a package imports only those before it

# vla's lower parts: what each may import of vla, besides itself (anything of envs and spatial_memory)
VLA_BELOW = {
    "vla.actions": set(),
    "vla.questions": set(),  # GST's questions, answers and the memory's answerer, and the spatial-perception
    #                          questions (perception/); the harnesses (vla.gst, vla-data spatial) are above
    "vla.navigation": set(),  # the navigator's grid and planner on the memory's map (envs and spatial_memory only)
    "vla.transforms": {"vla.actions", "vla.navigation"},  # the routes a policy reads (the routes memory input)
    "vla.policy": {"vla.actions", "vla.transforms", "vla.questions"},  # a question's inputs for the policy
    "vla.wire": set(),  # the wire format and the server's client: what the remote and openpi agents speak
    "vla.openpi_keys": {"vla.config"},  # the key maps are declared in configs/openpi/
    "vla.agents": {
        *("vla.actions", "vla.navigation", "vla.transforms", "vla.policy"),
        *("vla.openpi_keys", "vla.questions", "vla.wire"),
    },
}

# (importer, imported): why the arrow is there although the rule above forbids it. A stale entry fails.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    path: str  # the importer's file, relative to the root
    line: int
    written: bool  # False: the __init__ of a package, run by importing one of its modules

    def __str__(self) -> str:
        via = "" if self.written else " (its __init__)"
        return f"{self.source} -> {self.target}{via}  [{self.path}:{self.line}]"


def modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's ``__init__``) of every module of the packages."""
    found = {}
    for package in PACKAGES:
        for f in sorted((root / package).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            is_init = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_init else parts)] = (f, is_init)
    return found


def _imported_names(name: str, is_init: bool, node: ast.Import | ast.ImportFrom, path: str) -> list[str]:
    """The dotted names a statement may load: ``a.b`` for ``import a.b``; ``a.b.c`` (a module or a name
    of ``a.b``) for ``from a.b import c``, relative imports resolved against the importer."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        package = name.split(".") if is_init else name.split(".")[:-1]
        if node.level - 1 > len(package) - 1:
            raise AssertionError(f"{path}:{node.lineno}: relative import beyond the top-level package")
        base = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [f"{base}.{a.name}" for a in node.names]


def arrows(root: Path = ROOT) -> list[Arrow]:
    """Every arrow between modules of the packages (see the module doc for what counts)."""
    mods = modules(root)
    out: dict[tuple[str, str], Arrow] = {}
    for name, (f, is_init) in mods.items():
        rel = str(f.relative_to(root))
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), filename=rel)):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for dotted in _imported_names(name, is_init, node, rel):
                if dotted.split(".")[0] not in PACKAGES:
                    continue
                target = dotted  # the longest prefix that is a module: `from pkg import name` -> pkg
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if not target:
                    raise AssertionError(f"{rel}:{node.lineno}: imports {dotted}, which is no module of ours")
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    t = ".".join(parts[:i])
                    written = i == len(parts)
                    own_package = (name + ".").startswith(t + ".")
                    if t == name or t not in mods or (own_package and not written):
                        continue
                    out.setdefault((name, t), Arrow(name, t, rel, node.lineno, written))
    return sorted(out.values(), key=lambda a: (a.source, a.target))


def _top(module: str) -> str:
    return module.split(".")[0]


def _part(module: str) -> str:
    """The part of vla a module belongs to: ``vla.agents`` for ``vla.agents.map_agent``."""
    return ".".join(module.split(".")[:2])


def upward(found: list[Arrow]) -> list[Arrow]:
    rank = {p: i for i, p in enumerate(PACKAGES)}
    return [a for a in found if rank[_top(a.target)] > rank[_top(a.source)]]


def circles(found: list[Arrow]) -> list[list[Arrow]]:
    """One shortest circle per strongly connected group of modules (Tarjan, then a breadth-first search)."""
    graph: dict[str, dict[str, Arrow]] = {}
    for a in found:
        graph.setdefault(a.source, {})[a.target] = a
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for group in groups:
        start = min(group)
        came: dict[str, Arrow] = {}
        queue = deque([start])
        while queue:  # the shortest way from start back to start inside the group
            v = queue.popleft()
            for w, a in sorted(graph.get(v, {}).items()):
                if w in group and w not in came:
                    came[w] = a
                    queue.append(w)
            if start in came:
                break
        path, v = [], start
        while True:
            a = came[v]
            path.append(a)
            v = a.source
            if v == start:
                break
        out.append(path[::-1])
    return out


def below_violations(found: list[Arrow]) -> list[Arrow]:
    bad = []
    for a in found:
        part, to = _part(a.source), _part(a.target)
        if a.written and part in VLA_BELOW and _top(a.target) == "vla" and to != part and to not in VLA_BELOW[part]:
            bad.append(a)
    return bad


def part_arrows(found: list[Arrow]) -> list[Arrow]:
    """vla's parts (its folders and top-level modules) as the nodes: one arrow joining each pair, a
    written import where there is one."""
    out: dict[tuple[str, str], Arrow] = {}
    for a in found:
        if _top(a.source) == _top(a.target) == "vla" and "." in a.source and "." in a.target:
            key = (_part(a.source), _part(a.target))
            if key[0] != key[1] and (key not in out or (a.written and not out[key].written)):
                out[key] = Arrow(*key, a.path, a.line, a.written)
    return list(out.values())


def _lines(found) -> str:
    return "\n  ".join(str(a) for a in found)


# ---------------------------------------------------------------------------------------------- tests
def test_packages_import_one_way():
    bad = upward(arrows())
    assert not bad, f"arrows point one way, {' -> '.join(PACKAGES[::-1])}; these point back:\n  {_lines(bad)}"


def test_no_import_circles():
    found = circles(arrows())
    text = "\n".join("  " + " -> ".join([c[0].source] + [f"{a.target} [{a.path}:{a.line}]" for a in c]) for c in found)
    assert not found, f"import circles (break them: a shared piece in a module both import):\n{text}"


def test_vla_parts_import_one_way():
    """No circle between vla's folders either (``data`` <-> ``spatial`` and ``eval`` <-> ``gst`` were two,
    each made of arrows between different modules): a part is read with what it imports, never with what
    imports it."""
    found = circles(part_arrows(arrows()))
    text = "\n".join("  " + " -> ".join([c[0].source] + [f"{a.target} [{a.path}:{a.line}]" for a in c]) for c in found)
    assert not found, f"circles between vla's parts (move the shared piece, or make one side a plug-in):\n{text}"


def test_vla_lower_parts_stay_below():
    found = arrows()
    bad = [a for a in below_violations(found) if (a.source, a.target) not in ALLOWED]
    assert not bad, (
        "vla's lower parts import only what VLA_BELOW lists (tests/test_layering.py); these arrows point up "
        f"(move the piece down, or list the arrow in ALLOWED with its reason):\n  {_lines(bad)}"
    )
    present = {(a.source, a.target) for a in found}
    stale = sorted(k for k in ALLOWED if k not in present)
    assert not stale, f"ALLOWED lists arrows that are gone; remove them: {stale}"


def test_the_checks_see_a_planted_circle_and_an_upward_arrow(tmp_path):
    """The checks themselves: a circle through a lazy import and a type-only import, and an arrow from
    spatial_memory up into vla, planted in a copy-sized miniature of the layout."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "vla" / "a.py").write_text("def f():\n    from .b import g\n")
    (tmp_path / "vla" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vla.a import f\ng = 1\n"
    )
    (tmp_path / "spatial_memory" / "m.py").write_text("import vla.a\n")
    (tmp_path / "envs" / "e.py").write_text("from spatial_memory import m\n")
    found = arrows(tmp_path)
    found_circles = circles(found)
    assert [[str(a) for a in c] for c in found_circles] == [
        ["vla.a -> vla.b  [vla/a.py:2]", "vla.b -> vla.a  [vla/b.py:3]"]
    ]
    assert [str(a) for a in upward(found)] == [
        "spatial_memory.m -> vla (its __init__)  [spatial_memory/m.py:1]",
        "spatial_memory.m -> vla.a  [spatial_memory/m.py:1]",
    ]
    assert "envs.e -> spatial_memory.m  [envs/e.py:1]" in [str(a) for a in found]


def test_a_circle_between_vla_parts_is_seen_without_a_module_circle(tmp_path):
    for package in ("vla", "vla/p", "vla/q"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "vla" / "p" / "x.py").write_text("from vla.q import y\n")
    (tmp_path / "vla" / "q" / "y.py").write_text("")
    (tmp_path / "vla" / "q" / "z.py").write_text("def f():\n    from vla.p import w\n")
    (tmp_path / "vla" / "p" / "w.py").write_text("")
    found = arrows(tmp_path)
    assert circles(found) == []
    assert [[str(a) for a in c] for c in circles(part_arrows(found))] == [
        ["vla.p -> vla.q  [vla/p/x.py:1]", "vla.q -> vla.p  [vla/q/z.py:2]"]
    ]
