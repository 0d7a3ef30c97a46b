"""The CPU learning proof (docs/POLICY.md): record, train with and without the memory, select on val, test.

    .venv/bin/python scripts/cpu_proof.py house  --root runs/proof/house    # "go to the <object>"
    .venv/bin/python scripts/cpu_proof.py libero --root runs/proof/libero   # one LIBERO task
    .venv/bin/python scripts/cpu_proof.py gst    --root runs/proof/gst      # GST questions as QA
    .venv/bin/python scripts/cpu_proof.py house --root runs/proof/house --stage table   # just the table

Every stage is one of the project's own commands (vla-rollout, vla-train, vla-gst), each resumable:
running the script again continues where it stopped. Checkpoints are chosen on the **val** split
(house: val apartments; libero: sampled init states the training demos do not use; gst: the val
question set), and only the chosen checkpoint of each arm runs on **test** (house: test
apartments; libero: the task's 50 official init states; gst: the test question set). With
``--select final`` no val runs happen and each arm is tested with its last checkpoint (decided
before training; for when val rollouts cost more time than there is). Results:
``<root>/results.json`` and a markdown table on stdout. Run long trainings with OMP_NUM_THREADS=1 on
a shared machine: torch's spinning threads slowed a step ~5x under oversubscription.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

HOUSE_MEMORY = (
    "{inputs: [topdown, objects, text], map_level: easy, map_frame: ego_up, map_extent_m: 10.0, "
    "map_size: [112, 112], max_objects: 8}"
)


def run(cmd: list[str], log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    print("$", " ".join(cmd), flush=True)
    with open(log, "a") as fh:
        r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)} -- see {log}")


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def checkpoints(train_out: Path) -> list[Path]:
    return sorted((train_out / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))


def budget(a, batch: int, val_every: int) -> list[str]:
    """The training budget every arm of a proof shares: steps, batch, lr, checkpoints, validation."""
    return [
        f"train.steps={a.steps}",
        f"train.batch_size={batch}",
        f"train.lr={a.lr}",
        "train.vision_lr_scale=1.0",
        f"train.save_every={a.steps // a.checkpoints}",
        f"train.keep_last={a.checkpoints}",
        f"train.val_every={val_every}",
        "train.loader_workers=1",
        "progress=false",
    ]


def only(a, arms: dict) -> dict:
    """The arms named by ``--arms`` (default: both): two processes can train one arm each at once."""
    names = [n for n in a.arms.split(",") if n] if a.arms else list(arms)
    unknown = sorted(set(names) - set(arms))
    if unknown:
        raise SystemExit(f"--arms: unknown arm(s) {unknown}; this proof has {sorted(arms)}")
    return {n: arms[n] for n in arms if n in names}


def choose(a, train_out: Path, scores: dict, score) -> str | None:
    """The checkpoint an arm is tested with: the best on val (ties: the later one), or, with
    ``--select final``, the last one -- fixed before any result is seen, for when val costs too much."""
    if a.select == "final":
        cks = checkpoints(train_out)
        return cks[-1].name if cks else None
    return max(scores, key=lambda k: (score(k), int(k.split("_")[1]))) if scores else None


# ============================================================================ house
def house(a) -> dict:
    R = Path(a.root)
    env = ["env=house", "env.stop_action=true"]
    if a.stage in ("all", "record"):
        run(
            [
                str(BIN / "vla-rollout"),
                *env,
                "env.split=train",
                f"env.num_scenes={a.scenes}",
                "env.num_trials=2",
                "eval.trials_per_task=2",
                "agent=memory",
                "eval.workers=2",
                f"record={R / 'demos'}",
                f"out={R / 'rec'}",
                "progress=false",
            ],
            R / "logs/record.log",
        )
    arms = only(a, {"memory": ["policy=house_memory", f"data.memory={HOUSE_MEMORY}"], "no_memory": ["policy=house"]})
    common = [
        "model=tiny_qwen2_5_vl",
        "policy.action_dim=4",
        "data=house_nav",
        f"data.paths=[{R / 'demos'}]",
        "data.action_mask=[true,true,true,false]",
        *budget(a, batch=16, val_every=250),
    ]
    if a.stage in ("all", "train"):
        for arm, extra in arms.items():
            run([str(BIN / "vla-train"), *common, *extra, f"out={R / 'train' / arm}"], R / f"logs/train_{arm}.log")
    results: dict = {"val": {}, "test": {}}
    val = [
        *env,
        "env.split=val",
        f"env.num_scenes={a.val_scenes}",
        "env.num_trials=1",
        "eval.trials_per_task=1",
        "eval.workers=2",
        "progress=false",
    ]
    test = [
        *env,
        "env.split=test",
        f"env.num_scenes={a.test_scenes}",
        "env.num_trials=1",
        "eval.trials_per_task=1",
        "eval.workers=2",
        "progress=false",
    ]
    if a.stage in ("all", "select", "test", "table") and a.select == "val":
        for arm in arms:
            for ck in checkpoints(R / "train" / arm):
                out = R / "val" / arm / ck.name
                if a.stage != "table":
                    run(
                        [str(BIN / "vla-rollout"), *val, "agent=vla", f"agent.checkpoint={ck}", f"out={out}"],
                        R / "logs/val.log",
                    )
                if (out / "summary.json").exists():
                    s = summary(out)
                    results["val"].setdefault(arm, {})[ck.name] = {"success": s["success_rate"], "spl": s.get("spl")}
    if a.stage in ("all", "test", "table"):
        for arm in arms:
            scores = results["val"].get(arm, {})
            best = choose(a, R / "train" / arm, scores, lambda k: (scores[k]["success"] or 0, scores[k]["spl"] or 0))
            if best is None:
                continue
            out = R / "test" / arm
            if a.stage != "table":
                run(
                    [
                        str(BIN / "vla-rollout"),
                        *test,
                        "agent=vla",
                        f"agent.checkpoint={R / 'train' / arm / 'checkpoints' / best}",
                        f"out={out}",
                    ],
                    R / "logs/test.log",
                )
            results["test"][arm] = {"checkpoint": best, **_nav(summary(out))}
        for name in ("memory_navigator", "random"):
            out = R / "test" / name
            if a.stage != "table":
                run(
                    [
                        str(BIN / "vla-rollout"),
                        *test,
                        f"agent={'memory' if name == 'memory_navigator' else 'random'}",
                        f"out={out}",
                    ],
                    R / "logs/test.log",
                )
            results["test"][name] = _nav(summary(out))
    return results


def _nav(s: dict) -> dict:
    return {
        "episodes": s["episodes"],
        "success": s["success_rate"],
        "spl": s.get("spl"),
        "reached": s.get("reached"),
        "path_m": s.get("path_m"),  # mean path walked per episode (the env's per-episode metric)
        "errors": s["errors"],
    }


def house_table(res: dict) -> str:
    rows = [
        "| agent | episodes | success (stop within 1 m, target in view) | SPL | reached (passing by counts) "
        "| mean path (m) | checkpoint |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in res.get("test", {}).items():
        path = f"{r['path_m']:.2f}" if r.get("path_m") is not None else "-"
        rows.append(
            f"| {name} | {r['episodes']} | {100 * (r['success'] or 0):.1f} % | {r['spl'] or 0:.3f} | "
            f"{100 * (r['reached'] or 0):.1f} % | {path} | {r.get('checkpoint', '-')} |"
        )
    return "\n".join(rows)


# ============================================================================ libero
def libero(a) -> dict:
    R = Path(a.root)
    env = [
        "env=libero",
        "env.suite=libero_spatial",
        "env.cameras=[agentview]",
        "env.depth=false",
        "env.segmentation=false",
        f"eval.tasks=[{a.task}]",
    ]
    if a.stage in ("all", "record"):
        run(
            [
                str(BIN / "vla-rollout"),
                *env,
                "env.init_states=sampled",
                f"eval.trials_per_task={a.demos + 6}",
                "agent=scripted",
                "eval.workers=2",
                f"record={R / 'demos'}",
                f"out={R / 'rec'}",
                "progress=false",
            ],
            R / "logs/record.log",
        )
    common = [
        "model=tiny_qwen2_5_vl",
        "policy=libero",
        f"policy.chunk={a.chunk}",
        "data=libero",
        f"data.paths=[{R / 'demos'}]",
        *budget(a, batch=16, val_every=250),
    ]
    if a.stage in ("all", "train"):
        run([str(BIN / "vla-train"), *common, f"out={R / 'train'}"], R / "logs/train.log")
    results: dict = {"val": {}, "test": {}}
    if a.stage in ("all", "select", "test", "table") and a.select == "val":
        for ck in checkpoints(R / "train"):
            out = R / "val" / ck.name  # sampled init states past the ones the demos used
            if a.stage != "table":
                run(
                    [
                        str(BIN / "vla-rollout"),
                        *env,
                        "env.init_states=sampled",
                        f"eval.trials_per_task={a.demos + 6 + a.val_trials}",
                        "agent=vla",
                        f"agent.checkpoint={ck}",
                        "eval.workers=2",
                        f"out={out}",
                        "progress=false",
                    ],
                    R / "logs/val.log",
                )
            if (out / "episodes.jsonl").exists():
                recs = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
                recs = [r for r in recs if r["trial"] >= a.demos + 6]
                results["val"][ck.name] = sum(r["success"] for r in recs) / max(len(recs), 1)
    best = choose(a, R / "train", results["val"], lambda k: results["val"][k])
    if a.stage in ("all", "test", "table") and best is not None:
        out = R / "test"
        if a.stage != "table":
            run(
                [
                    str(BIN / "vla-rollout"),
                    *env,
                    "eval.trials_per_task=50",
                    "agent=vla",
                    f"agent.checkpoint={R / 'train' / 'checkpoints' / best}",
                    "eval.workers=2",
                    "eval.videos=all",
                    f"out={out}",
                    "progress=false",
                ],
                R / "logs/test.log",
            )
        s = summary(out)
        results["test"] = {
            "checkpoint": best,
            "episodes": s["episodes"],
            "success": s["success_rate"],
            "errors": s["errors"],
        }
    return results


# ============================================================================ gst
def gst(a) -> dict:
    R = Path(a.root)
    sets = {"train": a.train_scenes, "val": a.val_scenes, "test": a.test_scenes}
    if a.stage in ("all", "record"):
        for split, n in sets.items():
            run(
                [
                    str(BIN / "vla-gst"),
                    "generate",
                    "env=house",
                    f"split={split}",
                    f"scenes={n}",
                    f"out={R / 'questions' / split}",
                    "progress=false",
                ],
                R / "logs/generate.log",
            )
    arms = only(
        a,
        {
            "memory": [
                "policy.inputs.memory_map=true",
                "policy.inputs.memory_text=true",
                "data.memory={inputs: [topdown, objects, text], map_level: easy, map_size: [112, 112]}",
                f"data.cache_dir={R / 'stream_cache'}",  # each question stream fused once, shared with the evals
            ],
            "no_memory": [],
        },
    )
    common = [
        "model=tiny_qwen2_5_vl",
        "policy=house",
        "policy.inputs.cameras=[]",
        "data=gst_qa",
        f"data.paths=[{R / 'questions' / 'train'}]",
        "data.val_fraction=0",
        *budget(a, batch=8, val_every=0),
    ]
    if a.stage in ("all", "train"):
        for arm, extra in arms.items():
            run([str(BIN / "vla-train"), *common, *extra, f"out={R / 'train' / arm}"], R / f"logs/train_{arm}.log")
    results: dict = {"val": {}, "test": {}}
    if a.stage in ("all", "select", "test", "table") and a.select == "val":
        for arm in arms:
            for ck in checkpoints(R / "train" / arm):
                out = R / "val" / arm / ck.name
                if a.stage != "table":
                    run(
                        [
                            str(BIN / "vla-gst"),
                            "eval",
                            "agent=vla",
                            f"agent.checkpoint={ck}",
                            f"agent.memory_cache={R / 'stream_cache'}",
                            f"questions={R / 'questions' / 'val'}",
                            f"out={out}",
                            "progress=false",
                        ],
                        R / "logs/val.log",
                    )
                if (out / "scores.json").exists():
                    results["val"].setdefault(arm, {})[ck.name] = json.loads((out / "scores.json").read_text())[
                        "overall"
                    ]
    if a.stage in ("all", "test", "table"):
        for arm in arms:
            scores = results["val"].get(arm, {})
            best = choose(a, R / "train" / arm, scores, lambda k: _mean(scores[k]))
            if best is None:
                continue
            out = R / "test" / arm
            if a.stage != "table":
                run(
                    [
                        str(BIN / "vla-gst"),
                        "eval",
                        "agent=vla",
                        f"agent.checkpoint={R / 'train' / arm / 'checkpoints' / best}",
                        f"agent.memory_cache={R / 'stream_cache'}",
                        f"questions={R / 'questions' / 'test'}",
                        f"out={out}",
                        "progress=false",
                    ],
                    R / "logs/test.log",
                )
            results["test"][arm] = {"checkpoint": best, **json.loads((out / "scores.json").read_text())}
        for name in ("memory", "random"):
            out = R / "test" / f"{name}_agent"
            if a.stage != "table":
                run(
                    [
                        str(BIN / "vla-gst"),
                        "eval",
                        f"agent={name}",
                        f"questions={R / 'questions' / 'test'}",
                        f"out={out}",
                        "progress=false",
                    ],
                    R / "logs/test.log",
                )
            results["test"][f"{name}_agent"] = json.loads((out / "scores.json").read_text())
    return results


def _mean(v) -> float:
    return float(v["mean"]) if isinstance(v, dict) else float(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("proof", choices=("house", "libero", "gst"))
    ap.add_argument("--root", required=True)
    ap.add_argument("--stage", default="all", choices=("all", "record", "train", "select", "test", "table"))
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--arms", default="", help="house/gst: comma-separated arms to run (default: memory,no_memory)")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--select", default="val", choices=("val", "final"), help="checkpoint chosen on val, or the last")
    ap.add_argument("--checkpoints", type=int, default=4, help="checkpoints per arm (every steps/N), chosen on val")
    ap.add_argument("--scenes", type=int, default=80, help="house: train apartments recorded (2 episodes each)")
    ap.add_argument("--val-scenes", type=int, default=10)
    ap.add_argument("--test-scenes", type=int, default=20)
    ap.add_argument("--train-scenes", type=int, default=40, help="gst: train apartments of the question set")
    ap.add_argument("--task", type=int, default=0, help="libero: the libero_spatial task")
    ap.add_argument("--demos", type=int, default=50)
    ap.add_argument("--val-trials", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=4)
    a = ap.parse_args()
    res = {"house": house, "libero": libero, "gst": gst}[a.proof](a)
    Path(a.root).mkdir(parents=True, exist_ok=True)
    (Path(a.root) / "results.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    if a.proof == "house":
        print(house_table(res))
    plot_curves(Path(a.root), res.get("val", {}))
    return 0


def _val_score(v) -> float | None:
    """A checkpoint's val number for the plot: GST's overall score, or a rollout's success (in %)."""
    if isinstance(v, dict) and "success" in v:
        return 100.0 * float(v["success"])
    try:
        return _mean(v)
    except (TypeError, KeyError, ValueError):
        return None


def plot_curves(root: Path, val: dict | None = None) -> None:
    """``<root>/curves.png``: training loss (per 10 steps) of every trained arm, and its validation loss
    on held-out episodes -- or, where training ran no validation (GST), the val score of each
    checkpoint (what selection read)."""
    logs = {p.parent.name if p.parent.name != "train" else "policy": p for p in root.glob("train/**/train_log.jsonl")}
    if not logs:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    right = "validation loss (held-out episodes)"
    for arm, path in sorted(logs.items()):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        tr = [(r["step"], r["loss"]) for r in rows if "loss" in r]
        va = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
        if not va and (val or {}).get(arm):
            scored = ((int(k.split("_")[1]), _val_score(v)) for k, v in val[arm].items())
            va = sorted((step, x) for step, x in scored if x is not None)
            right = "val score per checkpoint (selection)"
        if tr:
            axes[0].plot(*zip(*tr), label=arm, lw=1)
        if va:
            axes[1].plot(*zip(*va), "o-", label=arm)
    for ax, title in zip(axes, ("training loss", right)):
        ax.set(title=title, xlabel="step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(root / "curves.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
