"""A suite's training set from the scripted expert (``vla-data libero``).

Per suite, under ``out/<suite>/``:

* ``rounds/<r>/``: an evaluation run of the expert over every init state of the tasks still short
  of demonstrations (``episodes.jsonl``, ``run.json``), recording successful episodes
  (``rounds/<r>/demos/.episodes/``). Round ``r`` uses LIBERO's env seed ``env_seed + r`` (the
  fixtures land elsewhere), so a task whose expert fails on some init states still reaches
  ``demos_per_task`` when that is <= 50 x rounds. Every round resumes after a kill.
* ``hdf5/<task>_demo.hdf5``: the first ``demos_per_task`` successes of each task (round 0's trials
  first), in LIBERO's official layout (:mod:`vla.rollout.record`); ``demo_i`` keeps its source as
  attributes ``trial`` and ``round``.
* ``no_noops/<task>_demo.hdf5`` (``noops=drop``): OpenVLA's no-noops layout (:mod:`.noops`).
* ``lerobot/`` (``formats`` has ``lerobot``): a LeRobot v3.0 dataset of the same episodes (the
  no-noops ones when ``noops=drop``).
* ``manifest.json``: the settings, per round its seed and counts, per task attempts, successes,
  demonstrations kept and where each came from, no-op counts, the files written.

The merge and conversions are rebuilt from the per-episode files, so a rerun after a kill (or
with more rounds) ends in the same files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from vla_common.atomic import write_json_atomic
from ..rollout.record import merge_episode_files

BENCHMARK_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
FORMATS = ("hdf5", "lerobot")
NOOPS = ("keep", "drop")
_EPISODE_RE = re.compile(r"_task(\d+)_trial(\d+)\.hdf5$")


def suites_of(value) -> list[str]:
    from envs.libero import suites as S

    if value in ("all", None):
        return list(BENCHMARK_SUITES)
    names = [value] if isinstance(value, str) else list(value)
    for n in names:
        S.check_suite(n)
    return names


def check_options(cfg: dict[str, Any]) -> None:
    if int(cfg["demos_per_task"]) < 1:
        raise ValueError(f"demos_per_task must be >= 1, got {cfg['demos_per_task']}")
    if int(cfg["max_rounds"]) < 1:
        raise ValueError(f"max_rounds must be >= 1, got {cfg['max_rounds']}")
    if cfg["noops"] not in NOOPS:
        raise ValueError(f"noops must be one of {NOOPS}, got {cfg['noops']!r}")
    bad = [f for f in cfg["formats"] if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown format(s) {bad}; valid: {list(FORMATS)}")


def env_config(cfg: dict[str, Any], suite: str, round_: int) -> dict[str, Any]:
    extras = bool(cfg["extras"])
    return {
        "name": "libero",
        "suite": suite,
        "render": True,
        "resolution": int(cfg["resolution"]),
        "cameras": list(cfg["cameras"]),
        "depth": extras,
        "segmentation": extras,
        "env_seed": int(cfg["env_seed"]) + round_,
    }


def _successes(out: Path) -> dict[int, list[int]]:
    """task -> successful trials of one round (from its episodes.jsonl)."""
    path = out / "episodes.jsonl"
    done: dict[int, list[int]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("success") and r.get("demo"):
                done.setdefault(int(r["task_id"]), []).append(int(r["trial"]))
    return done


def _round_stats(out: Path) -> dict[int, dict[str, float]]:
    path = out / "episodes.jsonl"
    stats: dict[int, dict[str, float]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            s = stats.setdefault(int(r["task_id"]), {"attempts": 0, "successes": 0, "steps": 0, "seconds": 0.0})
            s["attempts"] += 1
            s["successes"] += int(bool(r["success"]))
            s["steps"] += int(r["steps"]) if r["success"] else 0
            s["seconds"] += float(r["seconds"])
    return stats


def merge_selected(sources: dict[int, list[tuple[int, Path]]], names: dict[int, str], out_dir: Path) -> list[Path]:
    """``out_dir/<task>_demo.hdf5`` per task from per-episode files [(round, path)] in order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        merge_episode_files(
            out_dir / f"{names[task_id]}_demo.hdf5", [p for _, p in items], [{"round": int(r)} for r, _ in items]
        )
        for task_id, items in sorted(sources.items())
    ]


