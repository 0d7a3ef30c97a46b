"""``make demo``: the main job on the embedded default, end to end, in a few minutes on 2 cores.

An apartment of the test split; the memory agent explores it with its own frontier navigation while
its spatial memory is built online; GST questions are asked mid-episode (video = the episode so far,
current view = the agent's own) and scored; then the agent goes to the named object using only its
memory. Writes ``runs/demo/``: the video (ego view beside the agent's live top-down map),
``episodes.jsonl``, ``gst.jsonl``, ``summary.json`` and ``gst_scores.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vla.cli.rollout import main as rollout_main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--seed", type=int, default=900003, help="apartment (scene seed; test split is 900000-900999)")
    p.add_argument("--trial", type=int, default=0)
    p.add_argument("--every", type=int, default=30, help="ask GST questions every N steps")
    args = p.parse_args(argv)
    rc = rollout_main(
        [
            "env=house",
            f"env.seed={args.seed}",
            "env.max_steps=500",
            "agent=memory",
            "eval.trials_per_task=1",
            "eval.videos=all",
            "eval.video_fps=10",
            f"gst.every={args.every}",
            "gst.per_subtask=1",
            f"out={args.out}",
        ]
    )
    if rc != 0:
        return rc
    summary = json.loads((Path(args.out) / "summary.json").read_text())
    gst = summary.get("gst")
    if gst and gst.get("per_subtask"):
        from vla.gst.score import load_jsonl, plot_scores, random_scores

        rand = random_scores(load_jsonl(Path(args.out) / "gst.jsonl"))  # uniform answers, the same questions
        plot_scores(gst, Path(args.out) / "gst_scores.png", "memory agent, mid-episode", {"random answers": rand})
        print(
            f"GST mid-episode: overall {gst['overall']:.1f} over {sum(gst['count'].values())} questions "
            f"(random answers to the same questions: {rand['overall']:.1f}) -> {args.out}/gst_scores.png"
        )
    videos = sorted((Path(args.out) / "videos").glob("*.mp4"))
    if videos:
        print(f"video: {videos[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
