"""``vla-data``: demonstration datasets.

    vla-data libero suite=libero_goal demos_per_task=50 out=runs/data [workers=2] [noops=drop]
                    [formats=[hdf5,lerobot]] [resolution=256] [extras=true] [max_rounds=3]
    vla-data libero suite=all ...                       # the four benchmark suites, one after another
    vla-data convert src=DIR to=no_noops|lerobot out=OUT   # LIBERO HDF5 files (official, ours) -> another format
    vla-data info src=PATH                              # what a dataset holds (LIBERO HDF5 file or dir, LeRobot v3)
    vla-data spatial family=house|libero split=train scenes=40 out=runs/spatial [shards=N shard=K] [backend=ray]
    vla-data spatial-eval checkpoint=DIR data=runs/spatial/test out=OUT [limit=N] [max_new_tokens=64]
    vla-data spatial-score data=runs/spatial/test predictions=FILE|baseline=runs/spatial/train [blind=true] [out=OUT]

``spatial`` renders views of apartments or LIBERO tabletops and asks spatial-perception questions
answered from the scene truth (docs/SPATIAL.md; settings: configs/spatial.yaml); it resumes after a
kill. ``spatial-eval`` answers a set with a trained policy and scores it per task type;
``spatial-score`` scores a predictions file, or the trivial baseline (the train set's majority or
mean answer per task type; ``blind=true``: per question text, what the words alone predict).

``libero`` runs the scripted expert over every init state of each task (in parallel, resumable:
run the same command again after a kill), keeps the first ``demos_per_task`` successes per task in
LIBERO's official HDF5 layout, and writes ``manifest.json`` (counts, success, seeds, sources).
Settings: configs/data_gen.yaml.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

USAGE = __doc__


# the key=value options of the commands that are not Hydra configs: (required, optional)
KEYS = {
    "convert": (("src", "to", "out"), ("fps",)),
    "info": (("src",), ()),
    "spatial-eval": (("checkpoint", "data", "out"), ("limit", "max_new_tokens", "progress")),
    "spatial-score": (("data",), ("predictions", "baseline", "blind", "out")),
}
CHOICES = {
    ("convert", "to"): ("no_noops", "lerobot"),
    ("spatial-eval", "progress"): ("true", "false"),
    ("spatial-score", "blind"): ("true", "false"),
}
INTS = {("convert", "fps"), ("spatial-eval", "limit"), ("spatial-eval", "max_new_tokens")}


def _kv(command: str, argv: list[str]) -> dict[str, str]:
    """``key=value`` arguments of ``command``, checked against :data:`KEYS`, :data:`CHOICES` and :data:`INTS`."""
    required, optional = KEYS[command]
    out = {}
    for a in argv:
        if "=" not in a:
            raise ValueError(f"{command}: expected key=value, got {a!r}")
        k, v = a.split("=", 1)
        if k not in required + optional:
            raise ValueError(f"{command}: unknown option {k!r}; options: {', '.join(required + optional)}")
        if (command, k) in CHOICES and v not in CHOICES[command, k]:
            raise ValueError(f"{command}: {k}={v!r}; use {' or '.join(f'{k}={c}' for c in CHOICES[command, k])}")
        if (command, k) in INTS and not v.lstrip("-").isdigit():
            raise ValueError(f"{command}: {k} must be an integer, got {v!r}")
        out[k] = v
    missing = [k for k in required if k not in out]
    if missing:
        raise ValueError(f"{command} needs {missing} ({' '.join(f'{k}=...' for k in required)})")
    if command == "spatial-score" and ("predictions" in out) == ("baseline" in out):
        raise ValueError("spatial-score needs data=DIR and one of predictions=FILE or baseline=TRAIN_DIR")
    return out


def options(argv: list[str]) -> tuple[str, dict]:
    """The command and its options as it reads them (a composed config, or checked ``key=value`` pairs),
    without running anything: a bad option raises ``ValueError`` (what ``vla-data`` prints)."""
    if not argv or argv[0] not in COMMANDS:
        raise ValueError(f"unknown command {argv[:1]}; commands: {', '.join(COMMANDS)}")
    command, rest = argv[0], argv[1:]
    if command in KEYS:
        return command, _kv(command, rest)
    from vla.config import compose

    if command == "spatial":
        from vla.data.spatial_generate import SpatialOptions

        cfg = compose("spatial", rest)
        SpatialOptions.from_dict(cfg)  # the family, split, task types, ... (generate() reads them so)
        return command, cfg
    from .generate import check_options, suites_of

    cfg = compose("data_gen", rest)
    check_options(cfg)
    suites_of(cfg["suite"])
    return command, cfg


def cmd_libero(cfg: dict) -> int:
    from .generate import generate_suite, suites_of

    suites = suites_of(cfg["suite"])
    for suite in suites:
        m = generate_suite(cfg, suite, progress=bool(cfg.get("progress", True)))
        t = m["totals"]
        short = {k: v["short"] for k, v in m["tasks"].items() if v["short"]}
        rate = t["successes"] / t["attempts"] if t["attempts"] else 0.0
        print(
            f"{suite}: {t['demos']} demonstrations ({t['successes']}/{t['attempts']} expert episodes "
            f"successful, {100 * rate:.1f}%)"
            + (f"; short of demos_per_task: {short}" if short else "")
            + f" -> {Path(cfg['out']) / suite}/manifest.json"
        )
    return 0


def cmd_convert(kv: dict) -> int:
    from .lerobot import write_lerobot
    from .libero_hdf5 import read_libero_dir, read_libero_hdf5
    from .noops import write_no_noops

    src, out, to = Path(kv["src"]), Path(kv["out"]), kv["to"]
    files = sorted(src.glob("*_demo.hdf5")) if src.is_dir() else [src]
    if not files or not all(f.is_file() for f in files):
        raise ValueError(f"no LIBERO *_demo.hdf5 files at {src}")
    if to == "no_noops":
        totals = {"demos_in": 0, "demos_out": 0, "steps_in": 0, "steps_out": 0}
        for f in files:
            for k, v in write_no_noops(f, out / f.name).items():
                totals[k] += v
        dropped = totals["steps_in"] - totals["steps_out"]
        print(f"no-noops: {totals['demos_out']} demos, {dropped} no-op steps dropped -> {out}")
    elif to == "lerobot":
        eps = read_libero_dir(src) if src.is_dir() else read_libero_hdf5(src)
        info = write_lerobot(eps, out, fps=int(kv.get("fps", 20)))
        print(f"lerobot v3.0: {info['total_episodes']} episodes, {info['total_frames']} frames -> {out}")
    return 0


def cmd_info(kv: dict) -> int:
    from .lerobot import read_lerobot
    from .libero_hdf5 import read_libero_dir, read_libero_hdf5

    src = Path(kv["src"])
    if (src / "meta" / "info.json").exists():
        eps = read_lerobot(src, images=False)
    elif src.is_dir():
        eps = read_libero_dir(src, images=False)
    else:
        eps = read_libero_hdf5(src, images=False)
    tasks: dict[str, list[int]] = {}
    kinds = set()
    for ep in eps:
        tasks.setdefault(ep.task, []).append(len(ep))
        kinds.add(ep.meta.get("variant") or ep.meta.get("format"))
    report = {
        "source": str(src),
        "format": sorted(k for k in kinds if k),
        "episodes": sum(len(v) for v in tasks.values()),
        "frames": sum(sum(v) for v in tasks.values()),
        "tasks": {t: {"episodes": len(v), "mean_length": round(sum(v) / len(v), 1)} for t, v in sorted(tasks.items())},
    }
    print(json.dumps(report, indent=2))
    return 0


def cmd_spatial(cfg: dict) -> int:
    from vla.data.spatial_generate import generate

    r = generate(cfg)
    print(
        f"spatial: {r['questions_this_run']} questions from {r['scenes_this_run']} scenes in {r['seconds']} s "
        f"({r['per_hour']} questions/hour); {r['questions']} questions of {r['scenes']} scenes -> {r['out']}"
    )
    if r["skipped_this_run"]:
        print(f"spatial: skipped (no usable episode): {', '.join(r['skipped_this_run'])}")
    return 0


def _print_scores(scores: dict, out: Path | None) -> None:
    line = ", ".join(f"{t} {v}" for t, v in scores["per_task"].items())
    print(f"spatial: overall {scores['overall']} (macro {scores['macro']}, {scores['questions']} questions): {line}")
    if out is not None:
        from vla.data.spatial_eval import write_scores

        print(f"-> {write_scores(out, scores)}")


def cmd_spatial_eval(kv: dict) -> int:
    from vla.data.spatial_eval import policy_predictions, score_set

    limit = int(kv.get("limit", 0))
    preds = policy_predictions(
        kv["checkpoint"],
        kv["data"],
        kv["out"],
        int(kv.get("max_new_tokens", 64)),
        limit,
        kv.get("progress", "true") == "true",
    )
    _print_scores(score_set(kv["data"], preds, limit), Path(kv["out"]))
    return 0


def cmd_spatial_score(kv: dict) -> int:
    from vla.data.spatial_eval import baseline_predictions, read_predictions, score_set
    from vla.data.spatial_generate import load_records

    if "predictions" in kv:
        preds = read_predictions(kv["predictions"])
    else:
        blind = kv.get("blind", "false") == "true"
        preds = baseline_predictions(kv["baseline"], load_records(kv["data"]), blind=blind)
    _print_scores(score_set(kv["data"], preds), Path(kv["out"]) if "out" in kv else None)
    return 0


COMMANDS = {
    "libero": cmd_libero,
    "convert": cmd_convert,
    "info": cmd_info,
    "spatial": cmd_spatial,
    "spatial-eval": cmd_spatial_eval,
    "spatial-score": cmd_spatial_score,
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(USAGE)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        command, opts = options(argv)
        return COMMANDS[command](opts)
    except (ValueError, FileNotFoundError) as exc:
        print(f"vla-data: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vla-data: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
