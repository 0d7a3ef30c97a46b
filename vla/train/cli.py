"""``vla-train``: train (or resume) a VLA policy from Hydra overrides.

    vla-train model=tiny_qwen2_5_vl policy=house data=house_nav data.paths=[runs/demos] train.steps=200 out=runs/t
    torchrun --nproc_per_node=2 -m vla.train.cli train.strategy=ddp ...        # DDP (or fsdp), one node or many

Writes ``out/train_log.jsonl``, ``out/train_curves.png``, ``out/checkpoints/step_N/`` (the last
``train.keep_last``) and, at the end, ``out/policy`` (a ``save_pretrained`` directory that
``vla.policy.load_policy`` and ``agent=vla agent.checkpoint=...`` read). Run the same command again
to resume exactly where it stopped.
"""

from __future__ import annotations

import json
import sys

USAGE = (
    __doc__
    + """
Config groups (choose with group=name, set fields with group.key=value):
  model:  {model}
  policy: {policy}
  data:   {data}
  train:  {train}
Show the composed config without running: vla-train --cfg [overrides...]
"""
)


def main(argv: list[str] | None = None) -> int:
    from vla.config import compose, groups

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE.format(**{g: ", ".join(groups(g)) for g in ("model", "policy", "data", "train")}))
        return 0
    show = "--cfg" in argv
    argv = [a for a in argv if a != "--cfg"]
    try:
        cfg = compose("train", argv)
        if show:
            print(json.dumps(cfg, indent=2))
            return 0
        from vla.train.loop import train

        summary = train(cfg, progress=bool(cfg.get("progress", True)))
    except ValueError as exc:
        print(f"vla-train: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vla-train: interrupted; run the same command again to resume from the last checkpoint", file=sys.stderr)
        return 130
    if summary.get("rank", 0) != 0:
        return 0  # rank 0 reports
    last = summary.get("last") or {}
    print(
        f"vla-train: {summary['steps']} steps, loss {last.get('loss', float('nan')):.4f}"
        + (f", policy -> {summary['policy']}" if summary.get("policy") else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
