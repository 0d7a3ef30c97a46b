"""A detector trained here instead of the simulator's masks, and the memory agent answering GST with it
(kind ``detector``; docs/RESULTS.md 3.10-3.12, docs/GST.md).

``record`` renders labelled frames of the val and train apartments (``python -m vla.detector render``)
and generates the GST test questions; ``train`` trains the detector on the train frames, keeping the
epoch of the best val F1 (``best.pt``, its score threshold chosen on val too); ``select`` reports it on
the val frames; ``test`` renders the test apartments' frames -- only now, after the choice -- and
reports the detector on them (3.11), then the memory agent with ``perception=learned`` and that
checkpoint answers the test questions offline and mid-episode (3.10), and the frame-only control
(``agent.answer_from=frame``: the same answerer given one frame) answers them under ``learned`` and
each of ``profiles`` (3.12).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .common import doing, run
from .gst_eval import answer, generate

INPUT_SIZE = ("96", "96")  # the detector's input, as RESULTS 3.10's run3 had it
WIDTHS = ("16", "24", "40", "64")


def detector(a) -> dict:
    R = Path(a.root)
    frames, D = R / "frames", R / "detector"
    tool = [sys.executable, "-m", "vla.detector"]

    def render(split: str, count: int) -> None:
        cmd = [*tool, "render", "--out", str(frames), "--split", split, "--count", str(count)]
        run(cmd, R / f"logs/render_{split}.log")

    def report(split: str) -> dict | None:
        out = R / split / "detector.json"
        if a.stage in ("all", "select", "test") and (split == "val" or a.stage != "select"):
            out.parent.mkdir(parents=True, exist_ok=True)
            cmd = [*tool, "eval", "--checkpoint", str(D / "best.pt"), "--frames", str(frames), "--split", split]
            run([*cmd, "--json", str(out)], R / f"logs/eval_{split}.log")
        if not out.exists():
            return None
        r = json.loads(out.read_text())
        return {k: r.get(k) for k in ("frames", "apartments", "threshold", "recall", "precision", "f1", "mAP")}

    questions = generate(a, R)
    if doing(a, "record"):
        render("val", a.val_scenes)
        render("train", a.train_scenes)
    if doing(a, "train"):
        cmd = [*tool, "train", "--frames", str(frames), "--out", str(D), "--epochs", str(a.epochs)]
        run([*cmd, "--input-size", *INPUT_SIZE, "--widths", *WIDTHS], R / "logs/train.log")
    results: dict = {"val": {}, "test": {}}
    if (D / "best.pt").exists():
        results["val"]["detector"] = report("val")
    if not (D / "best.pt").exists():
        return results
    if a.stage in ("all", "test"):
        render("test", a.test_scenes)
    results["test"]["detector"] = report("test")
    learned = ["perception=learned", f"perception.checkpoint={D / 'best.pt'}"]
    runs = {"offline_learned": ("offline", ["agent=memory", *learned])}
    if a.gst_every:
        runs["mid_learned"] = ("mid", ["agent=memory", *learned])
    for p in [*a.profiles, "learned"]:  # the frame-only control
        perception = learned if p == "learned" else [] if p == "gt" else [f"perception={p}"]
        runs[f"frame_{p}"] = ("offline", ["agent=memory", "agent.answer_from=frame", *perception])
    for name, (where, agent) in runs.items():
        score = answer(a, R, questions, name, where, agent)
        if score is not None:
            results["test"][name] = score
    return {k: {n: v for n, v in r.items() if v is not None} for k, r in results.items()}
