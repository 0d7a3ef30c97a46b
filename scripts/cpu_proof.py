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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proof_common import _mean  # noqa: E402
from proof_gst import gst  # noqa: E402
from proof_house import ARMS, house, house_table  # noqa: E402  (the GST proof's arms are the same two)
from proof_libero import RECIPES, libero  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The proof's options, checked before any stage runs (``--arms``: the house and GST proofs' arms, which
    the proof itself checks only after its recording stage); argparse's usage error otherwise."""
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
    ap.add_argument("--dagger", type=int, default=1, help="house: DAgger rounds after behaviour cloning")
    ap.add_argument("--dagger-scenes", type=int, default=40, help="house: train apartments rolled out per round")
    ap.add_argument("--dagger-steps", type=int, default=1000, help="house: training steps of each DAgger round")
    ap.add_argument("--house-chunk", type=int, default=4, help="house: actions per prediction (parallel decoding)")
    ap.add_argument(
        "--replan",
        type=int,
        default=0,
        help="house: the learned arms' agent.replan in the val and test rollouts (1: re-plan every step; 0: each "
        "chunk to its end); val runs of a setting other than 0 go to val/ARM/roundN_replanK",
    )
    ap.add_argument(
        "--house-recipe",
        default="bins",
        choices=("bins", "plain", "routes", "routes_token"),
        help="house: the demonstrations and inputs",
    )
    ap.add_argument(
        "--house-proprio",
        default=None,
        choices=("motion", "none"),
        help="house: the wheel-odometry proprio token (motion) or none (default: the recipe's; bins: motion)",
    )
    ap.add_argument("--val-scenes", type=int, default=10)
    ap.add_argument("--test-scenes", type=int, default=20)
    ap.add_argument("--train-scenes", type=int, default=40, help="gst: train apartments of the question set")
    ap.add_argument(
        "--gst-ego-weight",
        type=float,
        default=0.0,
        help="gst: sample the four egocentric subtasks' questions this many times as often as the whole set "
        "(a mixture of the two; 0: the whole set alone)",
    )
    ap.add_argument(
        "--train-embeddings",
        action="store_true",
        help="train the whole embedding matrix (policy.freeze_embeddings=false), not only the action rows "
        "(the GST proof's copy probe: frozen, the tiny model half-learns to copy from the memory's table)",
    )
    ap.add_argument("--suite", default="libero_object", help="libero: the suite")
    ap.add_argument("--task", type=int, default=0, help="libero: the task of the suite")
    ap.add_argument("--recipe", default="oft", choices=sorted(RECIPES), help="libero: the policy's inputs and decoding")
    ap.add_argument(
        "--init-from",
        default=None,
        help="libero, house: start the VLA from these weights (train.init_from: a stage-1 checkpoint, "
        "docs/SPATIAL.md; house: round 0, later rounds start from the previous one)",
    )
    ap.add_argument("--demos", type=int, default=50, help="libero: training demonstrations (sampled init states)")
    ap.add_argument("--val-demos", type=int, default=6, help="libero: demonstrations held out for the val loss")
    ap.add_argument("--record-first", type=int, default=0, help="libero: first sampled init state recorded")
    ap.add_argument(
        "--arm-init-noise", type=float, default=0.0, help="libero: env.arm_init_noise of the recorded and val states"
    )
    ap.add_argument("--val-first", type=int, default=1000, help="libero: first sampled init state of the val rollouts")
    ap.add_argument("--val-trials", type=int, default=10, help="libero: val rollouts per checkpoint and setting")
    ap.add_argument("--agent", action="append", help="libero: NAME=k=v,... closed-loop settings compared on val")
    ap.add_argument("--workers", type=int, default=1, help="rollout worker processes")
    a = ap.parse_args(argv)
    unknown = sorted({n for n in a.arms.split(",") if n} - set(ARMS))
    if unknown and a.proof in ("house", "gst"):
        ap.error(f"--arms: unknown arm(s) {unknown}; the {a.proof} proof has {sorted(ARMS)}")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
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


def train_logs(root: Path) -> dict[str, Path]:
    """Every training run's log under ``<root>/train``, by its path there (``memory/round0``; ``policy`` for
    a run at the top), an arm linked in from another root included (``**`` would not follow the link)."""
    logs = {}
    for pattern in ("train_log.jsonl", "*/train_log.jsonl", "*/*/train_log.jsonl"):
        for p in sorted((root / "train").glob(pattern)):
            name = p.parent.relative_to(root / "train").as_posix()
            logs["policy" if name == "." else name] = p
    return logs


def plot_curves(root: Path, val: dict | None = None) -> None:
    """``<root>/curves.png``: training loss (per 10 steps) of every trained arm, and its validation loss
    on held-out episodes -- or, where training ran no validation (GST), the val score of each
    checkpoint (what selection read)."""
    logs = train_logs(root)
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
            scored = ((int(k.split("_")[1]), _val_score(v)) for k, v in val[arm].items() if k.startswith("step_"))
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
