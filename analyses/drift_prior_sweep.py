"""GST under a mis-specified drift prior: what the memory's answers cost when the robot does not know
its own odometry.

Each profile's drift correction is given the odometry error that profile simulates
(``spatial_memory.profiles.MEMORY_SETTINGS``): a perfectly calibrated robot. This runs the memory
agent on one question set with that prior scaled (the per-motion sigmas and the slip fractions, all
four together) while the simulated odometry stays as it is, and prints the table of
docs/BENCHMARKS.md with one row per run (``scripts/gst_table.py``):

    .venv/bin/python analyses/drift_prior_sweep.py --questions runs/gst/test5 --out runs/drift_prior \\
        [--profiles realistic,harsh] [--scales 0.5,1,2]

Each run is ``vla-gst eval agent=memory perception=P +agent.memory_overrides.drift={...}`` (printed
before it starts), so it resumes like any GST evaluation: rerun the same command after a kill.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from spatial_memory.profiles import MEMORY_SETTINGS

SCALED = ("odom_sigma_m", "odom_sigma_deg", "odom_scale_xy", "odom_scale_yaw")


def drift_prior(profile: str, scale: float) -> dict:
    """The profile's drift-correction settings with the odometry prior scaled by ``scale``."""
    if profile not in MEMORY_SETTINGS:
        raise ValueError(f"unknown perception profile {profile!r}; with drift correction: {_with_drift()}")
    drift = MEMORY_SETTINGS[profile].get("drift")
    if drift is None:
        raise ValueError(f"perception={profile} has no drift correction (only {_with_drift()} do)")
    if not scale > 0:
        raise ValueError(f"a prior scale must be > 0, got {scale}")
    return {k: (v * scale if k in SCALED else v) for k, v in drift.items()}


def _with_drift() -> list[str]:
    return [p for p, s in MEMORY_SETTINGS.items() if s.get("drift")]


def _flow(d: dict) -> str:
    """A Hydra override value: ``{k: v, ...}`` with lists as ``[a, b]``."""
    return "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in d.items()) + "}"


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[tuple[str, float, dict]]]:
    """The options and the (profile, scale, drift prior) of each run, checked; argparse's usage error otherwise
    (the question set itself is checked by :func:`main`)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", required=True, help="a question set written by vla-gst generate")
    ap.add_argument("--out", required=True)
    ap.add_argument("--profiles", default="realistic,harsh")
    ap.add_argument("--scales", default="0.5,1,2")
    args = ap.parse_args(argv)
    try:
        scales = [float(s) for s in args.scales.split(",")]
        runs = [(p, s, drift_prior(p, s)) for p in args.profiles.split(",") for s in scales]
    except (ValueError, KeyError) as exc:
        ap.error(f"bad --profiles/--scales: {exc}")
    return args, runs


def main(argv: list[str] | None = None) -> int:
    args, runs = parse_args(argv)
    if not (Path(args.questions) / "questions.jsonl").is_file():
        raise SystemExit(f"error: {args.questions} holds no questions.jsonl (write one with vla-gst generate)")
    rows = []
    for profile, scale, drift in runs:
        out = Path(args.out) / f"{profile}_x{scale:g}"
        cmd = [
            sys.executable, "-m", "vla.gst.cli", "eval", "agent=memory", f"perception={profile}",
            f"+agent.memory_overrides.drift={_flow(drift)}", f"questions={args.questions}", f"out={out}",
            "progress=false",
        ]  # fmt: skip
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        rows.append(f"{profile}, prior x{scale:g}={out}")
    table = Path(__file__).with_name("gst_table.py")
    subprocess.run([sys.executable, str(table), *rows], check=True)  # the table of docs/BENCHMARKS.md
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
