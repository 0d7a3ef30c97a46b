"""Fixed agents in closed loop (kind ``rollouts``): nothing is learned, so there is no val stage. The
recipe's ``runs`` names each ``vla-rollout`` run by its overrides (the env, its split or init states,
the agent, the trials); ``test`` runs them (resumable, as ``vla-rollout`` is) and ``table`` reads their
summaries: episodes, successes and, for navigation, SPL. A recipe for the results of one command
(the scripted expert on a suite, the navigator on the test apartments)."""

from __future__ import annotations

from pathlib import Path

from .common import BIN, run, summary


def rollouts(a) -> dict:
    R = Path(a.root)
    results: dict = {"val": {}, "test": {}}
    for name, overrides in a.runs.items():
        out = R / "test" / name
        if a.stage in ("all", "test"):
            cmd = [str(BIN / "vla-rollout"), *overrides, f"eval.workers={a.workers}", f"out={out}", "progress=false"]
            run(cmd, R / "logs/test.log")
        if (out / "summary.json").exists():
            s = summary(out)
            row = {"episodes": s["episodes"], "successes": s.get("successes"), "success": s["success_rate"]}
            row |= {"spl": s["spl"]} if s.get("spl") is not None else {}
            results["test"][name] = row
    return results
