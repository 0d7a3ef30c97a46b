"""One language-conditioned policy for a whole LIBERO suite (kind ``libero_suite``; issue 50).

The scripted expert records ``demos`` episodes of each of ``tasks`` on sampled init states
``record_first ..`` (the arm's start perturbed by ``arm_init_noise``, as the official states were
recorded); two arms train on the same demonstrations and budget:

* ``policy``: OFT's recipe at tiny size (both cameras, the state through a projector, chunks decoded in
  parallel; :data:`vla.experiment.libero.RECIPES`), each sample with its episode's instruction;
* ``shuffled``: the same, each sample's instruction drawn from all the suite's instructions
  (``data.instructions=shuffled``): the control that says how far a policy gets without the language
  (libero_spatial's tasks share their objects and differ in which bowl the instruction names).

With ``demos_from`` another suite experiment's recording is trained on, and with ``init_from``
(``experiment:NAME@final``) each arm continues from that experiment's last weights of the same arm: a
longer training of it, under a second warm-up and cosine. Each arm's checkpoints are scored on val
(sampled states ``val_first ..``, ``val_trials`` per task), the best is tested once on the suite's
official init states (``test_trials`` per task: 50, OpenVLA's protocol). On the same test set, once, for
the chosen checkpoints:

* the language check: each scene with the instruction of the task whose bowl stands there as the
  other bowl (``env.instruction=distractor``, official states ``0 .. language_trials-1``), beside the
  same states under their own instruction: success per instruction and which bowl was taken (the named
  one, the other, none);
* the ``policy`` arm under each LIBERO-Plus factor at levels 1 and 2 (``env.perturb``, the first
  ``perturb_trials`` official states of each task).

The table gives success per task with Wilson intervals and the stage where failures stopped.

With ``steps: 0`` nothing is recorded or trained: each arm is ``init_from``'s checkpoint as it is (another
experiment's choice), and val compares ``agents``' closed-loop settings on it (``NAME=k=v,...``: how much of
each chunk is played before re-planning, ``agent.replan``, or the chunks blended, ``agent.ensemble``;
:mod:`vla.agents.chunks`), the best tested as above: a next attempt that costs no training.
"""

from __future__ import annotations

from pathlib import Path

from envs.libero.perturb import FACTORS

from .common import (
    BIN,
    EXPERIMENT,
    agent_settings,
    choose,
    chosen_checkpoint,
    demo_training,
    demonstrations,
    doing,
    only,
    rollout,
    run,
    starting_weights,
    summary,
    val_scores,
)
from .libero import RECIPES
from .tables import read_rows, success_table

ARMS = {"policy": [], "shuffled": ["data.instructions=shuffled"]}
PERTURB_LEVELS = (1, 2)
VIDEO_TRIALS = 2  # the test's filmed states per task (a filmed episode renders every step: ~3x the cost)


