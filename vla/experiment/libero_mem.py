"""Does the map help a manipulation policy? ``libero_mem`` in three arms (kind ``libero_mem``; issue 49).

libero_mem's tasks come in pairs whose twins differ only in where the bowl starts (docs/LIBERO.md, "A
memory suite"): once the bowl has moved, nothing in the current frame says where the cheese must go, so
a policy that reads only the current frame solves at most one twin of a scene. Three arms, the same
backbone, demonstrations, budget and selection:

* ``current``: the current frames and the state (the OFT recipe that solved libero_object task 0);
* ``frames``: the same, with ``history`` earlier frames of the agentview camera beside them (the
  episode's first frame and more, evenly spaced: :mod:`vla.transforms.frame_memory`) -- the implicit
  memory a map must beat;
* ``map``: the same, with the spatial memory's top-down map and object table, fused from the agentview
  camera's depth and instance masks -- the table saying where a moved object was first seen, and the
  named objects' starts as numbers through the proprio token (``memory/origins``,
  :func:`vla.transforms.map_inputs.origin_features`): what a map keeps that the current frame has lost.

The scripted expert records ``demos`` episodes of each of ``tasks`` on sampled init states
``record_first ..`` (the arm's start perturbed by ``arm_init_noise``; with depth and masks, which the map
arm's memory fuses; the other arms ignore them);
With ``demos_from`` another libero_mem experiment's recording is trained on (the wrist-only variant
reads the plate pair's); ``cameras`` are the policy's (the frame memory and the map from the first).
Val rollouts use states ``val_first ..`` and the test ``test_first ..`` (``test_trials`` per task): three
disjoint ranges. Each arm's checkpoints are scored on val (success over the tasks), the best is tested
once; the map arm's also under each further perception profile of ``profiles`` (its memory fed by that
profile's depth and detector masks; the other arms read neither). The table gives, per arm and task,
success with its Wilson interval and the stage where failures stopped, and per pair how many scenes (the
same trial of both twins) were solved twice.
"""

from __future__ import annotations

from pathlib import Path

from .common import BIN, choose, demo_training, demonstrations, doing, only, rollout, run, starting_weights, val_scores
from .tables import read_rows, success_table

CAMERAS = ("agentview", "wrist")  # what the recording holds; the policy's cameras are some of them
# the test films the first 5 states of each twin (a filmed episode renders every step; the others only
# what the arm reads -- the current arm one step in eight)
VIDEOS = ("eval.videos=all", "eval.video_trials=5")


def map_memory(camera: str) -> str:
    """The map arm's memory: fused from ``camera`` (agentview by default: fixed, it sees the whole table),
    the map around everything seen."""
    return (
        f"{{camera: {camera}, inputs: [topdown, objects, text, origins], map_level: medium, map_frame: fit, "
        "map_size: [112, 112], max_objects: 8}"
    )


def arms(history: int, cameras: list[str] | tuple[str, ...] = CAMERAS) -> dict[str, list[str]]:
    """Each arm's training overrides; the frames and the map come from the first of ``cameras`` (the
    policy's own cameras, libero_oft's two, are named only when they differ)."""
    cams = [] if list(cameras) == list(CAMERAS) else [f"policy.inputs.cameras=[{','.join(cameras)}]"]
    return {
        "current": cams,
        "frames": [*cams, f"policy.inputs.history={history}", f"policy.inputs.history_camera={cameras[0]}"],
        "map": [
            *cams,
            "policy.inputs.memory_map=true",
            "policy.inputs.memory_text=true",
            "policy.inputs.proprio_keys=[state,memory/origins]",
            f"data.memory={map_memory(cameras[0])}",
        ],
    }


def libero_mem(a) -> dict:
    R = Path(a.root)
    tasks = "[" + ",".join(str(t) for t in a.tasks) + "]"
    # the recording holds both cameras (a variant reading fewer trains on the same files); rollouts render
    # the policy's own
    recorded = [
        "env=libero",
        f"env.suite={a.suite}",
        "env.init_states=sampled",
        f"env.cameras=[{','.join(CAMERAS)}]",
        f"eval.tasks={tasks}",
    ]
    env = [f"env.cameras=[{','.join(a.cameras)}]" if x.startswith("env.cameras=") else x for x in recorded]
    # the demonstrations' arm starts perturbed (the states a policy drifts into); val and test start as the task does
    noise = [f"env.arm_init_noise={a.arm_init_noise}"] if a.arm_init_noise else []
    sensed = ["env.depth=true", "env.segmentation=true"]  # what the map arm's memory fuses
    plain = ["env.depth=false", "env.segmentation=false"]
    source = demonstrations(a, R, [*recorded, *noise, *sensed])
    chosen = only(a, arms(a.history, a.cameras))
    common = demo_training(a, source, ["policy=libero_oft"])
    if doing(a, "train"):
        for arm, extra in chosen.items():
            out = R / "train" / arm
            cache = [f"data.cache_dir={source.parent / 'memory_cache'}"] if arm == "map" else []
            run(
                [str(BIN / "vla-train"), *common, *starting_weights(a, R, arm), *extra, *cache, f"out={out}"],
                R / f"logs/train_{arm}.log",
            )
    results: dict = {"val": {}, "test": {}}
    for arm in chosen:
        rollout_env = [*env, *(sensed if arm == "map" else plain)]
        scores = val_scores(
            a, R, arm, [*rollout_env, f"eval.first_trial={a.val_first}", f"eval.trials_per_task={a.val_trials}"]
        )
        results["val"][arm] = scores
        best = choose(a, R / "train" / arm, scores, lambda k: scores[k] or 0)
        if best is None or a.stage not in ("all", "test", "table"):
            continue
        ck = R / "train" / arm / "checkpoints" / best
        cmd = [*rollout_env, f"eval.first_trial={a.test_first}", f"eval.trials_per_task={a.test_trials}"]
        # the map arm, chosen under gt, is tested under each profile too: only it reads depth and masks
        for profile in dict.fromkeys(["gt", *(a.profiles if arm == "map" else [])]):
            tag, sensors = ("", []) if profile == "gt" else (f"_{profile}", [f"perception={profile}"])
            out = R / "test" / f"{arm}{tag}"
            if a.stage != "table":
                args = [*cmd, *sensors, "agent=vla", f"agent.checkpoint={ck}", *VIDEOS]
                rollout(a, args, out, R / "logs/test.log")
            results["test"][f"{arm}{tag}"] = {"checkpoint": best, "perception": profile, **table_row(out)}
    return results


def table_row(out: Path) -> dict:
    """Success overall and per task with Wilson intervals, per task the stage where its failures stopped
    (:func:`vla.experiment.tables.success_table`), and per pair (tasks 2k, 2k+1: twins) the scenes -- the
    same trial of both twins -- solved twice, from a rollout's episodes."""
    rows = read_rows(out)
    ok: dict[tuple[int, int], bool] = {(int(r["task_id"]), int(r["trial"])): bool(r["success"]) for r in rows}
    pairs = {}
    for t in sorted({k[0] // 2 * 2 for k in ok}):
        scenes = sorted({trial for (task, trial) in ok if task in (t, t + 1)})
        both = [s for s in scenes if ok.get((t, s)) and ok.get((t + 1, s))]
        pairs[f"{t}-{t + 1}"] = {"scenes": len(scenes), "both_solved": len(both)}
    return {**success_table(rows), "pairs": pairs}
