"""What every experiment kind shares: running the project's own commands, reading their results, the
training budget every arm shares and the checkpoint choice. ``a`` is the run: a recipe's options
(:class:`vla.experiment.recipe.Options`) with its ``root`` and ``stage``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

BIN = Path(sys.executable).parent

HOUSE_MEMORY = (
    "{inputs: [topdown, objects, text], map_level: easy, map_frame: ego_up, map_extent_m: 10.0, "
    "map_size: [112, 112], max_objects: 8}"
)


def run(cmd: list[str], log: Path) -> None:
    """Run one of the project's commands, its output appended to ``log``. It runs in this process's
    directory: a relative ``root`` names the same place for the experiment and its commands (and a docs
    check's scratch copy writes its own ``runs/``, never the repository's)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("$", " ".join(cmd), flush=True)
    with open(log, "a") as fh:
        r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)} -- see {log}")


def doing(a, stage: str) -> bool:
    """Whether the run does ``stage`` (``record`` or ``train``): asked for, or ``all``, or ``select`` --
    everything but the test (record, train, choose on val), each resuming where it stopped."""
    return a.stage in ("all", stage) or (a.stage == "select" and stage in ("record", "train"))


def record_demos(a, R: Path, env: list[str]) -> None:
    """The scripted expert's demonstrations of a LIBERO recipe: ``demos + val_demos`` episodes per task from
    sampled init state ``record_first`` on, under ``env`` (the env's overrides), into ``R/demos``."""
    run(
        [
            str(BIN / "vla-rollout"),
            *env,
            f"eval.first_trial={a.record_first}",
            f"eval.trials_per_task={a.demos + a.val_demos}",
            "agent=scripted",
            f"eval.workers={a.workers}",
            f"record={R / 'demos'}",
            f"out={R / 'rec'}",
            "progress=false",
        ],
        R / "logs/record.log",
    )


def demonstrations(a, R: Path, env: list[str]) -> Path:
    """Where the arms' demonstrations are, recorded first where that is the run's stage
    (:func:`record_demos`, under ``env``): ``R/demos``, or with ``demos_from`` another experiment's recording
    of the same tasks and states (a variant or a longer training of it), nothing recorded here."""
    if not getattr(a, "demos_from", None):
        if doing(a, "record"):
            record_demos(a, R, env)
        return R / "demos"
    source = R.parent / a.demos_from / "demos"
    if doing(a, "train") and not any(source.glob("*_demo.hdf5")):
        raise SystemExit(f"no demonstrations in {source}: run vla-experiment {a.demos_from} stage=record first")
    return source


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def checkpoints(train_out: Path) -> list[Path]:
    return sorted((train_out / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))


RESUME_EVERY = 100  # steps between resume points of every proof's training runs


def budget(a, batch: int, val_every: int, keep: int | None = None) -> list[str]:
    """The training budget every arm of a proof shares: steps, batch, lr, checkpoints, validation.
    ``keep``: checkpoints kept (default: all ``a.checkpoints``; fewer still saves every steps/N, so a
    killed run resumes from its last quarter rather than from scratch), and a resume point every 100 steps
    between them (``train.resume_every``), so a kill costs at most 100 steps. ``train_embeddings``: the
    whole embedding matrix trains (``policy.freeze_embeddings=false``), not only the action rows."""
    return [
        *(["policy.freeze_embeddings=false"] if getattr(a, "train_embeddings", False) else []),
        f"train.steps={a.steps}",
        f"train.batch_size={batch}",
        f"train.lr={a.lr}",
        "train.vision_lr_scale=1.0",
        f"train.save_every={a.steps // a.checkpoints}",
        f"train.keep_last={keep or a.checkpoints}",
        f"train.resume_every={RESUME_EVERY}",
        f"train.val_every={val_every}",
        "train.loader_workers=1",
        "progress=false",
    ]


def only(a, arms: dict) -> dict:
    """The arms the recipe's ``arms`` name (default: all): two processes can train one arm each at once."""
    names = list(a.arms) or list(arms)
    unknown = sorted(set(names) - set(arms))
    if unknown:
        raise SystemExit(f"arms: unknown arm(s) {unknown}; this experiment has {sorted(arms)}")
    return {n: arms[n] for n in arms if n in names}


def agent_settings(a) -> dict[str, list[str]]:
    """``agents: [NAME=k=v,k=v]``: the closed-loop settings compared on val, each as its ``vla-rollout``
    overrides (default: ``chunk``, each chunk played to its end), in the recipe's order."""
    out = {}
    for spec in a.agents or ["chunk=replan=0"]:
        name, _, kvs = spec.partition("=")
        out[name] = ["agent=vla", *(f"agent.{kv}" for kv in kvs.split(",") if kv)]
    return out


def choose(a, train_out: Path, scores: dict, score) -> str | None:
    """The checkpoint an arm is tested with: the best on val (ties: the later one), or, with
    ``select: final``, the last one -- fixed before any result is seen, for when val costs too much."""
    if a.select == "final":
        cks = checkpoints(train_out)
        return cks[-1].name if cks else None
    return max(scores, key=lambda k: (score(k), int(k.split("_")[1]))) if scores else None


