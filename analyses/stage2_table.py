"""Stage 2 of spatial tuning (docs/SPATIAL.md, issue 26): the three-way table and the val curves.

Each arm is a root of a ``libero`` experiment (``vla-experiment``) (``<root>/val/step_N-<agent>/summary.json`` per
checkpoint, ``<root>/test/summary.json`` for the chosen one), or, for a run whose directory is not on
this machine, its counts written out (``name=500:4/10,1000:6/10;test=44/50``, as recorded in the docs)::

    .venv/bin/python analyses/stage2_table.py --arm tuned=runs/s26/vla_tuned --arm control=runs/s26/vla_control \\
        --arm "scratch=500:4/10,1000:6/10,1500:7/10,2000:9/10;test=44/50" --out docs/img/s26_stage2_curves.png

Prints a markdown table (successes, rate and its 95 % Wilson interval per checkpoint on val and for
the test) and draws the val success of every arm against the VLA's training steps, beside the
teacher-forced val loss of the arms whose training log is on this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k / n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _counts(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not n:
        raise ValueError(f"expected successes/episodes, got {text!r}")
    return int(k), int(n)


def read_arm(spec: str) -> tuple[str, dict[int, tuple[int, int]], tuple[int, int] | None, str]:
    """(name, {step: (successes, episodes)} on val, test counts or None, where the numbers come from)."""
    name, sep, rest = spec.partition("=")
    if not sep or not name:
        raise ValueError(f"--arm wants name=root or name=step:k/n,...;test=k/n, got {spec!r}")
    root = Path(rest)
    if root.is_dir():
        val = {}
        for d in sorted((root / "val").glob("step_*-*")):
            s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else None
            if s and s.get("complete", True):
                val[int(d.name.split("-")[0].split("_")[1])] = (int(s["successes"]), int(s["episodes"]))
        test = None
        if (root / "test" / "summary.json").exists():
            s = json.loads((root / "test" / "summary.json").read_text())
            if s.get("complete", True):
                test = (int(s["successes"]), int(s["episodes"]))
        return name, val, test, str(root)
    val, test = {}, None
    for part in rest.split(";"):
        if part.startswith("test="):
            test = _counts(part[5:])
        elif part:
            for item in part.split(","):
                step, _, counts = item.partition(":")
                val[int(step)] = _counts(counts)
    if not val:
        raise ValueError(f"arm {name!r}: {rest!r} is neither a directory nor step:k/n counts")
    return name, val, test, "as recorded"


def fmt(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", action="append", required=True, help="name=root, or name=step:k/n,...;test=k/n")
    ap.add_argument("--out", help="PNG of the val curves")
    a = ap.parse_args(argv)
    try:
        arms = [read_arm(s) for s in a.arm]
    except ValueError as e:
        print(f"stage2_table: {e}", file=sys.stderr)
        return 2
    steps = sorted({s for _, val, _, _ in arms for s in val})
    print("| arm | " + " | ".join(f"val, step {s:,}" for s in steps) + " | test (official states) | source |")
    print("|---|" + "---|" * (len(steps) + 2))
    for name, val, test, src in arms:
        cells = [fmt(*val[s]) if s in val else "-" for s in steps]
        print(f"| {name} | " + " | ".join(cells) + f" | {fmt(*test) if test else 'not run'} | {src} |")
    if a.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        for name, _, _, src in arms:  # teacher-forced val loss, where the arm's training log is here
            log = Path(src) / "train" / "train_log.jsonl"
            if log.exists():
                rows = [json.loads(x) for x in log.read_text().splitlines() if '"val_loss"' in x]
                ax2.plot([r["step"] for r in rows], [r["val_loss"] for r in rows], marker=".", label=name)
        ax2.set_xlabel("VLA training steps")
        ax2.set_ylabel("teacher-forced val loss (held-out demonstrations)")
        ax2.grid(alpha=0.3)
        if ax2.lines:
            ax2.legend()
        for i, (name, val, _, _) in enumerate(arms):
            xs = sorted(val)
            ys = [100 * val[s][0] / val[s][1] for s in xs]
            ci = [wilson(*val[s]) for s in xs]
            lo = [y - 100 * c[0] for y, c in zip(ys, ci)]
            hi = [100 * c[1] - y for y, c in zip(ys, ci)]
            off = (i - (len(arms) - 1) / 2) * 25  # side by side at each checkpoint
            ax.errorbar([x + off for x in xs], ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
        ax.set_xlabel("VLA training steps")
        ax.set_ylabel("val success, % (95 % Wilson interval)")
        ax.set_ylim(-5, 105)
        ax.set_xticks(steps)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(a.out, dpi=110)
        print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
