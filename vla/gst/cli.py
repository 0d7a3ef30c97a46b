"""``vla-gst``: generate GST-Bench questions, answer them with an agent, score any predictions.

    vla-gst generate env=house split=test scenes=20 out=DIR [backend=ray ray.address=auto]
    vla-gst eval agent=random|memory questions=DIR out=OUT [perception=gt|realistic|harsh|learned] [workers=N]
    vla-gst score questions=DIR predictions=FILE out=OUT
    vla-gst export questions=DIR out=DIR [answers=FILE] [perception=...]   # for outside models, no answers
    vla-gst score answers=FILE predictions=FILE out=OUT                  # ... scored against the private file

Every command resumes: ``generate`` skips scenes already in ``questions.jsonl``, ``eval`` skips
questions already in ``predictions.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm import tqdm

USAGE = __doc__


def _append_jsonl(fh, record: dict[str, Any]) -> None:
    fh.write(json.dumps(record) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def _read_jsonl_tolerant(path: Path) -> list[dict[str, Any]]:
    """Complete lines only: a torn last line of a killed run is dropped (and the file rewritten)."""
    if not path.exists():
        return []
    good, rows = [], []
    for line in path.read_text().splitlines(keepends=True):
        try:
            if not line.endswith("\n"):
                raise ValueError
            rows.append(json.loads(line))
            good.append(line)
        except ValueError:
            continue
    if sum(len(g) for g in good) != path.stat().st_size:
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(good))
        os.replace(tmp, path)
    return rows


# --------------------------------------------------------------------------------------- generate
def scene_seed(name: str) -> int:
    """The per-scene RNG seed of a scene name: an apartment's own seed (``house/test/900003``), else a hash."""
    tail = name.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else zlib.crc32(name.encode())


LEVELS = ("easy", "medium", "hard")


def _scene_maps(env_cfg: dict[str, Any], task_id: int) -> dict[str, Any]:
    """One scene's ground-truth top-down maps (a worker's job with backend=ray)."""
    from envs.registry import make_env

    env = make_env(env_cfg, task_id)
    try:
        return {lvl: env.topdown_map(lvl) for lvl in LEVELS}
    finally:
        env.close()


def _scene_questions(env_cfg, gen_cfg, split, name, task_id, stride, pool, media_root=None):
    """One scene's question rows, media files and filter counts (a worker's job with backend=ray).

    The media (images, videos, streams) are encoded here, by the worker: into ``media_root`` when it
    is given (this machine), else into a scratch dir whose files come back as ``{relative path:
    bytes}`` for the driver to write. A fresh generator per scene gives what a shared one gives
    (``start_scene`` resets all of its state), and one writer per scene names the files the same
    way however the scenes are spread or resumed."""
    import tempfile

    from envs.base import NoEpisode
    from envs.registry import family, make_env

    from .generate import GenConfig, QuestionGenerator
    from .media import MediaWriter

    gen = QuestionGenerator(GenConfig(**gen_cfg), split=split)
    env = make_env(env_cfg, task_id)
    try:
        try:
            env.reset(options={"trial": 0})
        except NoEpisode as exc:  # a scene with no usable episode: no questions, the run goes on
            # (any other reset failure, e.g. a broken asset, still ends the run)
            return [], {}, {f"scene skipped: {exc}": 1}
        material = family(env_cfg["name"]).offline_material(env, name, stride=stride, seed=int(gen_cfg["seed"]))
        material.maps = pool[name]  # the same images the distractor pool holds
        gen.start_scene(scene_seed(name))
        questions = gen.scene_offline(material, pool)
    finally:
        env.close()
    scratch = tempfile.TemporaryDirectory() if media_root is None else contextlib.nullcontext(media_root)
    with scratch as root:
        writer = MediaWriter(root)
        rows = [writer.externalise(q).to_json() for q in questions]
        files = {}
        if media_root is None:
            files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}
    return rows, files, dict(gen.filtered)