def rollout(a, args: list[str], out: Path, log: Path) -> None:
    """One ``vla-rollout`` of a stage, with the recipe's workers, into ``out``."""
    run([str(BIN / "vla-rollout"), *args, f"eval.workers={a.workers}", f"out={out}", "progress=false"], log)


def demo_training(a, demos: Path, policy: list[str]) -> list[str]:
    """What every arm of a LIBERO proof trains with (the arm adds its inputs and its starting weights,
    :func:`starting_weights`): the tiny backbone, ``policy`` (its recipe's overrides), the recorded
    demonstrations in ``demos`` (a tenth of the episodes for the val loss) and the shared budget."""
    files = ",".join(str(p) for p in sorted(Path(demos).glob("*_demo.hdf5")))
    return [
        "model=tiny_qwen2_5_vl",
        *policy,
        "data=libero",
        f"data.paths=[{files}]",
        "data.val_fraction=0.1",
        *budget(a, batch=16, val_every=max(1, a.steps // 10)),
    ]


EXPERIMENT = "experiment:"  # init_from: another experiment's chosen checkpoint


def starting_weights(a, R: Path, arm: str | None = None) -> list[str]:
    """``train.init_from`` of ``arm`` (``[]`` without the recipe's ``init_from``): a checkpoint's path as
    given, or ``experiment:NAME[/ARM][@final]``: the checkpoint experiment NAME (a sibling of ``R``) chose
    for its arm ARM (default: ``arm``, the same arm), as its own selection chose it -- on val, or its last
    with ``select: final``; with ``@final`` its last (a longer training continued from where that one
    ended). Its val must be complete: a choice among part of the checkpoints is no choice."""
    if not a.init_from:
        return []
    if not a.init_from.startswith(EXPERIMENT):
        return [f"train.init_from={a.init_from}"]
    return [f"train.init_from={chosen_checkpoint(R.parent, a.init_from[len(EXPERIMENT) :], arm)}"]


def chosen_checkpoint(experiments: Path, ref: str, arm: str | None) -> Path:
    """The checkpoint ``ref`` (``NAME[/ARM][@final]``) names under ``experiments``; see :func:`starting_weights`."""
    say = f"init_from={EXPERIMENT}{ref}"
    ref, _, which = ref.partition("@")
    name, _, other = ref.partition("/")
    other = other or arm
    if not name or not other or which not in ("", "final"):
        raise SystemExit(f"{say}: name the experiment, its arm and optionally @final (experiment:NAME/ARM@final)")
    root = experiments / name
    cks = checkpoints(root / "train" / other)
    if not cks:
        raise SystemExit(f"{say}: {root / 'train' / other} has no checkpoint; run vla-experiment {name} first")
    recipe = root / "recipe.json"
    select = json.loads(recipe.read_text())["options"].get("select", "val") if recipe.exists() else "val"
    if which or select == "final":
        return cks[-1]
    for ck in cks:
        out = root / "val" / other / ck.name
        if not (out / "summary.json").exists() or not summary(out).get("complete"):
            raise SystemExit(f"{say}: {ck.name} is not scored on val yet; run vla-experiment {name} stage=select")
    scores = val_scores(SimpleNamespace(select="val", stage="table"), root, other, [])  # deleted ones included
    best = choose(SimpleNamespace(select="val"), root / "train" / other, scores, lambda k: scores[k] or 0)
    if not (root / "train" / other / "checkpoints" / best).is_dir():
        raise SystemExit(f"{say}: {best}, {name}'s val choice for {other}, was deleted")
    return root / "train" / other / "checkpoints" / best


def val_scores(a, R: Path, arm: str, env: list[str]) -> dict[str, float]:
    """Each checkpoint of ``arm`` rolled out on val (``env``: the rollout's overrides with the val states)
    and its success rate; with ``stage=table`` or ``select: final``, only what is there. A checkpoint
    deleted after its val finished (to free the disk) keeps its score."""
    scores: dict[str, float] = {}
    if a.select != "val" or a.stage not in ("all", "select", "test", "table"):
        return scores
    for ck in checkpoints(R / "train" / arm):
        out = R / "val" / arm / ck.name
        if a.stage != "table":
            rollout(a, [*env, "agent=vla", f"agent.checkpoint={ck}"], out, R / "logs/val.log")
        if (out / "summary.json").exists():
            scores[ck.name] = summary(out)["success_rate"]
    scores.update(deleted_scores(R / "val" / arm, scores))
    return dict(sorted(scores.items(), key=lambda kv: int(kv[0].split("_")[1])))


def deleted_scores(val: Path, known: dict) -> dict[str, float]:
    """The finished val scores under ``val`` of checkpoints not in ``known`` (deleted after their val to free
    the disk: their score stays in the table and in the choice)."""
    out = {}
    for run in val.glob("step_*"):
        if run.name not in known and (run / "summary.json").exists() and summary(run).get("complete"):
            out[run.name] = summary(run)["success_rate"]
    return out


def _mean(v) -> float:
    return float(v["mean"]) if isinstance(v, dict) else float(v)
