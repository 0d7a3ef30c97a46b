#!/usr/bin/env python
"""The tables of a ``libero_suite`` experiment (docs/LIBERO.md, "One policy for a suite"), in markdown,
from what its run wrote: ``results.json`` (``vla-experiment NAME stage=table`` brings it up to date)
and the task names of its test rollout's ``plan.json``. Three tables:

* per task: each arm's successes on the official states with the 95 % Wilson interval, and where the
  policy's failures stopped;
* the language check: per task, under its own instruction and under the other bowl's, the successes
  and which bowl was taken (named / other / none);
* LIBERO-Plus's factors: the policy's success per factor at levels 1 and 2 beside its nominal success,
  and the published rows of the factors this project shares with the paper's table (their models, all
  four suites, all levels: a reference point, not the same test).

``--val ARM`` prints instead where that arm's val episodes ended, per task over all its checkpoints or
closed-loop settings (``--val ARM/RUN``: one of them; read from ``val/ARM/*/episodes.jsonl``, nothing from
the test): solved, never picked the named
bowl, picked it and never placed it, and put the other bowl where the goal wanted the named one (the
episode row's ``took``, envs/libero/progress.py) -- the numbers a next attempt is chosen from.

Examples::

    .venv/bin/python scripts/suite_table.py runs/experiments/libero_spatial_suite
    .venv/bin/python scripts/suite_table.py runs/experiments/libero_spatial_suite --val policy
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# LIBERO-Plus's published success (%) under camera, robot initial state and language changes, and its total
# (docs/LIBERO.md; pi0.5's is a community run)
PUBLISHED = {
    "OpenVLA": (0.8, 3.5, 23.0, 15.6),
    "pi0": (13.8, 6.0, 58.8, 53.6),
    "OpenVLA-OFT": (56.4, 31.9, 79.5, 69.6),
    "pi0.5": (67.3, 78.8, 86.3, 84.2),
}
FACTORS = ("camera", "robot", "language", "light", "texture", "noise", "layout")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _cell(t: dict | None) -> str:
    if not t:
        return "-"
    lo, hi = t["wilson95"]
    return f"{t['success']}/{t['episodes']} [{100 * lo:.0f}, {100 * hi:.0f}]"


def task_names(root: Path) -> dict[str, str]:
    """Task id -> name, from the first test rollout's plan (empty when none ran)."""
    for plan in sorted(root.glob("test/*/plan.json")):
        return {str(k): v for k, v in json.loads(plan.read_text()).get("tasks", {}).items()}
    return {}


def per_task(res: dict, names: dict[str, str]) -> list[str]:
    arms = sorted(res.get("test", {}))
    if not arms:
        return ["(nothing tested yet)"]
    out = [
        "| task | " + " | ".join(arms) + " | where the policy's failures stopped |",
        "|---" * (len(arms) + 2) + "|",
    ]
    ids = sorted({t for a in arms for t in res["test"][a]["tasks"]}, key=int)
    for t in ids:
        cells = [_cell(res["test"][a]["tasks"].get(t)) for a in arms]
        failed = (res["test"].get("policy", {}).get("tasks", {}).get(t) or {}).get("failed_at", {})
        where = ", ".join(f"{n} {stage}" for stage, n in sorted(failed.items(), key=lambda kv: -kv[1])) or "-"
        out.append(f"| {t} {names.get(t, '')} | " + " | ".join(cells) + f" | {where} |")
    total = []
    for a in arms:
        r = res["test"][a]
        lo, hi = r["wilson95"]
        k = sum(t["success"] for t in r["tasks"].values())
        total.append(f"**{k}/{r['episodes']}** ({_pct(r['success'])} %) [{100 * lo:.0f}, {100 * hi:.0f}]")
    out.append("| all | " + " | ".join(total) + " | |")
    return out


