"""``make demo``: the main job on the embedded default, end to end, in a few minutes on 2 cores.

For now: the scripted expert on a real LIBERO task, rendered, with a video of the episode.
"""

from __future__ import annotations

import argparse
import sys

from vla.cli.rollout import main as rollout_main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/demo")
    args = p.parse_args(argv)
    return rollout_main([
        "env=libero", "env.suite=libero_object", "agent=scripted",
        "eval.tasks=[0]", "eval.trials_per_task=1", "eval.videos=all", f"out={args.out}",
    ])


if __name__ == "__main__":
    sys.exit(main())
