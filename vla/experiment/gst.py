"""GST questions as visual QA, with and without the map (kind ``gst``).

Both arms see the question's current view, map and options; the memory arm sees what its spatial
memory made of the question's sensor stream -- the top-down map and the object table measured from
the current view, its target first and marked (vla/policy/question_map.py) -- the video arm 8 frames
of the video instead. Answers are taught as the benchmark scores them (short digit sequences)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import BIN, _mean, budget, checkpoints, choose, doing, only, run

EGO = ("EDv", "EDs", "EDistv", "EDists")  # answered by one row of the memory's object table
# the memory arm's inputs (the stream cache's files are keyed by them; analyses/probe_gst_copy.py reads them too)
MEMORY = {"inputs": ["topdown", "objects", "text"], "map_level": "easy", "map_size": [112, 112], "max_objects": 8}


def _flow(value) -> str:
    """``value`` (a dict of scalars and lists) as a Hydra override value: ``{inputs: [a, b], k: v}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return str(value)


def _ego_mixture(questions: Path, weight: float, cache: Path | None) -> list[str]:
    """``data`` overrides that sample the egocentric subtasks' questions ``weight`` times as often as the
    whole set (a mixture of the two sources; ``[]`` when ``weight`` is 0)."""
    if weight < 0:
        raise SystemExit(f"gst_ego_weight must be >= 0, got {weight}")
    if not weight:
        return []
    part = f"kind: gst_qa, paths: [{questions}], val_fraction: 0" + (f", cache_dir: {cache}" if cache else "")
    ego = f"{{{part}, key: gst_qa_ego, tasks: {_flow(EGO)}, weight: {weight}}}"
    return ["data.kind=mixture", f"data.parts=[{ego}, {{{part}, weight: 1.0}}]"]


def gst(a) -> dict:
    R = Path(a.root)
    sets = {"train": a.train_scenes, "val": a.val_scenes, "test": a.test_scenes}
    if doing(a, "record"):
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
                f"data.memory={_flow(MEMORY)}",
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
    if doing(a, "train"):
        for arm, extra in arms.items():
            mix = _ego_mixture(
                R / "questions" / "train", a.gst_ego_weight, R / "stream_cache" if arm == "memory" else None
            )
            cmd = [str(BIN / "vla-train"), *common, *extra, *mix, f"out={R / 'train' / arm}"]
            run(cmd, R / f"logs/train_{arm}.log")
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