def libero_suite(a) -> dict:
    R = Path(a.root)
    tasks = "[" + ",".join(str(t) for t in a.tasks) + "]"
    env = [
        "env=libero",
        f"env.suite={a.suite}",
        "env.cameras=[agentview,wrist]",
        "env.depth=false",
        "env.segmentation=false",
        f"eval.tasks={tasks}",
    ]
    sampled = ["env.init_states=sampled", *([f"env.arm_init_noise={a.arm_init_noise}"] if a.arm_init_noise else [])]
    chosen = only(a, ARMS)
    if a.steps:
        source = demonstrations(a, R, [*env, *sampled])  # never the official states the test uses
        common = demo_training(a, source, RECIPES["oft"])
    if a.steps and doing(a, "train"):
        for arm, extra in chosen.items():
            run(
                [str(BIN / "vla-train"), *common, *starting_weights(a, R, arm), *extra, f"out={R / 'train' / arm}"],
                R / f"logs/train_{arm}.log",
            )
    results: dict = {"val": {}, "test": {}, "language": {}, "perturb": {}}
    for arm in chosen:
        val = [*env, *sampled, f"eval.first_trial={a.val_first}", f"eval.trials_per_task={a.val_trials}"]
        if a.steps:
            scores = val_scores(a, R, arm, val)
            best = choose(a, R / "train" / arm, scores, lambda k: scores[k] or 0)
            ck, agent = R / "train" / arm / "checkpoints" / str(best), ["agent=vla"]
        else:  # nothing trained: init_from's checkpoint, under the setting val chose
            ck = initial_checkpoint(a, R, arm)
            scores, setting = setting_scores(a, R, arm, ck, val)
            best, agent = (str(ck), agent_settings(a)[setting]) if setting else (None, [])
        results["val"][arm] = scores
        if best is None or a.stage not in ("all", "test", "table"):
            continue
        agent = [*agent, f"agent.checkpoint={ck}"]
        # videos of the first VIDEO_TRIALS states of each task; the others render only what the policy reads
        runs = {
            "test": [f"eval.trials_per_task={a.test_trials}", "eval.videos=all", f"eval.video_trials={VIDEO_TRIALS}"]
        }
        runs["language"] = ["env.instruction=distractor", f"eval.trials_per_task={a.language_trials}"]
        if arm == "policy":
            for f in FACTORS:
                for level in PERTURB_LEVELS:
                    runs[f"perturb/{f}_{level}"] = [
                        f"env.perturb={f}:{level}",
                        f"eval.trials_per_task={a.perturb_trials}",
                    ]
        for name, extra in runs.items():
            out = R / name / arm
            if a.stage != "table":
                rollout(a, [*env, *extra, *agent], out, R / "logs/test.log")
        test = {"checkpoint": best, **({"agent": setting} if not a.steps else {})}
        results["test"][arm] = {**test, **success_table(read_rows(R / "test" / arm))}
        results["language"][arm] = language_table(R / "test" / arm, R / "language" / arm, a.language_trials)
        if arm == "policy":
            results["perturb"] = {
                name.split("/", 1)[1]: success_table(read_rows(R / name / arm))["success"]
                for name in runs
                if "/" in name
            }
    return results


def initial_checkpoint(a, R: Path, arm: str) -> Path:
    """With ``steps: 0``, the checkpoint ``arm`` is evaluated with: ``init_from``'s (a path, or another
    experiment's choice, :func:`~.common.chosen_checkpoint`)."""
    if a.init_from.startswith(EXPERIMENT):
        return chosen_checkpoint(R.parent, a.init_from[len(EXPERIMENT) :], arm)
    return Path(a.init_from)


def setting_scores(a, R: Path, arm: str, ck: Path, val: list[str]) -> tuple[dict[str, float], str | None]:
    """Each of ``agents``' closed-loop settings with checkpoint ``ck`` on val (``val/<arm>/<setting>``),
    its success rate, and the setting chosen: the best, ties to the earlier listed (the first is the
    baseline); None until every setting has scored. ``stage=table`` runs nothing."""
    scores: dict[str, float] = {}
    for name, agent in agent_settings(a).items():
        out = R / "val" / arm / name
        if a.stage != "table":
            rollout(a, [*val, *agent, f"agent.checkpoint={ck}"], out, R / "logs/val.log")
        if (out / "summary.json").exists() and summary(out).get("complete", True):
            scores[name] = summary(out)["success_rate"]
    names = list(agent_settings(a))
    if len(scores) < len(names):
        return scores, None
    return scores, max(names, key=lambda n: (scores[n] or 0, -names.index(n)))


def language_table(own: Path, swapped: Path, trials: int) -> dict:
    """Per task, on official states ``0 .. trials-1``: under its own instruction and under the other
    bowl's (``distractor``), the successes and which bowl the policy took -- the one the instruction
    names, the other, or none."""

    def took(rows: list[dict]) -> dict:
        out = {"episodes": len(rows), "success": sum(bool(r["success"]) for r in rows), "named": 0, "other": 0}
        for r in rows:
            pick = r.get("took") or ""
            if pick:
                out["named" if pick == r.get("goal_object") else "other"] += 1
        out["none"] = len(rows) - out["named"] - out["other"]
        return out

    own_rows = [r for r in read_rows(own) if int(r["trial"]) < trials]
    swap_rows = read_rows(swapped)
    table = {}
    for t in sorted({int(r["task_id"]) for r in own_rows + swap_rows}):
        table[str(t)] = {
            "own": took([r for r in own_rows if int(r["task_id"]) == t]),
            "distractor": took([r for r in swap_rows if int(r["task_id"]) == t]),
        }
    both = {k: took(rows) for k, rows in (("own", own_rows), ("distractor", swap_rows))}
    return {"tasks": table, **both}
