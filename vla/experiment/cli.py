"""``vla-experiment NAME [stage=...] [root=DIR] [workers=N] [force=true] [OPTION=VALUE ...]``: one named
result, end to end (docs/experiments/README.md).

    vla-experiment libero_object_oft                 # record, train, select on val, test, table
    vla-experiment libero_object_oft stage=select    # record, train, choose on val: all but the test
    vla-experiment libero_object_oft stage=table     # the results again, nothing run
    vla-experiment --list                            # the named recipes

Every stage is one of the project's own commands (vla-rollout, vla-train, vla-gst), each resumable:
running the same command again continues where it stopped. Outputs go to ``runs/experiments/NAME``
(``root=`` elsewhere): ``results.json``, ``curves.png``, the stages' logs, the recipe as run
(``recipe.json``). The checkpoint is chosen on val by the recipe's rule, mechanically; the test stage
runs once per recipe (``vla.experiment.ledger``): a second test of the same recipe is refused unless
``force=true``, and each completed test adds to its use count. ``OPTION=VALUE`` overrides one of the
recipe's options (a different recipe: its own hash and test count); ``workers`` only says how it runs.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from vla_common.atomic import write_json_atomic

from . import ledger
from .costs import stage_costs, unfinished
from .recipe import STAGES, Recipe, load, names

CONTROL = ("stage", "root", "force", "ledger")


def parse(argv: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, control settings, option overrides) from the command line; values read as YAML scalars."""
    if not argv or argv[0].startswith(("-", "=")) or "=" in argv[0]:
        raise ValueError(f"usage: vla-experiment NAME [stage=...] [OPTION=VALUE ...]; the named ones: {names()}")
    name, control, overrides = argv[0], {}, {}
    for arg in argv[1:]:
        key, eq, value = arg.partition("=")
        if not eq or not key:
            raise ValueError(f"expected KEY=VALUE, got {arg!r}")
        (control if key in CONTROL else overrides)[key] = yaml.safe_load(value) if value else ""
    stage = control.setdefault("stage", "all")
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    control["force"] = bool(control.get("force", False))
    return name, control, overrides


def run(recipe: Recipe, stage: str, root: Path, force: bool = False, ledger_path: Path = ledger.LEDGER) -> dict:
    """Runs ``stage`` of ``recipe`` under ``root``; returns its results (also ``root/results.json``)."""
    from .curves import plot_arms
    from .detector import detector
    from .gst import gst
    from .gst_eval import gst_eval
    from .house import house, house_table
    from .libero import libero
    from .libero_mem import libero_mem
    from .libero_suite import libero_suite
    from .openpi import openpi
    from .replay import replay
    from .rollouts import rollouts
    from .spatial import spatial

    h = recipe.content_hash()
    testing = stage in ("all", "test") and recipe.kind != "replay"  # a replay runs on a training state: no test set
    before = ledger.check(recipe.name, h, force, ledger_path) if testing else len(ledger.uses(h, ledger_path))
    set_before = len(ledger.set_uses(recipe.test_set(), ledger_path))
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(root / "recipe.json", {"name": recipe.name, "hash": h, **recipe.identity()})
    a = SimpleNamespace(**asdict(recipe.options), root=str(root), stage=stage)
    runners = dict(
        libero=libero, house=house, gst=gst, spatial=spatial, replay=replay, gst_eval=gst_eval, rollouts=rollouts,
        openpi=openpi, detector=detector, libero_mem=libero_mem, libero_suite=libero_suite,
    )  # fmt: skip
    res = runners[recipe.kind](a)
    res = {"experiment": recipe.name, "hash": h, "test_set": recipe.test_set(), **res}
    res.update(tests_before=before, test_set_uses_before=set_before, costs=stage_costs(root))
    if testing and res.get("test"):
        ledger.record(recipe.name, h, recipe.test_set(), force and before > 0, root, _brief(res["test"]), ledger_path)
    write_json_atomic(root / "results.json", res)
    plot_arms(root, res.get("val", {}))  # the trained arms side by side (nothing where root/train has no run)
    print(json.dumps(res, indent=2))
    if recipe.kind == "house":
        print(house_table(res))
    for line in unfinished(res["costs"]):  # a long run's progress, where stage=table is asked while it runs
        print(f"vla-experiment: unfinished: {line}", file=sys.stderr)
    return res


def _brief(test: dict) -> Any:
    """What the ledger keeps of a test: its scalar numbers (an arm's, or the whole)."""

    def scalars(d: dict) -> dict:
        return {k: v for k, v in d.items() if isinstance(v, (int, float, str, bool)) or v is None}

    if all(isinstance(v, dict) for v in test.values()):
        return {arm: scalars(v) for arm, v in test.items()}
    return scalars(test)


def options(argv: list[str]) -> tuple[Recipe, dict[str, Any]]:
    """The recipe and the control settings a command line asks for (ValueError: what is wrong); nothing
    runs (the docs check composes documented commands with it)."""
    if argv[:1] in (["--list"], ["-l"], ["-h"], ["--help"]):
        return load(names()[0]), {}
    name, control, overrides = parse(argv)
    return load(name, overrides), control


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--list"], ["-l"]):
        for n in names():
            r = load(n)
            print(f"{n:28s} {r.kind:7s} {r.content_hash()}  {r.summary}")
        return 0
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    try:
        recipe, control = options(argv)
    except ValueError as e:
        print(f"vla-experiment: {e}", file=sys.stderr)
        return 2
    root = Path(control.get("root") or Path("runs") / "experiments" / recipe.name)
    try:
        run(recipe, control["stage"], root, control["force"], Path(control.get("ledger") or ledger.LEDGER))
    except ledger.TestUsed as e:
        print(f"vla-experiment: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
