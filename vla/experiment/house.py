"""The apartments, "go to the <object>", with and without the map (kind ``house``).

Behaviour cloning on the memory navigator's demonstrations (round 0), then ``dagger`` rounds of
DAgger: the round's learner drives on train apartments (trials no demonstration used), the memory
navigator -- not privileged: its action is a function of the memory built from the very frames the
learner sees -- labels every state (``agent=dagger``, ``record_keep=all``), and the next round trains
on everything so far, starting from the previous round's weights (``train.init_from``). Both arms
get the same demonstrations, rounds, rollouts and steps. The checkpoint tested is the best round's
final one on the val apartments; results are split by whether the target was in view at the start.

``house_recipe: bins`` (the default) is what made the over-fit replay exact (docs/experiments/house.md): the
navigator decides on its map (no counted scan, a fresh frontier choice every step), the demonstrations
are recorded through the policy's own bins (``agent.execute_bins=256`` with
``data.action_normalization=spec``), and both arms read the base's wheel odometry as a proprio token
(``house_proprio: none`` leaves it out: the last motion predicts the next one so well that a learner
copies it, see docs/experiments/house.md);
``plain`` is the first runs' recipe (``agent=memory`` demonstrations, recorded statistics);
``routes`` is ``bins`` with a teacher that drives by the memory's routes alone
(``agent.follow=routes``, :mod:`vla.navigation.routes`) and a memory arm that reads the same
routes in its table (``data.memory.inputs`` with ``routes``), so that every label is a function of
what the memory arm reads; no proprio token. ``routes_token`` is ``routes`` with the memory arm reading
the routes and the target's row as numbers as well, through the proprio token
(``policy.inputs.proprio_keys=[memory/routes]``, :func:`vla.transforms.map_inputs.route_features`).
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import BIN, HOUSE_MEMORY, budget, checkpoints, doing, only, run, starting_weights, summary

ARMS = {"memory": ["policy=house_memory", f"data.memory={HOUSE_MEMORY}"], "no_memory": ["policy=house"]}
NAVIGATOR = "{initial_turns: 0, replan_every: 1, switch_margin_m: 0.0}"  # decides on its map, every step
_BINS = ["agent.execute_bins=256"]
RECIPES = {
    "plain": {"record": ["agent=memory"], "teacher": [], "train": [], "proprio": "none"},
    "bins": {
        "record": ["agent=dagger", "agent.beta=1.0", *_BINS, f"+agent.teacher.navigator={NAVIGATOR}"],
        "teacher": [*_BINS, f"+agent.teacher.navigator={NAVIGATOR}"],
        "train": ["data.action_normalization=spec"],
        "proprio": "motion",
    },
    "routes": {
        "record": ["agent=dagger", "agent.beta=1.0", *_BINS, "+agent.teacher.follow=routes"],
        "teacher": [*_BINS, "+agent.teacher.follow=routes"],
        "train": ["data.action_normalization=spec"],
        "proprio": "none",
        "memory": HOUSE_MEMORY.replace("inputs: [topdown, objects, text]", "inputs: [topdown, objects, text, routes]"),
    },
}
# routes with the memory arm reading them as numbers too: a proprio token of the routes and the target's row
RECIPES["routes_token"] = {
    **RECIPES["routes"],
    "memory_policy": ["policy.inputs.proprio=token", "policy.inputs.proprio_keys=[memory/routes]"],
}
# the policy's proprioception (a recipe's own, or house_proprio): the base's last motion, or nothing
PROPRIO = {"motion": ["policy.inputs.proprio=token", "policy.inputs.proprio_keys=[sensors/motion]"], "none": []}


def house(a) -> dict:
    R = Path(a.root)
    env = ["env=house", "env.stop_action=true"]
    if doing(a, "record"):
        run(
            [
                str(BIN / "vla-rollout"),
                *env,
                "env.split=train",
                f"env.num_scenes={a.scenes}",
                "eval.trials_per_task=2",
                *RECIPES[a.house_recipe]["record"],
                f"eval.workers={a.workers}",
                f"record={R / 'demos'}",
                f"out={R / 'rec'}",
                "progress=false",
            ],
            R / "logs/record.log",
        )
    arms = only(a, ARMS)
    if "memory" in arms and "memory" in RECIPES[a.house_recipe]:  # the recipe's memory inputs
        arms["memory"] = ["policy=house_memory", f"data.memory={RECIPES[a.house_recipe]['memory']}"]
        arms["memory"] += RECIPES[a.house_recipe].get("memory_policy", [])
    common = train_args(a.house_recipe, a.house_chunk, a.house_proprio)
    if doing(a, "train"):
        for arm, extra in arms.items():
            for r in range(a.dagger + 1):
                _round(a, R, env, common, arm, extra, r)
    results: dict = {"val": {}, "test": {}}
    val = [*env, "env.split=val", f"env.num_scenes={a.val_scenes}", "eval.trials_per_task=1"]
    test = [*env, "env.split=test", f"env.num_scenes={a.test_scenes}", "eval.trials_per_task=1"]
    for arm in arms:
        for r in range(a.dagger + 1):
            ck = _final(R, arm, r)
            if ck is None:
                continue
            out = R / "val" / arm / (f"round{r}" + (f"_replan{a.replan}" if a.replan else ""))
            if a.stage in ("all", "select", "test") and a.select == "val":
                _rollout(a, [*val, *_learner(a, ck)], out, R / "logs/val.log")
            if (out / "summary.json").exists():
                results["val"].setdefault(arm, {})[f"round{r}"] = _nav(out)
    if a.stage in ("all", "test", "table"):
        for profile in a.profiles:  # the arm chosen on val (under gt), then tested under each sensor profile
            tag, sensors = ("", []) if profile == "gt" else (f"_{profile}", [f"perception={profile}"])
            for arm in arms:
                best = _best_round(a, results["val"].get(arm, {}))
                ck = None if best is None else _final(R, arm, best)
                if ck is None:
                    continue
                out = R / "test" / f"{arm}{tag}"
                if a.stage != "table":
                    _rollout(a, [*test, *sensors, *_learner(a, ck)], out, R / "logs/test.log")
                results["test"][f"{arm}{tag}"] = {
                    "round": best,
                    "checkpoint": str(ck),
                    "replan": a.replan,
                    "perception": profile,
                    **_nav(out),
                }
            # the navigator under the same sensors; random perceives nothing: run once
            for name in ("memory_navigator", "random") if profile == a.profiles[0] else ("memory_navigator",):
                out = R / "test" / f"{name}{tag if name != 'random' else ''}"
                if a.stage != "table":
                    agent = "agent=memory" if name == "memory_navigator" else "agent=random"
                    _rollout(a, [*test, *(sensors if name != "random" else []), agent], out, R / "logs/test.log")
                results["test"][out.name] = {"perception": profile if name != "random" else "-", **_nav(out)}
    return results


def train_args(recipe: str, chunk: int, proprio: str | None = None) -> list[str]:
    """What every arm of a house recipe trains with (the arm adds its policy and memory inputs)."""
    return [
        "model=tiny_qwen2_5_vl",
        "policy.action_dim=4",
        f"policy.chunk={chunk}",
        "policy.decoding=parallel",
        "data=house_nav",
        "data.cameras=[ego]",  # as the first runs had it (the default follows the policy's cameras)
        "data.action_mask=[true,true,true,false]",
        *RECIPES[recipe]["train"],
        *PROPRIO[proprio or RECIPES[recipe]["proprio"]],
    ]


def _round(a, R: Path, env: list[str], common: list[str], arm: str, extra: list[str], r: int) -> None:
    """Round ``r`` of one arm: (r > 0) the previous learner's DAgger rollouts, then training on all data."""
    data = [R / "demos"] + [R / "dagger" / arm / f"round{i}" for i in range(1, r + 1)]
    init = starting_weights(a, R, arm)  # round 0: a stage-1 backbone, if given
    if r > 0:
        learner = _final(R, arm, r - 1)
        if learner is None:
            raise SystemExit(f"{arm}: round {r - 1} has no checkpoint to start round {r} from")
        _rollout(
            a,
            [
                *env,
                "env.split=train",
                f"env.num_scenes={a.dagger_scenes}",
                f"eval.first_trial={1 + r}",  # trials 0-1 made the demonstrations; each round a new one
                "eval.trials_per_task=1",
                "agent=dagger",
                f"agent.learner={{name: vla, checkpoint: {learner}}}",
                *RECIPES[a.house_recipe]["teacher"],
                f"record={R / 'dagger' / arm / f'round{r}'}",
                "record_keep=all",
            ],
            R / "rollouts" / arm / f"round{r}",
            R / f"logs/dagger_{arm}.log",
        )
        init = [f"train.init_from={learner}"]
    steps = a.steps if r == 0 else a.dagger_steps
    b = type(a)(**{**vars(a), "steps": steps, "checkpoints": 4})  # saved every quarter (resumable), the last kept
    run(
        [
            str(BIN / "vla-train"),
            *common,
            *extra,
            f"data.paths=[{','.join(str(p) for p in data)}]",
            f"data.cache_dir={R / 'memory_cache'}",
            *budget(b, batch=16, val_every=max(1, steps // 4), keep=1),
            *init,
            f"out={R / 'train' / arm / f'round{r}'}",
        ],
        R / f"logs/train_{arm}.log",
    )


def _learner(a, ck: Path) -> list[str]:
    """A learned arm in a val or test rollout: its checkpoint, and ``replan`` when set."""
    return ["agent=vla", f"agent.checkpoint={ck}", *([f"agent.replan={a.replan}"] if a.replan else [])]


def _final(R: Path, arm: str, r: int) -> Path | None:
    """The last checkpoint of a finished round (vla-train writes summary.json at its end), else None: a
    round still training -- e.g. the other arm's process -- has quarter checkpoints that are not final."""
    out = R / "train" / arm / f"round{r}"
    cks = checkpoints(out)
    return cks[-1] if cks and (out / "summary.json").exists() else None


def _rollout(a, args: list[str], out: Path, log: Path) -> None:
    run([str(BIN / "vla-rollout"), *args, f"eval.workers={a.workers}", f"out={out}", "progress=false"], log)


def _best_round(a, val: dict) -> int | None:
    if a.select == "final" or not val:
        return a.dagger if a.select == "final" else None
    best = max(val, key=lambda k: (val[k]["success"] or 0, val[k]["spl"] or 0, int(k[5:])))
    return int(best[5:])


def _nav(out: Path) -> dict:
    """Success, SPL and 'reached' of a run, overall and split by whether the target was in view at the start."""
    s = summary(out)
    rows = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines() if x.strip()]
    split = {}
    for name, want in (("in_view", True), ("out_of_view", False)):
        sel = [r for r in rows if r.get("visible_at_start") is want and not r.get("error")]
        split[name] = {"episodes": len(sel), "success": sum(r["success"] for r in sel) / len(sel) if sel else None}
    return {
        "episodes": s["episodes"],
        "success": s["success_rate"],
        "spl": s.get("spl"),
        "reached": s.get("reached"),
        "path_m": s.get("path_m"),  # mean path walked per episode (the env's per-episode metric)
        "errors": s["errors"],
        **split,
    }


def house_table(res: dict) -> str:
    rows = [
        "| agent | sensors | episodes | success (stop within 1 m, target in view) | SPL | reached | mean path (m) "
        "| target in view at start | out of view at start | round |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def part(p: dict) -> str:
        return "-" if p["success"] is None else f"{100 * p['success']:.0f} % of {p['episodes']}"

    for name, r in res.get("test", {}).items():
        path = f"{r['path_m']:.2f}" if r.get("path_m") is not None else "-"
        rows.append(
            f"| {name} | {r.get('perception', 'gt')} | {r['episodes']} | {100 * (r['success'] or 0):.1f} % | "
            f"{r['spl'] or 0:.3f} | "
            f"{100 * (r['reached'] or 0):.1f} % | {path} | {part(r['in_view'])} | {part(r['out_of_view'])} | "
            f"{r.get('round', '-')} |"
        )
    return "\n".join(rows)
