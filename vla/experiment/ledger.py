"""The test sets' use counts: one line per completed test stage of a recipe, kept in the repository.

A test set chooses nothing: once a recipe's test has run, running it again (a new seed, a fixed bug, a
second look) is a second use, which a reader must be told of. The runner refuses a test stage whose
recipe identity (:meth:`vla.experiment.recipe.Recipe.content_hash`) the ledger already holds unless it
is forced, and every completed test -- forced or not -- adds a line; docs/RESULTS.md's "uses before"
column counts them. A test stage that was killed and resumed is one use: the line is written when it
completes. The default ledger is ``docs/experiments/test_uses.jsonl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from .recipe import ROOT

LEDGER = ROOT / "docs" / "experiments" / "test_uses.jsonl"


def read(path: Path = LEDGER) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def uses(content_hash: str, path: Path = LEDGER) -> list[dict[str, Any]]:
    """The completed tests of one recipe identity, oldest first."""
    return [r for r in read(path) if r.get("hash") == content_hash]


def set_uses(test_set: str, path: Path = LEDGER) -> list[dict[str, Any]]:
    """The completed tests of every recipe on one test set (what docs/RESULTS.md's "uses before" counts,
    with the other agents' runs it lists by hand)."""
    return [r for r in read(path) if r.get("test_set") == test_set]


class TestUsed(RuntimeError):
    pass


def check(name: str, content_hash: str, force: bool, path: Path = LEDGER) -> int:
    """The number of earlier uses of this recipe's test; :class:`TestUsed` when there are some and the
    run is not forced."""
    before = uses(content_hash, path)
    if before and not force:
        last = before[-1]
        raise TestUsed(
            f"experiment {name!r} (recipe {content_hash}) has been tested {len(before)} time(s), last at "
            f"commit {last.get('commit', '?')} on {last.get('date', '?')} ({path}). A test set chooses nothing: "
            "stage=table reads the result again, stage=record|train|select run without testing, and "
            "force=true is a new use that docs/RESULTS.md must count."
        )
    return len(before)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def record(
    name: str, content_hash: str, test_set: str, forced: bool, root: Path, result: Any, path: Path = LEDGER
) -> None:
    """Appends one completed test (a line written whole: appends of a few hundred bytes are atomic)."""
    row = {
        "experiment": name,
        "hash": content_hash,
        "test_set": test_set,
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d"),
        "forced": bool(forced),
        "root": str(root),
        "result": result,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(row, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