def _run_scenes(cfg: dict[str, Any], fn, items: list[tuple], on_result, desc: str) -> None:
    """``fn(*item)`` per scene, here or as Ray tasks (``backend=ray``); ``on_result(i, result)`` in order."""
    bar = tqdm(total=len(items), desc=desc, disable=not cfg["progress"], file=sys.stderr)

    def done(i: int, result: Any) -> None:
        on_result(i, result)
        bar.update(1)

    try:
        if cfg.get("backend", "local") == "ray":
            from vla.eval.backends.options import RayOptions
            from vla.eval.backends.ray_backend import map_ordered

            map_ordered(fn, items, done, RayOptions.from_dict(cfg.get("ray")))
        else:
            for i, item in enumerate(items):
                done(i, fn(*item))
    finally:
        bar.close()


def generate(cfg: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from envs.material import QuestionSource
    from envs.registry import family, require

    env_cfg = dict(cfg["env"])
    source = family(env_cfg["name"])
    if not isinstance(source, QuestionSource) or not source.offline:
        raise ValueError(
            f"env={env_cfg['name']} has no offline GST question sets (env=house and env=omnigibson have; "
            "LIBERO supports mid-episode questions only, docs/GST.md)"
        )
    if cfg.get("backend", "local") not in ("local", "ray"):
        raise ValueError(f"backend must be local or ray, got {cfg.get('backend')!r}")
    require(env_cfg)
    first, n = int(cfg["first_scene"]), int(cfg["scenes"])
    if n < 1:
        raise ValueError(f"scenes must be >= 1, got {n}")
    env_cfg, scenes = source.offline_tasks(env_cfg, cfg["split"], first, n)
    gen_cfg = dict(cfg["gen"])
    stride = int(gen_cfg.pop("stride", 2))
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    names = dict(scenes)  # task id -> scene name

    # pass 1: every scene's ground-truth maps (the TDS distractor pool), cached as png
    import imageio.v2 as imageio

    map_dir = out / "maps"
    map_dir.mkdir(exist_ok=True)
    files = {t: {lvl: map_dir / f"{name.replace('/', '-')}_{lvl}.png" for lvl in LEVELS} for t, name in scenes}
    need = [t for t, _ in scenes if not all(f.exists() for f in files[t].values())]

    def write_maps(i: int, maps: dict[str, Any]) -> None:
        for lvl, f in files[need[i]].items():
            imageio.imwrite(f, maps[lvl])

    qpath, logpath = out / "questions.jsonl", out / "generation.jsonl"
    done = {r["scene"] for r in _read_jsonl_tolerant(logpath)}
    todo = [t for t, name in scenes if name not in done]
    with _cluster(cfg, bool(need or todo)) as ray:
        _run_scenes(cfg, _scene_maps, [(env_cfg, t) for t in need], write_maps, "maps")
        pool = {names[t]: {lvl: np.asarray(imageio.imread(f))[..., :3] for lvl, f in files[t].items()} for t in names}
        # pass 2: questions, one scene at a time (appended; a killed run resumes at the next scene)
        _read_jsonl_tolerant(qpath)
        kept = [r for r in _read_jsonl_tolerant(qpath) if r["scene"] in done]  # drop questions of an unfinished scene
        with open(qpath, "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in kept)
        pool_arg = ray.put(pool) if ray is not None and todo else pool  # to the object store once, not per task
        _generate_scenes(cfg, env_cfg, gen_cfg, stride, names, todo, pool_arg, out, qpath, logpath)
    return _manifest(out, cfg)


@contextlib.contextmanager
def _cluster(cfg: dict[str, Any], needed: bool):
    """Ray for the whole generation with backend=ray (one instance for both passes), else None."""
    if cfg.get("backend", "local") != "ray" or not needed:
        yield None
        return
    from vla.eval.backends.options import RayOptions
    from vla.eval.backends.ray_backend import connected

    with connected(RayOptions.from_dict(cfg.get("ray"))) as ray:
        yield ray


def _generate_scenes(cfg, env_cfg, gen_cfg, stride, names, todo, pool, out: Path, qpath, logpath) -> None:
    with open(qpath, "a") as qf, open(logpath, "a") as lf:

        def append(i: int, result) -> None:
            rows, files, filtered = result
            for rel, data in files.items():  # media first: a question line means its files are there
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / rel).write_bytes(data)
            for row in rows:
                _append_jsonl(qf, row)
            _append_jsonl(
                lf,
                {"scene": names[todo[i]], "questions": dict(Counter(r["subtask"] for r in rows)), "filtered": filtered},
            )

        here = None if cfg.get("backend", "local") == "ray" else str(out)  # workers elsewhere send the bytes
        items = [(env_cfg, gen_cfg, cfg["split"], names[t], t, stride, pool, here) for t in todo]
        _run_scenes(cfg, _scene_questions, items, append, "questions")


def _manifest(out: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    log = _read_jsonl_tolerant(out / "generation.jsonl")
    counts: Counter[str] = Counter()
    filtered: Counter[str] = Counter()
    for r in log:
        counts.update(r["questions"])
        filtered.update(r["filtered"])
    manifest = {
        "scenes": len(log),
        "questions": sum(counts.values()),
        "per_subtask": dict(counts),
        "filtered": dict(filtered),
        "split": cfg["split"],
        "gen": cfg["gen"],
        "env": cfg["env"],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


# --------------------------------------------------------------------------------------- eval
def evaluate_questions(cfg: dict[str, Any]) -> dict[str, Any]:
    from vla.agents import make_agent

    from vla.questions.question import load_questions

    if not cfg.get("questions"):
        raise ValueError("eval needs questions=DIR (a directory with questions.jsonl)")
    questions = load_questions(cfg["questions"])
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)

    agent = make_agent(cfg["agent"], seed=0)  # checks the protocol, answer() included
    from .answer_pool import answer_in_workers, answer_one
    from .sensors import sensors_of_config

    profile, sensors = sensors_of_config(cfg)  # what the agent's sensors make of the sensor media
    run = {"perception": profile.to_dict(), "agent": cfg["agent"], "questions": str(cfg["questions"])}
    from vla.eval.identity import check_identity

    holds = "predictions of another agent or perception profile"
    check_identity(out, run, holds, compare=("perception", "agent"))  # the question set is a note
    workers = cfg.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    ppath = out / "predictions.jsonl"
    done = {r["id"] for r in _read_jsonl_tolerant(ppath)}
    todo = [q for q in questions if q.id not in done]
    bar = tqdm(
        total=len(questions),
        initial=len(done),
        desc=f"answering ({cfg['agent']['name']})",
        disable=not cfg["progress"],
        file=sys.stderr,
    )
    with open(ppath, "a") as fh, bar:

        def on_row(row: dict[str, Any]) -> None:
            _append_jsonl(fh, row)
            bar.update(1)

        if workers > 1 and len(todo) > 1:
            answer_in_workers(cfg, todo, workers, on_row)
        else:
            for q in todo:
                on_row(answer_one(agent, q, sensors))
    return score_files(cfg["questions"], ppath, out, cfg.get("bootstrap", 1000), label=cfg["agent"]["name"])


# --------------------------------------------------------------------------------------- score
def score_files(
    questions_dir: str | Path | None,
    predictions: str | Path,
    out: str | Path,
    bootstrap: int = 1000,
    label: str = "predictions",
    answers: str | Path | None = None,
) -> dict[str, Any]:
    """Score predictions against a question set's answers, or (``answers``) an export's private file."""
    from vla.questions.question import load_questions
    from .score import load_jsonl, plot_scores, random_scores, score_predictions

    if answers is not None:
        questions = load_jsonl(answers)
        bad = [i for i, q in enumerate(questions, 1) if not {"id", "subtask", "answer"} <= set(q)]
        if bad:
            raise ValueError(f"{answers}:{bad[0]}: each line needs id, subtask and answer (an export's answer file)")
    else:
        questions = [q.to_json() for q in load_questions(questions_dir)]
    preds = {}
    for i, r in enumerate(_read_jsonl_tolerant(Path(predictions)), 1):
        if "id" not in r or "prediction" not in r:
            raise ValueError(f"{predictions}:{i}: each line needs 'id' and 'prediction'")
        preds[r["id"]] = r["prediction"]
    scores, rows = score_predictions(questions, preds, bootstrap=bootstrap)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    with open(out / "scored.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps(r, default=lambda x: list(x) if isinstance(x, tuple) else str(x)) + "\n")
    plot_scores(scores, out / "scores.png", label=label, baselines={"random answers": random_scores(questions)})
    return scores


def export_questions(cfg: dict[str, Any]) -> dict[str, Any]:
    from .export import export
    from .sensors import sensors_of_config

    if not cfg.get("questions"):
        raise ValueError("export needs questions=DIR (a directory with questions.jsonl) and out=DIR")
    return export(
        cfg["questions"],
        cfg["out"],
        answers=cfg.get("answers"),
        seed=int(cfg.get("export_seed", 0)),
        sensors=sensors_of_config(cfg)[1],
        streams=bool(cfg.get("export_streams", True)),
        tds=str(cfg.get("export_tds", "apart")),
        tds_share=float(cfg.get("export_tds_share", 0.5)),
    )


def _print_scores(scores: dict[str, Any], out: str) -> None:
    width = max(len(c) for c in scores["per_subtask"]) if scores["per_subtask"] else 5
    for code, v in scores["per_subtask"].items():
        lo, hi = scores["ci95"][code]
        print(f"  {code:<{width}}  {v:6.1f}   [{lo:5.1f}, {hi:5.1f}]   n={scores['count'][code]}")
    print(
        f"  {'overall':<{width}}  {scores['overall']:6.1f}"
        + (
            f"   ({scores['missing']} missing, {scores['unparsed']} unparsed)"
            if scores["missing"] or scores["unparsed"]
            else ""
        )
    )
    print(f"-> {out}/scores.json, {out}/scores.png")


def main(argv: list[str] | None = None) -> int:
    from vla.config import check_config, compose

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ("generate", "eval", "score", "export"):
        print(USAGE)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, overrides = argv[0], argv[1:]
    try:
        cfg = compose("gst", overrides)
        check_config(cfg)  # the env's, perception's and agent's choices, before any scene or agent is built
        if command == "generate":
            m = generate(cfg)
            print(f"{m['questions']} questions from {m['scenes']} scenes -> {cfg['out']}/questions.jsonl")
            print("  per subtask: " + ", ".join(f"{k} {v}" for k, v in m["per_subtask"].items()))
            print("  filtered: " + (", ".join(f"{k}: {v}" for k, v in sorted(m["filtered"].items())) or "none"))
        elif command == "eval":
            _print_scores(evaluate_questions(cfg), cfg["out"])
        elif command == "export":
            s = export_questions(cfg)
            print(f"{s['questions']} questions, {s['media_files']} media files -> {s['out']}")
            if s["dropped"]:
                left = ", ".join(f"{k} {v}" for k, v in sorted(s["dropped"].items()))
                print(f"  TDS apart ({s['tds_blocks']} block(s) of four apartments); left out: {left}")
            print(f"  answers (private, keep them away from the models) -> {s['answers']}")
        else:
            if not (cfg.get("questions") or cfg.get("answers")) or not cfg.get("predictions"):
                raise ValueError("score needs predictions=FILE and questions=DIR (or answers=FILE of an export)")
            scores = score_files(
                cfg.get("questions"), cfg["predictions"], cfg["out"], cfg["bootstrap"], answers=cfg.get("answers")
            )
            _print_scores(scores, cfg["out"])
    except ValueError as exc:
        print(f"vla-gst: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vla-gst: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        from .answer_pool import WorkerFailed

        if not isinstance(exc, WorkerFailed):
            raise
        print(f"vla-gst: error: {exc}; the answers so far are kept: run the same command to resume", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
