"""Spatial tuning, stage 1 (kind ``spatial``): the tiny backbone trained on spatial-perception questions of
the apartments (docs/SPATIAL.md). ``record`` generates the train, val and test question sets
(``vla-data spatial``); ``train`` one run (``vla-train data=spatial``, no camera: the question's own
images); ``select`` scores every checkpoint on val (``vla-data spatial-eval``); ``test`` the chosen one on
test, beside the question-only ("blind") baseline of the train set. Its checkpoints are what stage 2
starts from (``init_from`` of the ``libero_stage2_*`` recipes)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import BIN, budget, checkpoints, choose, doing, run


def spatial(a) -> dict:
    R = Path(a.root)
    sets = {"train": a.train_scenes, "val": a.val_scenes, "test": a.test_scenes}
    tasks = [f"tasks=[{','.join(a.spatial_tasks)}]"] if a.spatial_tasks else []
    if doing(a, "record"):
        for split, n in sets.items():
            cmd = [str(BIN / "vla-data"), "spatial", "family=house", f"split={split}", f"scenes={n}"]
            cmd += [f"views={a.views}", *tasks, f"per_view={a.per_view}", f"out={R / 'questions'}", "progress=false"]
            run(cmd, R / "logs/generate.log")
    if doing(a, "train"):
        cmd = [str(BIN / "vla-train"), "model=tiny_qwen2_5_vl", "policy=house", "policy.inputs.cameras=[]"]
        cmd += ["data=spatial", f"data.paths=[{R / 'questions' / 'train'}]", "train.threads=1"]
        run(
            [*cmd, *budget(a, batch=16, val_every=a.steps // a.checkpoints), f"out={R / 'train'}"], R / "logs/train.log"
        )
    results: dict = {"val": {}, "test": {}}
    if a.select == "val":
        for ck in checkpoints(R / "train"):
            out = R / "val" / ck.name
            if a.stage in ("all", "select", "test"):
                _eval(ck, R / "questions" / "val", out, R / "logs/val.log")
            if (out / "scores.json").exists():
                results["val"][ck.name] = json.loads((out / "scores.json").read_text())["overall"]
    if a.stage in ("all", "test", "table"):
        best = choose(a, R / "train", results["val"], lambda k: results["val"][k])
        if best is None:
            return results
        if a.stage != "table":
            _eval(
                R / "train" / "checkpoints" / best, R / "questions" / "test", R / "test" / "policy", R / "logs/test.log"
            )
            cmd = [str(BIN / "vla-data"), "spatial-score", f"data={R / 'questions' / 'test'}"]
            run(
                [*cmd, f"baseline={R / 'questions' / 'train'}", "blind=true", f"out={R / 'test' / 'blind'}"],
                R / "logs/test.log",
            )
        for name in ("policy", "blind"):
            path = R / "test" / name / "scores.json"
            if path.exists():
                results["test"][name] = {"overall": json.loads(path.read_text())["overall"]}
        results["test"]["policy"] = {"checkpoint": best, **results["test"].get("policy", {})}
    return results


def _eval(ck: Path, questions: Path, out: Path, log: Path) -> None:
    cmd = [str(BIN / "vla-data"), "spatial-eval", f"checkpoint={ck}", f"data={questions}", f"out={out}"]
    run([*cmd, "progress=false"], log)
