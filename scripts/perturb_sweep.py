"""Success of one agent on LIBERO under each robustness factor (``env.perturb``) and level, beside the
nominal scene: one resumable ``vla-rollout`` per setting under ``<root>/<setting>/``, then a table.

    .venv/bin/python scripts/perturb_sweep.py --root runs/perturb/expert --trials 10 agent=scripted
    .venv/bin/python scripts/perturb_sweep.py --root runs/perturb/proof --factors camera,noise --levels 1,2 \\
        agent=vla agent.checkpoint=runs/proof/libero_noise/train/checkpoints/step_2000 \\
        "env.cameras=[agentview,wrist]" env.depth=false env.segmentation=false

Every ``key=value`` argument goes to every ``vla-rollout`` (the agent, and env options the agent
needs); the suite, tasks and trials are this script's ``--`` options. A killed sweep rerun with the same command
continues where it stopped. ``<root>/sweep.json`` and ``<root>/sweep.md`` hold the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.libero.perturb import FACTORS, MAX_LEVEL  # noqa: E402


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str], list[int], list[str]]:
    """The options, factors, levels and ``key=value`` overrides of a sweep, checked (the overrides as
    ``vla-rollout`` composes and checks them) before anything runs; argparse's usage error otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--tasks", default="0", help="comma-separated task ids")
    ap.add_argument("--trials", type=int, default=10, help="trials per task and setting (official init states)")
    ap.add_argument("--factors", default=",".join(FACTORS))
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--workers", type=int, default=1)
    a, extra = ap.parse_known_args(argv)
    dashed = [x for x in extra if x.startswith("-")]
    if dashed:
        ap.error(f"unknown option(s) {dashed}")
    factors = [f for f in a.factors.split(",") if f]
    bad = sorted(set(factors) - set(FACTORS))
    if bad:
        ap.error(f"unknown factor(s) {bad}; factors: {list(FACTORS)}")
    try:
        levels = sorted({int(x) for x in a.levels.split(",") if x})
    except ValueError:
        ap.error(f"--levels must be comma-separated integers 1-{MAX_LEVEL}, got {a.levels!r}")
    if not levels or not all(1 <= lv <= MAX_LEVEL for lv in levels):
        ap.error(f"--levels must be in 1-{MAX_LEVEL}, got {a.levels!r}")
    if not any(x.startswith("agent=") for x in extra):
        ap.error("name the agent, e.g. agent=scripted")
    from vla.config import check_config
    from vla.config import compose

    try:  # the overrides every vla-rollout of the sweep gets (a bad one would fail the first)
        check_config(compose("rollout", ["env=libero", f"env.suite={a.suite}", f"eval.tasks=[{a.tasks}]", *extra]))
    except ValueError as exc:
        ap.error(f"the vla-rollout overrides: {exc}")
    return a, factors, levels, extra


def main(argv: list[str] | None = None) -> int:
    a, factors, levels, extra = parse_args(argv)
    settings = [("nominal", "")] + [(f"{f}:{lv}", f"{f}:{lv}") for f in factors for lv in levels]
    root = Path(a.root)
    results = {}
    for i, (name, spec) in enumerate(settings, 1):
        out = root / name.replace(":", "_")
        cmd = [
            str(Path(sys.executable).parent / "vla-rollout"),
            "env=libero",
            f"env.suite={a.suite}",
            *([f"env.perturb={spec}"] if spec else []),
            f"eval.tasks=[{a.tasks}]",
            f"eval.trials_per_task={a.trials}",
            f"eval.workers={a.workers}",
            *extra,
            f"out={out}",
            "progress=false",
        ]
        print(f"[{i}/{len(settings)}] {name}", flush=True)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "sweep.log", "a") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode  # here: out= is relative to it
        if rc != 0:
            print(f"{name}: vla-rollout failed ({rc}); see {out / 'sweep.log'}", file=sys.stderr)
            return rc
        s = json.loads((out / "summary.json").read_text())
        results[name] = {k: s[k] for k in ("episodes", "successes", "errors", "success_rate")}
    (root / "sweep.json").write_text(json.dumps({"command": sys.argv, "results": results}, indent=2))
    table = table_md(results, factors, levels)
    (root / "sweep.md").write_text(table + "\n")
    print(table)
    return 0


def table_md(results: dict, factors: list[str], levels: list[int]) -> str:
    def cell(r: dict) -> str:
        err = f", {r['errors']} errors" if r["errors"] else ""
        return f"{100 * (r['success_rate'] or 0):.0f} % ({r['successes']}/{r['episodes'] - r['errors']}{err})"

    rows = [f"| factor | {' | '.join(f'level {lv}' for lv in levels)} |", "|---|" + "---|" * len(levels)]
    rows.append(f"| nominal | {cell(results['nominal'])} |" + " |" * (len(levels) - 1))
    for f in factors:
        rows.append(f"| {f} | " + " | ".join(cell(results[f"{f}:{lv}"]) for lv in levels) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