def generate_suite(cfg: dict[str, Any], suite: str, progress: bool = True) -> dict[str, Any]:
    from envs.libero import suites as S

    from ..eval.evaluate import EvalSpec, evaluate
    from .lerobot import write_lerobot
    from .libero_hdf5 import read_libero_dir
    from .noops import write_no_noops

    root = Path(cfg["out"]) / suite
    infos = {t.task_id: t for t in S.task_infos(suite)}
    tasks = sorted(infos) if cfg.get("tasks") is None else [int(t) for t in cfg["tasks"]]
    bad = [t for t in tasks if t not in infos]
    if bad:
        raise ValueError(f"unknown task id(s) {bad} for {suite}; valid ids: 0..{len(infos) - 1}")
    want = int(cfg["demos_per_task"])
    manifest: dict[str, Any] = {
        "suite": suite,
        "settings": {k: cfg[k] for k in sorted(cfg) if k not in ("out", "progress")},
        "seeds": {"eval_seed": int(cfg["seed"]), "env_seeds": []},
        "rounds": [],
        "tasks": {},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    per_task: dict[int, list[tuple[int, int, Path]]] = {t: [] for t in tasks}  # (round, trial, file)
    attempts = {t: {"attempts": 0, "successes": 0, "steps": 0, "seconds": 0.0} for t in tasks}
    t0 = time.time()
    for r in range(int(cfg["max_rounds"])):
        short = [t for t in tasks if len(per_task[t]) < want]
        if not short:
            break
        out = root / "rounds" / str(r)
        env = env_config(cfg, suite, r)
        spec = EvalSpec(
            env=env,
            agent={"name": "scripted"},
            out=str(out),
            tasks=short,
            trials_per_task=int(cfg.get("trials") or min(infos[t].num_trials for t in short)),
            workers=int(cfg["workers"]),
            seed=int(cfg["seed"]),
            record=str(out / "demos"),
            merge_record=False,
        )
        summary = evaluate(spec, progress=progress)
        manifest["seeds"]["env_seeds"].append(env["env_seed"])
        ok = _successes(out)
        for t in short:
            for k in sorted(ok.get(t, [])):
                f = out / "demos" / ".episodes" / f"{suite}_task{t:03d}_trial{k:03d}.hdf5"
                if f.exists():
                    per_task[t].append((r, k, f))
        for t, s in _round_stats(out).items():
            if t in attempts:
                for key in attempts[t]:
                    attempts[t][key] += s[key]
        manifest["rounds"].append(
            {
                "round": r,
                "env_seed": env["env_seed"],
                "tasks": short,
                "episodes": summary["episodes"],
                "successes": summary["successes"],
                "complete": summary["complete"],
            }
        )
    selected = {t: per_task[t][:want] for t in tasks}
    names = {t: infos[t].name for t in tasks}
    files = merge_selected({t: [(r, f) for r, _, f in v] for t, v in selected.items() if v}, names, root / "hdf5")
    for t in tasks:
        a = attempts[t]
        manifest["tasks"][str(t)] = {
            "name": names[t],
            "instruction": infos[t].instruction,
            "attempts": a["attempts"],
            "successes": a["successes"],
            "success_rate": a["successes"] / a["attempts"] if a["attempts"] else None,
            "demos": len(selected[t]),
            "short": max(0, want - len(selected[t])),
            "sources": [[r, k] for r, k, _ in selected[t]],
            "mean_steps": a["steps"] / a["successes"] if a["successes"] else None,
        }
    manifest["files"] = {"hdf5": [str(p.relative_to(root)) for p in files]}
    lerobot_src = root / "hdf5"
    if cfg["noops"] == "drop":
        counts = {"demos_in": 0, "demos_out": 0, "steps_in": 0, "steps_out": 0}
        for p in files:
            for k, v in write_no_noops(p, root / "no_noops" / p.name).items():
                counts[k] += v
        manifest["noops"] = counts
        manifest["files"]["no_noops"] = [str((root / "no_noops" / p.name).relative_to(root)) for p in files]
        lerobot_src = root / "no_noops"
    if "lerobot" in cfg["formats"] and files:
        target = root / "lerobot"
        tmp = root / "lerobot.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        info = write_lerobot(read_libero_dir(lerobot_src), tmp, fps=20)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        manifest["files"]["lerobot"] = {
            "root": "lerobot",
            "episodes": info["total_episodes"],
            "frames": info["total_frames"],
        }
    manifest["totals"] = {
        "demos": sum(len(v) for v in selected.values()),
        "attempts": sum(a["attempts"] for a in attempts.values()),
        "successes": sum(a["successes"] for a in attempts.values()),
        "seconds_this_run": round(time.time() - t0, 1),
    }
    manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_json_atomic(root / "manifest.json", manifest)
    return manifest
