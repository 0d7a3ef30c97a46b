"""One LIBERO task from scripted demonstrations (kind ``libero``): record on sampled init states, train,
choose the checkpoint and closed-loop setting on held-out sampled states (val), test on the task's 50
official init states."""

from __future__ import annotations

from pathlib import Path

from .common import BIN, agent_settings, checkpoints, demo_training, doing, record_demos, run, starting_weights, summary


RECIPES = {
    # OpenVLA-OFT's ingredients at tiny size (configs/policy/libero_oft.yaml): both cameras, the state
    # through a projector, chunks of 8 decoded in parallel; the chunk runs open loop unless `agents` says
    # otherwise. data.cameras is spelled out as the first runs had it (the default follows the policy).
    "oft": ["policy=libero_oft", "data.cameras=[agentview,wrist]"],
    # the previous proof's (OpenVLA / VST): the agentview image only, one action per call, autoregressive
    "openvla": ["policy=libero", "policy.chunk=1"],
}


def libero(a) -> dict:
    R = Path(a.root)
    cams = "[agentview,wrist]" if a.recipe == "oft" else "[agentview]"
    env = [
        "env=libero",
        f"env.suite={a.suite}",
        f"env.cameras={cams}",
        "env.depth=false",
        "env.segmentation=false",
        f"eval.tasks=[{a.task}]",
    ]
    # sampled states, optionally with the arm's start perturbed as in the official states' recording;
    # the test's official states are never touched
    sampled = ["env.init_states=sampled", *([f"env.arm_init_noise={a.arm_init_noise}"] if a.arm_init_noise else [])]
    if doing(a, "record"):
        record_demos(a, R, [*env, *sampled])  # never the official states the test uses
    # the merged files; a tenth of the episodes held out for the val loss (by id hash: 6 of the 56 recorded)
    common = demo_training(a, R / "demos", RECIPES[a.recipe])
    if doing(a, "train"):
        run([str(BIN / "vla-train"), *common, *starting_weights(a, R), f"out={R / 'train'}"], R / "logs/train.log")
    agents = agent_settings(a)
    results: dict = {"recipe": a.recipe, "suite": a.suite, "task": a.task, "val": {}, "test": {}}
    if a.stage in ("all", "select", "test", "table") and a.select == "val":
        for ck in checkpoints(R / "train"):
            for name, agent in agents.items():
                out = R / "val" / f"{ck.name}-{name}"  # sampled init states no demonstration used
                if a.stage != "table":
                    run(
                        [
                            str(BIN / "vla-rollout"),
                            *env,
                            *sampled,
                            f"eval.first_trial={a.val_first}",
                            f"eval.trials_per_task={a.val_trials}",
                            *agent,
                            f"agent.checkpoint={ck}",
                            f"eval.workers={a.workers}",
                            f"out={out}",
                            "progress=false",
                        ],
                        R / "logs/val.log",
                    )
                if (out / "summary.json").exists():
                    results["val"][f"{ck.name}-{name}"] = summary(out)["success_rate"]
    best = _best(a, R, results["val"])
    if a.stage in ("all", "test", "table") and best is not None:
        ck, name = best
        out = R / "test"
        if a.stage != "table":
            run(
                [
                    str(BIN / "vla-rollout"),
                    *env,
                    "eval.trials_per_task=50",  # the task's 50 official init states, the official protocol
                    *agents[name],
                    f"agent.checkpoint={R / 'train' / 'checkpoints' / ck}",
                    f"eval.workers={a.workers}",
                    "eval.videos=all",
                    f"out={out}",
                    "progress=false",
                ],
                R / "logs/test.log",
            )
        s = summary(out)
        results["test"] = {
            "checkpoint": ck,
            "agent": name,
            "episodes": s["episodes"],
            "success": s["success_rate"],
            "errors": s["errors"],
        }
    return results


def _best(a, R: Path, val: dict) -> tuple[str, str] | None:
    """(checkpoint, agent setting) to test: the best on val (ties: the later checkpoint), or with
    ``select: final`` the last checkpoint with the first setting, fixed before any result is seen."""
    names = list(agent_settings(a))
    if a.select == "final":
        cks = checkpoints(R / "train")
        return (cks[-1].name, names[0]) if cks else None
    if not val:
        return None
    key = max(val, key=lambda k: (val[k] or 0, int(k.split("-")[0].split("_")[1]), -names.index(k.split("-", 1)[1])))
    ck, name = key.split("-", 1)
    return ck, name
