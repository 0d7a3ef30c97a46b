"""``python -m vla.detector render|train|eval``: frames from apartments, a training run, an evaluation.

python -m vla.detector render --out runs/detector/frames --split train --count 30
python -m vla.detector render --out runs/detector/frames --split val --count 5
python -m vla.detector train --frames runs/detector/frames --out runs/detector/run1 --epochs 30
python -m vla.detector eval --checkpoint runs/detector/run1/best.pt --frames runs/detector/frames --split val
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vla.detector", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("render", help="render labelled frames of a split's apartments (resumable)")
    r.add_argument("--out", required=True)
    r.add_argument("--split", choices=("train", "val", "test"), required=True)
    r.add_argument("--first", type=int, default=0, help="the split's first apartment index")
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--stride", type=int, default=8, help="one frame every STRIDE route poses")
    t = sub.add_parser("train", help="train on the train split, choose on val (resumes from OUT/last.pt)")
    t.add_argument("--frames", required=True, help="the render output (train/ and val/ under it)")
    t.add_argument("--out", required=True)
    t.add_argument("--epochs", type=int, default=30)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--input-size", type=int, nargs=2, default=(96, 96), metavar=("H", "W"))
    t.add_argument("--widths", type=int, nargs="+", default=(16, 24, 40, 64))
    t.add_argument("--no-depth", action="store_true", help="RGB only")
    t.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps in all")
    t.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("eval", help="per-category recall/precision/AP of a checkpoint on a rendered split")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--frames", required=True)
    e.add_argument("--split", choices=("train", "val", "test"), required=True)
    e.add_argument("--json", default=None, help="also write the report here")
    a = ap.parse_args(argv)
    if a.cmd == "render":
        from .data import render

        render(a.out, a.split, a.first, a.count, a.stride, progress=True)
        return 0
    if a.cmd == "train":
        from .train import TrainConfig, train

        cfg = TrainConfig(
            frames=a.frames,
            out=a.out,
            epochs=a.epochs,
            batch=a.batch,
            lr=a.lr,
            input_size=tuple(a.input_size),
            widths=tuple(a.widths),
            use_depth=not a.no_depth,
            max_steps=a.max_steps,
            seed=a.seed,
        )
        print(json.dumps(train(cfg), indent=1))
        return 0
    from .evaluate import evaluate_split, format_report

    rep = evaluate_split(a.checkpoint, a.frames, a.split)
    print(format_report(rep))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
