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


def _kv(argv: list[str]) -> dict[str, str]:
    out = {}
    for a in argv:
        if "=" not in a:
            raise ValueError(f"expected key=value, got {a!r}")
        k, v = a.split("=", 1)
        out[k] = v
    return out


def cmd_libero(argv: list[str]) -> int:
    from vla.config import compose

    from .generate import check_options, generate_suite, suites_of

    cfg = compose("data_gen", argv)
    check_options(cfg)
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


def cmd_convert(argv: list[str]) -> int:
    from .lerobot import write_lerobot
    from .libero_hdf5 import read_libero_dir, read_libero_hdf5
    from .noops import write_no_noops

    kv = _kv(argv)
    missing = [k for k in ("src", "to", "out") if k not in kv]
    if missing:
        raise ValueError(f"convert needs {missing} (src=DIR to=no_noops|lerobot out=OUT)")
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
    else:
        raise ValueError(f"to= must be no_noops or lerobot, got {to!r}")
    return 0


def cmd_info(argv: list[str]) -> int:
    from .lerobot import read_lerobot
    from .libero_hdf5 import read_libero_dir, read_libero_hdf5

    kv = _kv(argv)
    if "src" not in kv:
        raise ValueError("info needs src=PATH")
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


def cmd_spatial(argv: list[str]) -> int:
    from vla.config import compose
    from vla.spatial.generate import generate

    r = generate(compose("spatial", argv))
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
        from vla.spatial.evaluate import write_scores

        print(f"-> {write_scores(out, scores)}")


def cmd_spatial_eval(argv: list[str]) -> int:
    from vla.spatial.evaluate import policy_predictions, score_set

    kv = _kv(argv)
    missing = [k for k in ("checkpoint", "data", "out") if k not in kv]
    if missing:
        raise ValueError(f"spatial-eval needs {missing} (checkpoint=DIR data=DIR out=OUT)")
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


def cmd_spatial_score(argv: list[str]) -> int:
    from vla.spatial.evaluate import baseline_predictions, read_predictions, score_set
    from vla.spatial.generate import load_records

    kv = _kv(argv)
    if "data" not in kv or ("predictions" in kv) == ("baseline" in kv):
        raise ValueError("spatial-score needs data=DIR and one of predictions=FILE or baseline=TRAIN_DIR")
    if "predictions" in kv:
        preds = read_predictions(kv["predictions"])
    else:
        blind = kv.get("blind", "false")
        if blind not in ("true", "false"):
            raise ValueError(f"spatial-score: blind={blind!r}; use blind=true or blind=false")
        preds = baseline_predictions(kv["baseline"], load_records(kv["data"]), blind=blind == "true")
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
        return COMMANDS[argv[0]](argv[1:])
    except (ValueError, FileNotFoundError) as exc:
        print(f"vla-data: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vla-data: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
