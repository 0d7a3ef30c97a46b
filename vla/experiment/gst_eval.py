"""The memory agent on the GST test questions (kind ``gst_eval``): nothing is learned, so there is no val
stage. ``record`` generates the test split's questions (the first ``test_scenes`` test apartments);
``test`` answers them offline (``vla-gst eval``) and asks them in the middle of episodes (``vla-rollout
gst.every=...``) under each of the recipe's perception ``profiles``, and random answers to the same
questions (offline) and random driving with its own questions (mid-episode) beside them. Results:
each run's overall score and question count (``vla-gst``'s ``scores.json``, the rollout's summary)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import BIN, doing, run, summary

RANDOM_MAX_STEPS = 120  # the random agent's mid-episode episodes (it never stops by itself)


def gst_eval(a) -> dict:
    R = Path(a.root)
    questions = generate(a, R)
    runs = {f"offline_{p}": ("offline", "memory", p) for p in a.profiles}
    runs |= {f"mid_{p}": ("mid", "memory", p) for p in a.profiles if a.gst_every}
    runs["offline_random"] = ("offline", "random", "gt")
    if a.gst_every:
        runs["mid_random"] = ("mid", "random", "gt")
    results: dict = {"val": {}, "test": {}}
    for name, (where, agent, profile) in runs.items():
        perception = [] if profile == "gt" else [f"perception={profile}"]
        score = answer(a, R, questions, name, where, [f"agent={agent}", *perception])
        if score is not None:
            results["test"][name] = score
    return results


def generate(a, R: Path) -> Path:
    """The test split's questions (the first ``test_scenes`` test apartments), generated at ``record``."""
    questions = R / "questions" / "test"
    if doing(a, "record"):
        run(
            [str(BIN / "vla-gst"), "generate", "env=house", "split=test", f"scenes={a.test_scenes}"]
            + [f"out={questions}", "progress=false"],
            R / "logs/generate.log",
        )
    return questions


def answer(a, R: Path, questions: Path, name: str, where: str, agent: list[str]) -> dict | None:
    """One run of ``agent`` (its overrides: ``agent=...``, perception) on the questions, offline
    (``vla-gst eval``) or mid-episode (``vla-rollout gst.every=...``) at ``test``; its score, if it ran."""
    out = R / "test" / name
    if a.stage in ("all", "test"):
        if where == "offline":
            cmd = [str(BIN / "vla-gst"), "eval", *agent, f"questions={questions}"]
        else:
            cmd = [str(BIN / "vla-rollout"), "env=house", "env.split=test", f"env.num_scenes={a.test_scenes}"]
            cmd += ["env.num_trials=1", "eval.trials_per_task=1", f"gst.every={a.gst_every}", *agent]
            cmd += [f"eval.workers={a.workers}"]
            cmd += [f"env.max_steps={RANDOM_MAX_STEPS}"] if "agent=random" in agent else []
        run([*cmd, f"out={out}", "progress=false"], R / "logs/test.log")
    return _score(out, where)


def _score(out: Path, where: str) -> dict | None:
    if where == "offline":
        path = out / "scores.json"
        if not path.exists():
            return None
        s = json.loads(path.read_text())
        return {"overall": s["overall"], "questions": s.get("count")}
    if not (out / "summary.json").exists():
        return None
    g = summary(out).get("gst") or {}
    return {"overall": g.get("overall"), "questions": g.get("count"), "episodes": summary(out)["episodes"]}