def language(res: dict, arm: str = "policy") -> list[str]:
    lang = res.get("language", {}).get(arm)
    if not lang:
        return [f"(no language check for {arm})"]

    def took(d: dict) -> str:
        return f"{d['success']}/{d['episodes']} (named {d['named']}, other {d['other']}, none {d['none']})"

    out = ["| task | own instruction | the other bowl's |", "|---|---|---|"]
    for t, row in sorted(lang["tasks"].items(), key=lambda kv: int(kv[0])):
        out.append(f"| {t} | {took(row['own'])} | {took(row['distractor'])} |")
    out.append(f"| all | {took(lang['own'])} | {took(lang['distractor'])} |")
    return out


def perturb(res: dict) -> list[str]:
    got = res.get("perturb") or {}
    nominal = (res.get("test", {}).get("policy") or {}).get("success")
    out = ["| factor | level 1 | level 2 | nominal (official states) |", "|---|---|---|---|"]
    for f in FACTORS:
        out.append(f"| {f} | {_pct(got.get(f'{f}_1'))} | {_pct(got.get(f'{f}_2'))} | {_pct(nominal)} |")
    out += ["", "| LIBERO-Plus (published) | camera | robot | language | total |", "|---|---|---|---|---|"]
    for model, row in PUBLISHED.items():
        out.append(f"| {model} | " + " | ".join(f"{x:.1f}" for x in row) + " |")
    return out


def val_rows(root: Path, arm: str) -> list[dict]:
    """Every finished val episode of ``arm``, all its checkpoints (or closed-loop settings) together; of one
    of them with ``ARM/RUN`` (``policy/step_5000``)."""
    from vla.experiment.tables import read_rows

    val = root / "val" / arm
    runs = [val] if (val / "episodes.jsonl").exists() else sorted(p for p in val.iterdir() if p.is_dir())
    return [r for run in runs for r in read_rows(run)]


def val_stops(rows: list[dict]) -> list[str]:
    """Per task: how many val episodes were solved, never picked the named object, picked it and never
    placed it, ended otherwise, and (apart, any outcome) put the other object of its kind where the goal
    wanted the named one."""
    if not rows:
        return ["(no val episodes)"]
    cols = ("solved", "never picked", "never placed", "other stage", "other object placed")
    out = ["| task | episodes | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    total = dict.fromkeys(cols, 0)

    def count(got: list[dict]) -> dict[str, int]:
        c = dict.fromkeys(cols, 0)
        for r in got:
            reached = int(r.get("stages_reached") or 0)  # the goal's stages: pick, place (envs/libero/progress.py)
            if r["success"]:
                c["solved"] += 1
            elif reached == 0:
                c["never picked"] += 1
            elif reached == 1:  # picked, and the move it was picked for never held
                c["never placed"] += 1
            else:
                c["other stage"] += 1
            took = r.get("took") or ""
            c["other object placed"] += bool(took) and took != r.get("goal_object")
        return c

    for t in sorted({int(r["task_id"]) for r in rows}):
        got = [r for r in rows if int(r["task_id"]) == t]
        c = count(got)
        out.append(f"| {t} | {len(got)} | " + " | ".join(str(c[k]) for k in cols) + " |")
        total = {k: total[k] + c[k] for k in cols}
    out.append(f"| all | {len(rows)} | " + " | ".join(f"**{total[k]}**" for k in cols) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path, help="the experiment's directory (runs/experiments/NAME)")
    p.add_argument(
        "--val", metavar="ARM[/RUN]", help="where ARM's val episodes ended, per task (all its val runs, or RUN)"
    )
    args = p.parse_args(argv)
    if args.val:
        if not (args.root / "val" / args.val).is_dir():
            raise SystemExit(f"error: {args.root / 'val' / args.val} does not exist: no val run {args.val!r}")
        print(f"### Where {args.val}'s val episodes ended\n\n" + "\n".join(val_stops(val_rows(args.root, args.val))))
        return 0
    path = args.root / "results.json"
    if not path.exists():
        raise SystemExit(f"error: {path} does not exist; run vla-experiment NAME stage=table first")
    res = json.loads(path.read_text())
    for title, lines in (
        ("Per task (official states)", per_task(res, task_names(args.root))),
        ("The language check (the policy)", language(res)),
        ("LIBERO-Plus's factors (the policy, % success)", perturb(res)),
    ):
        print(f"### {title}\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
